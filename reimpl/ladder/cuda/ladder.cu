// The study ladder: LayerNorm forward kernels from the textbook loop to apex's fused shape.
// Each rung changes one thing from the rung below it; the first line above each kernel says what.
// They are ours, written to teach, and are NOT bit-identical to torch (see the ladder pages for each
// rung's measured error); torch's own kernel is the mirror in reimpl/mirror/cuda/.
//
//   rung 1  ln_naive_two_pass     one thread per row: a mean loop, a variance loop, a normalise loop
//   rung 2  ln_warp_sums          one warp per row; sum and sum of squares in one pass, shuffle-reduced
//   rung 3  ln_warp_welford       one warp per row; Welford per lane, lanes merged with Chan's formula
//   rung 4  ln_block_welford      one block per row; warps merged through a shared-memory tree
//   rung 5  ln_block_cached       rung 4 with the row kept in shared memory: one global read
//   rung 6  ln_block_vec          rung 5 with 128-bit loads and stores
//   rung 7  ln_apex               apex's shape: (32, 4) blocks striding over rows, chunked Welford,
//                                 then apply (cuWelfordMuSigma2 / cuApplyLayerNorm's structure)
//
// Common contract (the launcher in reimpl/ladder/rungs.py): X is M x N, contiguous; W and B are
// N-vectors or nullptr; Y has X's shape; mean and rstd are M floats. Statistics are float whatever T
// is. rms_norm (rungs 2 and 3's templates): no mean is subtracted, mean is not written.
#include "common.cuh"

namespace ladder {

// y = xhat * w + b, each factor optional (nullptr: LayerNorm without elementwise affine)
template <typename T>
__device__ __forceinline__ float affine(float xhat, const T* W, const T* B, int64_t j) {
  float y = xhat;
  if (W != nullptr) y = y * to_f(W[j]);
  if (B != nullptr) y = y + to_f(B[j]);
  return y;
}

// --8<-- [start:ln_naive_two_pass]
// Rung 1: the plain loop a textbook writes, one thread per row. Neighbouring threads read addresses
// N elements apart, so no load is coalesced, and the row is read three times.
template <typename T, typename T_ACC>
__global__ void ln_naive_two_pass(const T* X, const T* W, const T* B, T* Y, float* mean, float* rstd,
                                  int64_t M, int64_t N, T_ACC eps) {
  const int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (row >= M) return;
  const T* x = X + row * N;
  float sum = 0.f;
  for (int64_t j = 0; j < N; j++) sum += to_f(x[j]);
  const float mu = sum / N;
  float sq = 0.f;
  for (int64_t j = 0; j < N; j++) {
    float d = to_f(x[j]) - mu;
    sq += d * d;
  }
  const float rs = rsqrtf(sq / N + eps);
  for (int64_t j = 0; j < N; j++) Y[row * N + j] = from_f<T>(affine((to_f(x[j]) - mu) * rs, W, B, j));
  mean[row] = mu;
  rstd[row] = rs;
}
// --8<-- [end:ln_naive_two_pass]

// --8<-- [start:ln_warp_sums]
// Rung 2: one warp per row, lanes read adjacent elements (coalesced), and a single pass gathers
// sum(x) and sum(x^2); var = E[x^2] - mean^2 cancels catastrophically when |mean| >> std.
// rms_norm needs only sum(x^2), so this one-pass form is exact enough for RMSNorm.
template <typename T, typename T_ACC, bool rms_norm>
__global__ void ln_warp_sums(const T* X, const T* W, const T* B, T* Y, float* mean, float* rstd,
                             int64_t M, int64_t N, T_ACC eps) {
  const int64_t row = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= M) return;  // whole warps leave together: blockDim.x is a multiple of 32
  const T* x = X + row * N;
  float s = 0.f, ss = 0.f;
  for (int64_t j = lane; j < N; j += 32) {
    float v = to_f(x[j]);
    s += v;
    ss += v * v;
  }
  for (int mask = 16; mask > 0; mask >>= 1) {
    s += __shfl_xor_sync(FULL_MASK, s, mask);
    ss += __shfl_xor_sync(FULL_MASK, ss, mask);
  }
  const float mu = rms_norm ? 0.f : s / N;
  // the textbook formula; it can come out negative after cancellation, which would make rsqrt NaN
  const float var = fmaxf(ss / N - mu * mu, 0.f);
  const float rs = rsqrtf(var + eps);
  for (int64_t j = lane; j < N; j += 32) Y[row * N + j] = from_f<T>(affine((to_f(x[j]) - mu) * rs, W, B, j));
  if (lane == 0) {
    if (!rms_norm) mean[row] = mu;
    rstd[row] = rs;
  }
}
// --8<-- [end:ln_warp_sums]

// --8<-- [start:ln_warp_welford]
// Rung 3: as rung 2, but each lane keeps a Welford state (no cancellation), and lanes merge their
// states with Chan's parallel formula over the xor butterfly.
template <typename T, typename T_ACC>
__global__ void ln_warp_welford(const T* X, const T* W, const T* B, T* Y, float* mean, float* rstd,
                                int64_t M, int64_t N, T_ACC eps) {
  const int64_t row = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= M) return;
  const T* x = X + row * N;
  Welford s{0.f, 0.f, 0.f};
  for (int64_t j = lane; j < N; j += 32) welford_push(s, to_f(x[j]));
  s = warp_merge(s);
  const float rs = rsqrtf(s.m2 / N + eps);
  for (int64_t j = lane; j < N; j += 32) Y[row * N + j] = from_f<T>(affine((to_f(x[j]) - s.mean) * rs, W, B, j));
  if (lane == 0) {
    mean[row] = s.mean;
    rstd[row] = rs;
  }
}
// --8<-- [end:ln_warp_welford]

// --8<-- [start:ln_block_welford]
// Rung 4: one block per row, so a long row has blockDim.x threads instead of 32 reading it; warps
// publish their states to shared memory and merge in a tree.
template <typename T, typename T_ACC>
__global__ void ln_block_welford(const T* X, const T* W, const T* B, T* Y, float* mean, float* rstd,
                                 int64_t M, int64_t N, T_ACC eps) {
  __shared__ Welford smem[32];
  const int64_t row = blockIdx.x;
  const T* x = X + row * N;
  Welford s{0.f, 0.f, 0.f};
  for (int64_t j = threadIdx.x; j < N; j += blockDim.x) welford_push(s, to_f(x[j]));
  s = block_merge(s, smem);
  const float rs = rsqrtf(s.m2 / N + eps);
  for (int64_t j = threadIdx.x; j < N; j += blockDim.x)
    Y[row * N + j] = from_f<T>(affine((to_f(x[j]) - s.mean) * rs, W, B, j));
  if (threadIdx.x == 0) {
    mean[row] = s.mean;
    rstd[row] = rs;
  }
}
// --8<-- [end:ln_block_welford]

// --8<-- [start:ln_block_cached]
// Rung 5: as rung 4, but the first pass also copies the row into shared memory (in its storage
// type), and the normalisation reads it from there: global memory is read once. The launcher
// takes this rung only where the row fits the 48 KiB a kernel gets without opting in.
template <typename T, typename T_ACC>
__global__ void ln_block_cached(const T* X, const T* W, const T* B, T* Y, float* mean, float* rstd,
                                int64_t M, int64_t N, T_ACC eps) {
  __shared__ Welford smem[32];
  extern __shared__ unsigned char row_bytes[];
  T* cached = reinterpret_cast<T*>(row_bytes);
  const int64_t row = blockIdx.x;
  const T* x = X + row * N;
  Welford s{0.f, 0.f, 0.f};
  for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
    T v = x[j];
    cached[j] = v;  // each thread later reads back only what it wrote: no barrier needed for it
    welford_push(s, to_f(v));
  }
  s = block_merge(s, smem);
  const float rs = rsqrtf(s.m2 / N + eps);
  for (int64_t j = threadIdx.x; j < N; j += blockDim.x)
    Y[row * N + j] = from_f<T>(affine((to_f(cached[j]) - s.mean) * rs, W, B, j));
  if (threadIdx.x == 0) {
    mean[row] = s.mean;
    rstd[row] = rs;
  }
}
// --8<-- [end:ln_block_cached]

// --8<-- [start:ln_block_vec]
// Rung 6: rung 5 with 16-byte loads and stores (4 floats or 8 halves per instruction), which cuts
// the load/store instructions by 4-8x. Taken when rows, W and B are 16-byte aligned and N is a
// multiple of the vector width; the launcher falls back to rung 5 otherwise.
template <typename T, int VEC>
struct alignas(16) Vec {
  T v[VEC];
};

template <typename T, typename T_ACC>
__global__ void ln_block_vec(const T* X, const T* W, const T* B, T* Y, float* mean, float* rstd,
                             int64_t M, int64_t N, T_ACC eps) {
  constexpr int VEC = 16 / sizeof(T);
  using V = Vec<T, VEC>;
  __shared__ Welford smem[32];
  extern __shared__ unsigned char row_bytes[];
  V* cached = reinterpret_cast<V*>(row_bytes);
  const int64_t row = blockIdx.x, nvec = N / VEC;
  const V* x = reinterpret_cast<const V*>(X + row * N);
  Welford s{0.f, 0.f, 0.f};
  for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    V v = x[i];
    cached[i] = v;
#pragma unroll
    for (int k = 0; k < VEC; k++) welford_push(s, to_f(v.v[k]));
  }
  s = block_merge(s, smem);
  const float rs = rsqrtf(s.m2 / N + eps);
  V* y = reinterpret_cast<V*>(Y + row * N);
  for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    V v = cached[i], out;
#pragma unroll
    for (int k = 0; k < VEC; k++) out.v[k] = from_f<T>(affine((to_f(v.v[k]) - s.mean) * rs, W, B, i * VEC + k));
    y[i] = out;
  }
  if (threadIdx.x == 0) {
    mean[row] = s.mean;
    rstd[row] = rs;
  }
}
// --8<-- [end:ln_block_vec]

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
