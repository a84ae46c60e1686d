// Helpers shared by the ladder's kernels (the rungs' ln_*.cu, batchnorm.cu, softmax.cu): storage-type
// conversions, and the Welford state with its update, Chan's merge, and its warp and block
// reductions on the shared scaffold (reduce.cuh).
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "reduce.cuh"

typedef long int64_t;

namespace ladder {

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// A Welford state: count, mean, and M2 (the sum of squared deviations from the mean).
struct Welford {
  float n, mean, m2;
};

__device__ __forceinline__ void welford_push(Welford& s, float v) {
  s.n += 1.f;
  float d = v - s.mean;
  s.mean += d / s.n;
  s.m2 += d * (v - s.mean);
}

// --8<-- [start:welford_merge]
// Chan et al.'s merge of two partial states. Callers pass the lower-indexed part as `a`, so that
// both partners of an xor shuffle compute the same bits.
__device__ __forceinline__ Welford welford_merge(Welford a, Welford b) {
  float n = a.n + b.n;
  if (n == 0.f) return a;
  float d = b.mean - a.mean;
  float wb = b.n / n;
  return {n, a.mean + d * wb, a.m2 + b.m2 + d * d * a.n * wb};
}
// --8<-- [end:welford_merge]

__device__ __forceinline__ Welford shfl_xor(Welford s, int mask) {
  return {__shfl_xor_sync(FULL_MASK, s.n, mask), __shfl_xor_sync(FULL_MASK, s.mean, mask),
          __shfl_xor_sync(FULL_MASK, s.m2, mask)};
}

struct WelfordMerge {
  __device__ __forceinline__ Welford operator()(Welford a, Welford b) const { return welford_merge(a, b); }
};

// The warp's state in every lane (the scaffold's butterfly, lower lane first).
__device__ __forceinline__ Welford warp_merge(Welford s) { return warp_all_reduce(s, WelfordMerge()); }

// BatchNorm's statistics once a channel's Welford state s over `count` values is known: 1/std of the
// biased variance (the one that normalises), and what the kernels store: the saved mean and 1/std,
// and the running statistics moved by `momentum`, the running variance the unbiased one,
// M2 / (count - 1) (the launchers refuse count = 1). One thread per channel stores.
__device__ __forceinline__ float bn_invstd(Welford s, int64_t count, float eps) {
  return rsqrtf(s.m2 / (float)count + eps);
}

template <typename P>
__device__ __forceinline__ void bn_store_stats(Welford s, float invstd, int64_t c, int64_t count, float momentum,
                                               float* save_mean, float* save_invstd, P* running_mean, P* running_var) {
  save_mean[c] = s.mean;
  save_invstd[c] = invstd;
  if (running_mean != nullptr) {
    const float unbiased = s.m2 / (float)(count - 1);
    running_mean[c] = from_f<P>((1.f - momentum) * to_f(running_mean[c]) + momentum * s.mean);
    running_var[c] = from_f<P>((1.f - momentum) * to_f(running_var[c]) + momentum * unbiased);
  }
}

// --8<-- [start:channel_walk]
// The elements of channel c of an (N, C, HW) tensor that one thread of a block visits: N runs of HW
// contiguous values, C * HW apart, taken in steps of blockDim.x over the flattened index
// k = n * HW + s. The thread carries (n, s) along instead of dividing by HW at every element, and
// calls visit(i) with each element's offset i = (n * C + c) * HW + s.
template <typename Visit>
__device__ __forceinline__ void channel_walk(int64_t c, int64_t N, int64_t C, int64_t HW, Visit visit) {
  const int64_t dn = blockDim.x / HW, ds = blockDim.x % HW;  // one step, as (samples, spatial)
  int64_t n = threadIdx.x / HW, sp = threadIdx.x % HW;
  for (int64_t k = threadIdx.x; k < N * HW; k += blockDim.x) {
    visit((n * C + c) * HW + sp);
    n += dn;
    sp += ds;
    if (sp >= HW) {
      sp -= HW;
      n++;
    }
  }
}
// --8<-- [end:channel_walk]

// The block's state in every thread: warps through shared memory, then a tree of depth
// log2(warps). `smem` holds one Welford per warp and is free again on return.
__device__ Welford block_merge(Welford s, Welford* smem) { return block_tree_reduce(s, smem, WelfordMerge()); }

}  // namespace ladder
