// Helpers shared by the ladder's kernels (ladder.cu, batchnorm.cu, softmax.cu): storage-type
// conversions, and the Welford state with its update, Chan's merge and the warp/block trees.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef long int64_t;

namespace ladder {

constexpr unsigned FULL_MASK = 0xffffffffu;

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

// Butterfly over the warp: afterwards every lane holds the whole warp's state, identical bits.
__device__ __forceinline__ Welford warp_merge(Welford s) {
  const int lane = threadIdx.x & 31;
  for (int mask = 16; mask > 0; mask >>= 1) {
    Welford o = shfl_xor(s, mask);
    s = (lane & mask) ? welford_merge(o, s) : welford_merge(s, o);
  }
  return s;
}

// Every warp's state through shared memory, merged pairwise (a tree of depth log2(warps));
// the row's state is returned to every thread. `smem` holds one Welford per warp.
__device__ Welford block_merge(Welford s, Welford* smem) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  s = warp_merge(s);
  if (lane == 0) smem[warp] = s;
  __syncthreads();
  for (int half = warps / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) smem[threadIdx.x] = welford_merge(smem[threadIdx.x], smem[threadIdx.x + half]);
    __syncthreads();
  }
  Welford r = smem[0];
  __syncthreads();  // smem may be reused by the caller
  return r;
}

}  // namespace ladder
