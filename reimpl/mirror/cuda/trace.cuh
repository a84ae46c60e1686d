// Step traces for the emulator comparison (reimpl/emulator/trace.py, reimpl/checks/gpu_trace.py).
// Not upstream: with REIMPL_TRACING undefined (every normal build) REIMPL_TRACE(...) expands to
// nothing, its arguments are never evaluated, and the kernels compile exactly as without it.
// Built with -DREIMPL_TRACING, each thread appends one record per step to a device buffer:
//   block (x + y * gridDim.x), step code << 16 | index, thread (x + y * blockDim.x), aux, 4 values as raw bits
// Records of one thread land in program order (its atomicAdds return increasing slots).
#pragma once

// step codes: the same numbers as KINDS in reimpl/emulator/trace.py (a CPU test compares them)
#define REIMPL_STEP_online 1
#define REIMPL_STEP_shfl_down 2
#define REIMPL_STEP_smem_write 3
#define REIMPL_STEP_smem_combine 4
#define REIMPL_STEP_stats 5
#define REIMPL_STEP_rstd 6
#define REIMPL_STEP_output 7
#define REIMPL_STEP_reduce 8
#define REIMPL_STEP_warp_reduce 9
#define REIMPL_STEP_block_write 10
#define REIMPL_STEP_block_read 11
#define REIMPL_STEP_moments 12
#define REIMPL_STEP_fwd_output 13
#define REIMPL_STEP_gi_sums 20
#define REIMPL_STEP_sum_shfl_down 21
#define REIMPL_STEP_sum_smem_write 22
#define REIMPL_STEP_sum_smem_read 23
#define REIMPL_STEP_gi_stats 24
#define REIMPL_STEP_gi_dx 25
#define REIMPL_STEP_gb_sums 26
#define REIMPL_STEP_gb_smem_write 27
#define REIMPL_STEP_gb_smem_read 28
#define REIMPL_STEP_gb_shfl_xor 29
#define REIMPL_STEP_gb_out 30

#ifdef REIMPL_TRACING

// Global scope, unmangled: the host finds them by name (cupy RawModule.get_global).
extern "C" {
__device__ unsigned long long* reimpl_trace_buf;
__device__ unsigned long long reimpl_trace_capacity;  // records
__device__ unsigned long long reimpl_trace_count;     // records asked for (may exceed capacity)
}

namespace reimpl_trace {
constexpr int kWords = 8;
__device__ __forceinline__ unsigned long long bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned long long bits(double v) {
  return static_cast<unsigned long long>(__double_as_longlong(v));
}
__device__ __forceinline__ unsigned long long bits(long long v) { return static_cast<unsigned long long>(v); }
__device__ __forceinline__ unsigned long long bits(long v) { return static_cast<unsigned long long>(v); }
__device__ __forceinline__ unsigned long long bits(int v) { return static_cast<unsigned long long>(v); }

__device__ __forceinline__ int thread() { return threadIdx.x + threadIdx.y * blockDim.x; }

// shuffle round number from its offset: 16 -> 0, 8 -> 1, ..., 1 -> 4
__device__ __forceinline__ int round_of(int first, int offset) { return __ffs(first / offset) - 1; }

template <typename A, typename B = int, typename C = int, typename D = int>
__device__ void step(int code, int index, long long aux, A v0, B v1 = 0, C v2 = 0, D v3 = 0) {
  const unsigned long long slot = atomicAdd(&reimpl_trace_count, 1ULL);
  if (slot >= reimpl_trace_capacity) {
    return;  // the host sees count > capacity and retries with a larger buffer
  }
  unsigned long long* r = reimpl_trace_buf + slot * kWords;
  // linear block index, as the emulator numbers blocks (GammaBeta's partial path has gridDim.y > 1)
  r[0] = blockIdx.x + static_cast<unsigned long long>(blockIdx.y) * gridDim.x;
  r[1] = (static_cast<unsigned long long>(code) << 16) | static_cast<unsigned long long>(index);
  r[2] = thread();
  r[3] = static_cast<unsigned long long>(aux);
  r[4] = bits(v0);
  r[5] = bits(v1);
  r[6] = bits(v2);
  r[7] = bits(v3);
}
} // namespace reimpl_trace

#define REIMPL_TRACE(kind, index, aux, ...) \
  reimpl_trace::step(REIMPL_STEP_##kind, (index), (aux), __VA_ARGS__)

#else

#define REIMPL_TRACE(kind, index, aux, ...) ((void)0)

#endif
