// One rung of the study ladder: its entry is in reimpl/ladder/registry.py, the rungs' contract in ladder.cuh.
#include "ladder.cuh"

namespace ladder {

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

}  // namespace ladder
