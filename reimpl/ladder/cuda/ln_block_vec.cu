// One rung of the study ladder: its entry is in reimpl/ladder/registry.py, the rungs' contract in ladder.cuh.
#include "ladder.cuh"

namespace ladder {

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

}  // namespace ladder
