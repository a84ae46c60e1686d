// One rung of the study ladder: its entry is in reimpl/ladder/registry.py, the rungs' contract in ladder.cuh.
#include "ladder.cuh"

namespace ladder {

// --8<-- [start:ln_warp_regs]
// Rung 8: one warp per row with the whole row in registers, read as 16-byte vectors (up to four
// per lane): one global read, no shared memory and no barrier. Rows this short leave most of a
// 256-thread block idle in rungs 4-6; a warp holds them exactly. Taken for aligned rows of up to
// 128 vectors (512 floats, 1024 halves); the launcher falls back to rung 6 otherwise.
template <typename T, int VEC>
struct alignas(16) Slot {
  T v[VEC];
};

template <typename T, typename T_ACC>
__global__ void ln_warp_regs(const T* X, const T* W, const T* B, T* Y, float* mean, float* rstd,
                             int64_t M, int64_t N, T_ACC eps) {
  constexpr int VEC = 16 / sizeof(T), SLOTS = 4;
  using V = Slot<T, VEC>;
  const int64_t row = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= M) return;  // whole warps leave: no barrier below
  const int nvec = (int)(N / VEC);
  const V* x = reinterpret_cast<const V*>(X + row * N);
  V held[SLOTS];
  Welford s{0.f, 0.f, 0.f};
#pragma unroll
  for (int k = 0; k < SLOTS; k++) {
    const int i = lane + 32 * k;  // consecutive lanes read consecutive 16 bytes
    if (i < nvec) {
      held[k] = x[i];
#pragma unroll
      for (int e = 0; e < VEC; e++) welford_push(s, to_f(held[k].v[e]));
    }
  }
  s = warp_merge(s);  // lanes with no elements hold n = 0, which the merge passes over
  const float rs = rsqrtf(s.m2 / N + eps);
  V* y = reinterpret_cast<V*>(Y + row * N);
#pragma unroll
  for (int k = 0; k < SLOTS; k++) {
    const int i = lane + 32 * k;
    if (i < nvec) {
      V out;
#pragma unroll
      for (int e = 0; e < VEC; e++)
        out.v[e] = from_f<T>(affine((to_f(held[k].v[e]) - s.mean) * rs, W, B, (int64_t)i * VEC + e));
      y[i] = out;
    }
  }
  if (lane == 0) {
    mean[row] = s.mean;
    rstd[row] = rs;
  }
}
// --8<-- [end:ln_warp_regs]

}  // namespace ladder
