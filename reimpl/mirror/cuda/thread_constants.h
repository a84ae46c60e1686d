// Mirror of aten/src/ATen/native/cuda/thread_constants.h (torch 2.11.0), CUDA branch only.
#pragma once
#include "c10_shim.cuh"

// --8<-- [start:num_threads]
// upstream: aten/src/ATen/native/cuda/thread_constants.h#L18-L20
// docs: upstream/thread_constants.md#num_threads
// Four warps per block: the forward vectorized kernel's block is (32, 4) and the backward's 128.
// Upstream's is a plain constexpr function; NVRTC needs the execution space spelled out.
C10_HOST_DEVICE constexpr uint32_t num_threads() {
  return C10_WARP_SIZE * 4;
}
// --8<-- [end:num_threads]
