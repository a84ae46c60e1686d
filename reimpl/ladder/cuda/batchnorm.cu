// BatchNorm's training forward, LayerNorm's sibling: the same Welford reduction, over the batch
// instead of over a row. Ours, written to teach; not bit-identical to torch (cuDNN or torch's own
// batch_norm kernels), with its error bound stated in reimpl/ladder/accuracy.py.
//
// Contract (the launcher in reimpl/ladder/batchnorm.py): X is (N, C, HW) contiguous, HW the product
// of the spatial sizes (1 for (N, C) input); W, B are C-vectors of type P or nullptr; Y has X's shape;
// save_mean and save_invstd are C floats; running_mean and running_var are C-vectors of type P,
// updated in place with `momentum`, or nullptr (no running statistics). Arithmetic is float.
#include "common.cuh"

namespace ladder {

// --8<-- [start:bn_train_forward]
// One block per channel c: its threads walk the channel's N runs of HW values (channel_walk in
// common.cuh) twice, once to fold them, once to write y.
template <typename T, typename T_ACC, typename P>
__global__ void bn_train_forward(const T* X, const P* W, const P* B, T* Y, float* save_mean, float* save_invstd,
                                 P* running_mean, P* running_var, int64_t N, int64_t C, int64_t HW,
                                 T_ACC momentum, T_ACC eps) {
  __shared__ Welford smem[32];
  const int64_t c = blockIdx.x, count = N * HW;
  Welford s{0.f, 0.f, 0.f};
  channel_walk(c, N, C, HW, [&](int64_t i) { welford_push(s, to_f(X[i])); });
  s = block_merge(s, smem);  // every thread gets the channel's (count, mean, M2)
  const float invstd = bn_invstd(s, count, eps);
  if (threadIdx.x == 0) bn_store_stats(s, invstd, c, count, momentum, save_mean, save_invstd, running_mean, running_var);
  // the broadcast: y = (x - mean) * (invstd * w) + b, one scale and one shift per channel
  const float w = W != nullptr ? to_f(W[c]) : 1.f, b = B != nullptr ? to_f(B[c]) : 0.f;
  const float scale = invstd * w;
  channel_walk(c, N, C, HW, [&](int64_t i) { Y[i] = from_f<T>((to_f(X[i]) - s.mean) * scale + b); });
}
// --8<-- [end:bn_train_forward]

}  // namespace ladder
