// One rung of the study ladder: its entry is in reimpl/ladder/registry.py, the rungs' contract in ladder.cuh.
#include "ladder.cuh"

namespace ladder {

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

}  // namespace ladder
