// Mirror of aten/src/ATen/native/cuda/block_reduce.cuh (torch 2.11.0): the block-wide
// reductions used by RowwiseMomentsCUDAKernel (BlockReduce with WelfordOps) and by the backward
// grad-input kernels (BlockReduceSum). The Max variants, which LayerNorm never calls, are left out.
#pragma once
#include "c10_shim.cuh"
#include "DeviceUtils.cuh"
#include "SharedReduceOps.h"
#include "trace.cuh"  // REIMPL_TRACE: empty unless built with -DREIMPL_TRACING

namespace at::native::cuda_utils {

// --8<-- [start:kCUDABlockReduceNumThreads]
// upstream: aten/src/ATen/native/cuda/block_reduce.cuh#L8-L8
// docs: upstream/block_reduce.md#kCUDABlockReduceNumThreads
// Block size of the fallback statistics kernel (RowwiseMomentsCUDAKernel): 16 warps.
constexpr int kCUDABlockReduceNumThreads = 512;
// --8<-- [end:kCUDABlockReduceNumThreads]

// --8<-- [start:WarpReduceSum]
// upstream: aten/src/ATen/native/cuda/block_reduce.cuh#L29-L36
// docs: upstream/block_reduce.md#WarpReduceSum
// Shuffle-down tree: after five rounds lane 0 holds the warp's sum (other lanes hold partials).
template <typename T>
__inline__ __device__ T WarpReduceSum(T val) {
#pragma unroll
  for (int offset = (C10_WARP_SIZE >> 1); offset > 0; offset >>= 1) {
    val += WARP_SHFL_DOWN(val, offset);
    REIMPL_TRACE(sum_shfl_down, reimpl_trace::round_of(C10_WARP_SIZE >> 1, offset),
                 WARP_SHFL_DOWN(reimpl_trace::thread(), offset), val);
  }
  return val;
}
// --8<-- [end:WarpReduceSum]

// --8<-- [start:Block1D]
// upstream: aten/src/ATen/native/cuda/block_reduce.cuh#L51-L57
// docs: upstream/block_reduce.md#Block1D
struct Block1D {
  static __forceinline__ __device__ int Tid() { return threadIdx.x; }

  static __forceinline__ __device__ int Warps() {
    return blockDim.x / C10_WARP_SIZE;
  }
};
// --8<-- [end:Block1D]

// --8<-- [start:Block2D]
// upstream: aten/src/ATen/native/cuda/block_reduce.cuh#L59-L67
// docs: upstream/block_reduce.md#Block2D
struct Block2D {
  static __forceinline__ __device__ int Tid() {
    return threadIdx.x + threadIdx.y * blockDim.x;
  }

  static __forceinline__ __device__ int Warps() {
    return blockDim.x * blockDim.y / C10_WARP_SIZE;
  }
};
// --8<-- [end:Block2D]

// --8<-- [start:BlockReduceSum]
// upstream: aten/src/ATen/native/cuda/block_reduce.cuh#L76-L92
// docs: upstream/block_reduce.md#BlockReduceSum
// Two warp reductions with one shared-memory hop between them. Only thread 0's result is the
// block's sum; `shared` needs one T per warp.
template <typename T, typename B = Block1D>
__inline__ __device__ T BlockReduceSum(T val, T* shared) {
  const int tid = B::Tid();
  const int lid = tid % C10_WARP_SIZE;
  const int wid = tid / C10_WARP_SIZE;
  val = WarpReduceSum(val);
  __syncthreads(); // a previous BlockReduceSum may still be reading `shared`
  if (lid == 0) {
    shared[wid] = val;
    REIMPL_TRACE(sum_smem_write, 0, wid, val);
  }
  __syncthreads();
  val = (tid < B::Warps()) ? shared[lid] : T(0);
  REIMPL_TRACE(sum_smem_read, 0, tid < B::Warps() ? lid : -1, val);
  if (wid == 0) {
    val = WarpReduceSum(val);
  }
  return val;
}
// --8<-- [end:BlockReduceSum]

// --8<-- [start:WarpReduce]
// upstream: aten/src/ATen/native/cuda/block_reduce.cuh#L119-L126
// docs: upstream/block_reduce.md#WarpReduce
template <typename T, class ReduceOp>
__inline__ __device__ T WarpReduce(T val, const ReduceOp& op) {
#pragma unroll
  for (int offset = (C10_WARP_SIZE >> 1); offset > 0; offset >>= 1) {
    val = op.combine(val, op.warp_shfl_down(val, offset));
    REIMPL_TRACE(warp_reduce, reimpl_trace::round_of(C10_WARP_SIZE >> 1, offset),
                 WARP_SHFL_DOWN(reimpl_trace::thread(), offset), val.mean, val.m2, val.n, val.nf);
  }
  return val;
}
// --8<-- [end:WarpReduce]

// --8<-- [start:BlockReduce]
// upstream: aten/src/ATen/native/cuda/block_reduce.cuh#L128-L145
// docs: upstream/block_reduce.md#BlockReduce
// BlockReduceSum's shape with any ReduceOp; lanes past the warp count read identity_element.
template <typename T, class ReduceOp, typename B = Block1D>
__inline__ __device__ T
BlockReduce(T val, const ReduceOp& op, const T& identity_element, T* shared) {
  const int tid = B::Tid();
  const int lid = tid % C10_WARP_SIZE;
  const int wid = tid / C10_WARP_SIZE;
  val = WarpReduce(val, op);
  __syncthreads(); // a previous BlockReduce may still be reading `shared`
  if (lid == 0) {
    shared[wid] = val;
    REIMPL_TRACE(block_write, 0, wid, val.mean, val.m2, val.n, val.nf);
  }
  __syncthreads();
  val = (tid < B::Warps()) ? shared[lid] : identity_element;
  REIMPL_TRACE(block_read, 0, tid < B::Warps() ? lid : -1, val.mean, val.m2, val.n, val.nf);
  if (wid == 0) {
    val = WarpReduce(val, op);
  }
  return val;
}
// --8<-- [end:BlockReduce]

} // namespace at::native::cuda_utils
