// One rung of the study ladder: its entry is in reimpl/ladder/registry.py, the rungs' contract in ladder.cuh.
#include "ladder.cuh"

namespace ladder {

// --8<-- [start:ln_apex]
// Rung 7: the shape of NVIDIA apex's fused LayerNorm, from which torch's compute_stats descends:
// blocks of (32, 4) threads stride over rows (blockIdx.y, step gridDim.y); each thread folds chunks
// of 4 adjacent elements with Welford's update (count as a float, a true division), lanes merge
// through shuffles, warps merge through shared memory in a halving tree, then the same block
// applies the normalisation to its row. (Written by us from apex's structure.)
template <typename T, typename T_ACC>
__global__ void ln_apex(const T* X, const T* W, const T* B, T* Y, float* mean, float* rstd,
                        int64_t M, int64_t N, T_ACC eps) {
  __shared__ Welford smem[32];
  const int thrx = threadIdx.x + threadIdx.y * blockDim.x, numx = blockDim.x * blockDim.y;
  for (int64_t row = blockIdx.y; row < M; row += gridDim.y) {
    const T* x = X + row * N;
    Welford s{0.f, 0.f, 0.f};
    int64_t l = 4 * thrx;
    for (; l + 3 < N; l += 4 * numx) {
#pragma unroll
      for (int k = 0; k < 4; k++) welford_push(s, to_f(x[l + k]));
    }
    for (; l < N; ++l) welford_push(s, to_f(x[l]));  // the tail chunk, < 4 elements
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
    const float rs = rsqrtf(s.m2 / N + eps);
    for (int64_t j = thrx; j < N; j += numx) Y[row * N + j] = from_f<T>(affine((to_f(x[j]) - s.mean) * rs, W, B, j));
    if (thrx == 0) {
      mean[row] = s.mean;
      rstd[row] = rs;
    }
    __syncthreads();  // smem is reused by the next row
  }
}
// --8<-- [end:ln_apex]

}  // namespace ladder
