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
// One block per channel c. Channel c's elements are N runs of HW contiguous values, one run per
// sample, C * HW apart: a thread walks the flattened index k = n * HW + s in steps of blockDim.x,
// carrying (n, s) along instead of dividing by HW for every element.
template <typename T, typename T_ACC, typename P>
__global__ void bn_train_forward(const T* X, const P* W, const P* B, T* Y, float* save_mean, float* save_invstd,
                                 P* running_mean, P* running_var, int64_t N, int64_t C, int64_t HW,
                                 T_ACC momentum, T_ACC eps) {
  __shared__ Welford smem[32];
  const int64_t c = blockIdx.x, count = N * HW;
  const int64_t dn = blockDim.x / HW, ds = blockDim.x % HW;  // one step of the walk, as (samples, spatial)
  Welford s{0.f, 0.f, 0.f};
  {
    int64_t n = threadIdx.x / HW, sp = threadIdx.x % HW;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      welford_push(s, to_f(X[(n * C + c) * HW + sp]));
      n += dn;
      sp += ds;
      if (sp >= HW) {
        sp -= HW;
        n++;
      }
    }
  }
  s = block_merge(s, smem);  // every thread gets the channel's (count, mean, M2)
  const float var = s.m2 / (float)count;  // biased: the variance that normalises
  const float invstd = rsqrtf(var + eps);
  if (threadIdx.x == 0) {
    save_mean[c] = s.mean;
    save_invstd[c] = invstd;
    if (running_mean != nullptr) {
      // the running variance is the unbiased one, M2 / (count - 1); the launcher refuses count = 1
      const float unbiased = s.m2 / (float)(count - 1);
      running_mean[c] = from_f<P>((1.f - momentum) * to_f(running_mean[c]) + momentum * s.mean);
      running_var[c] = from_f<P>((1.f - momentum) * to_f(running_var[c]) + momentum * unbiased);
    }
  }
  // the broadcast: y = (x - mean) * (invstd * w) + b, one scale and one shift per channel
  const float w = W != nullptr ? to_f(W[c]) : 1.f, b = B != nullptr ? to_f(B[c]) : 0.f;
  const float scale = invstd * w;
  int64_t n = threadIdx.x / HW, sp = threadIdx.x % HW;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const int64_t i = (n * C + c) * HW + sp;
    Y[i] = from_f<T>((to_f(X[i]) - s.mean) * scale + b);
    n += dn;
    sp += ds;
    if (sp >= HW) {
      sp -= HW;
      n++;
    }
  }
}
// --8<-- [end:bn_train_forward]

}  // namespace ladder
