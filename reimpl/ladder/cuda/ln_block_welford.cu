// One rung of the study ladder: its entry is in reimpl/ladder/registry.py, the rungs' contract in ladder.cuh.
#include "ladder.cuh"

namespace ladder {

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

}  // namespace ladder
