// One rung of the study ladder: its entry is in reimpl/ladder/registry.py, the rungs' contract in ladder.cuh.
#include "ladder.cuh"

namespace ladder {

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

}  // namespace ladder
