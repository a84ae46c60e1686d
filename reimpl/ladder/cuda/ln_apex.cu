// One rung of the study ladder: its entry is in reimpl/ladder/registry.py, the rungs' contract in ladder.cuh.
#include "ladder.cuh"

namespace ladder {

// --8<-- [start:ln_apex]
// Rung 7: the shape of NVIDIA apex's fused LayerNorm, from which torch's compute_stats descends:
// blocks of (32, 4) threads stride over rows (blockIdx.y, step gridDim.y); each thread folds chunks
// of 4 adjacent elements with Welford's update (count as a float, a division), lanes merge through
// shuffles, warps merge through shared memory in a halving tree, then the same block applies the
// normalisation to its row. float16 rows take apex's at::Half path: chunks of 8 read as 4 half2
// pairs, after one element where the row starts off a 4-byte boundary. As in apex, indices inside a
// row are 32-bit ints, the pointers __restrict__, and the weight-and-bias test sits outside the
// apply loop. The file is built as apex builds it (registry.APEX_NVCC): --use_fast_math makes each
// division an approximate reciprocal and a multiply. (Written by us from apex's structure.)
template <typename T>
__device__ __forceinline__ void apex_fold(const T* __restrict__ x, int N, int thrx, int numx, Welford& s) {
  int l = 4 * thrx;
  for (; l + 3 < N; l += 4 * numx) {
#pragma unroll
    for (int k = 0; k < 4; k++) welford_push(s, to_f(x[l + k]));
  }
  for (; l < N; ++l) welford_push(s, to_f(x[l]));  // the tail chunk, < 4 elements
}
__device__ __forceinline__ void apex_fold(const __half* __restrict__ x, int N, int thrx, int numx, Welford& s) {
  int l = 8 * thrx;
  if ((reinterpret_cast<unsigned long long>(x) & 3) != 0) {  // the row starts mid-pair: thread 0 takes x[0]
    if (thrx == 0) welford_push(s, to_f(x[0]));
    ++l;
  }
  for (; l + 7 < N; l += 8 * numx) {
#pragma unroll
    for (int k = 0; k < 8; k += 2) {
      const float2 c = __half22float2(*reinterpret_cast<const __half2*>(x + l + k));
      welford_push(s, c.x);
      welford_push(s, c.y);
    }
  }
  for (; l < N; ++l) welford_push(s, to_f(x[l]));
}

template <typename T, typename T_ACC>
__global__ void ln_apex(const T* __restrict__ X, const T* __restrict__ W, const T* __restrict__ B, T* __restrict__ Y,
                        float* __restrict__ mean, float* __restrict__ rstd, int64_t M, int64_t N, T_ACC eps) {
  __shared__ Welford smem[32];
  const int thrx = threadIdx.x + threadIdx.y * blockDim.x, numx = blockDim.x * blockDim.y;
  const int n2 = (int)N;  // apex's int: a row is far shorter than 2^31 elements
  for (int64_t row = blockIdx.y; row < M; row += gridDim.y) {
    const T* __restrict__ x = X + row * N;
    T* __restrict__ y = Y + row * N;
    Welford s{0.f, 0.f, 0.f};
    apex_fold(x, n2, thrx, numx, s);
    // block_merge wants a flat thread index: (32, 4) is four whole warps in threadIdx.y order
    s = warp_merge(s);
    if (threadIdx.x == 0) smem[threadIdx.y] = s;
    __syncthreads();
    for (int half = blockDim.y / 2; half > 0; half /= 2) {
      if (threadIdx.x == 0 && threadIdx.y < half)
        smem[threadIdx.y] = welford_merge(smem[threadIdx.y], smem[threadIdx.y + half]);
      __syncthreads();
    }
    s = smem[0];
    const float rs = rsqrtf(s.m2 / (float)n2 + eps);
    if (W != nullptr && B != nullptr) {
      for (int j = thrx; j < n2; j += numx) y[j] = from_f<T>(to_f(W[j]) * (rs * (to_f(x[j]) - s.mean)) + to_f(B[j]));
    } else {
      for (int j = thrx; j < n2; j += numx) y[j] = from_f<T>(affine((to_f(x[j]) - s.mean) * rs, W, B, j));
    }
    if (thrx == 0) {
      mean[row] = s.mean;
      rstd[row] = rs;
    }
    __syncthreads();  // smem is reused by the next row
  }
}
// --8<-- [end:ln_apex]

}  // namespace ladder
