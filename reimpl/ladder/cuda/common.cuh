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

// The block's state in every thread: warps through shared memory, then a tree of depth
// log2(warps). `smem` holds one Welford per warp and is free again on return.
__device__ Welford block_merge(Welford s, Welford* smem) { return block_tree_reduce(s, smem, WelfordMerge()); }

}  // namespace ladder
