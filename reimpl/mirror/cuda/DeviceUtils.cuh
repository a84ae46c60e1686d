// Mirror of aten/src/ATen/cuda/DeviceUtils.cuh (torch 2.11.0): the warp-level primitives the
// LayerNorm kernels call. CUDA branch only; the ROCm branches upstream are left out.
#pragma once
#include "c10_shim.cuh"

// --8<-- [start:WARP_SYNC]
// upstream: aten/src/ATen/cuda/DeviceUtils.cuh#L17-L21
// docs: upstream/DeviceUtils.md#WARP_SYNC
__device__ __forceinline__ void WARP_SYNC(unsigned mask = 0xffffffff) {
  __syncwarp(mask);
}
// --8<-- [end:WARP_SYNC]

// --8<-- [start:WARP_SHFL_XOR]
// upstream: aten/src/ATen/cuda/DeviceUtils.cuh#L39-L47
// docs: upstream/DeviceUtils.md#WARP_SHFL_XOR
template <typename T>
__device__ __forceinline__ T WARP_SHFL_XOR(T value, int laneMask, int width = warpSize, unsigned int mask = 0xffffffff) {
  return __shfl_xor_sync(mask, value, laneMask, width);
}
// --8<-- [end:WARP_SHFL_XOR]

// --8<-- [start:WARP_SHFL]
// upstream: aten/src/ATen/cuda/DeviceUtils.cuh#L49-L57
// docs: upstream/DeviceUtils.md#WARP_SHFL
template <typename T>
__device__ __forceinline__ T WARP_SHFL(T value, int srcLane, int width = warpSize, unsigned int mask = 0xffffffff) {
  return __shfl_sync(mask, value, srcLane, width);
}
// --8<-- [end:WARP_SHFL]

// --8<-- [start:WARP_SHFL_DOWN]
// upstream: aten/src/ATen/cuda/DeviceUtils.cuh#L69-L77
// docs: upstream/DeviceUtils.md#WARP_SHFL_DOWN
template <typename T>
__device__ __forceinline__ T WARP_SHFL_DOWN(T value, unsigned int delta, int width = warpSize, unsigned int mask = 0xffffffff) {
  return __shfl_down_sync(mask, value, delta, width);
}
// --8<-- [end:WARP_SHFL_DOWN]
