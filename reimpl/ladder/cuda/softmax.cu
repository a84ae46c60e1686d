// Softmax over the last dim, LayerNorm's other sibling: reduce a row (its maximum and its sum of
// exponentials), then broadcast (every element divided by the sum). Three kernels, ours, written to
// teach; not bit-identical to torch.softmax (their distance to it is measured and bounded in
// reimpl/ladder/accuracy.py). The online form and its (m, d) merge are Milakov and Gimelshein's
// ("Online normalizer calculation for softmax", 2018).
//
//   softmax_three_pass    one block per row: the maximum, then the sum of exp(x - max), then y
//   softmax_online_warp   one warp per row: one pass builds (m, d) per lane, lanes merge, then y
//   softmax_online_block  one block per row: (m, d) per thread, warps by shuffles, then warps
//                         through shared memory, then y
//
// Contract (the launcher in reimpl/ladder/softmax.py): X and Y are M x N, contiguous, of type T;
// arithmetic is float. A row of -inf only gives NaN, and a +inf anywhere in a row makes it NaN, as
// torch.softmax does (exp(x - max) is exp(NaN) there).
#include "common.cuh"

namespace ladder {

__device__ __forceinline__ float neg_inf() { return -__int_as_float(0x7f800000); }

// --8<-- [start:md_merge]
// (m, d): the largest value seen and the sum of exp(x - m) over the values seen. Two partial states
// merge by rescaling each sum to the larger maximum. The empty state is (-inf, 0): merging it changes
// nothing, which is why the guard is there (without it, -inf - -inf would turn 0 into NaN).
struct MD {
  float m, d;
};

__device__ __forceinline__ MD md_merge(MD a, MD b) {
  if (b.m == neg_inf() && b.d == 0.f) return a;
  if (a.m == neg_inf() && a.d == 0.f) return b;
  const float m = fmaxf(a.m, b.m);
  return {m, a.d * expf(a.m - m) + b.d * expf(b.m - m)};
}

// One element folded into a state: a merge with (x, 1), except that x = -inf adds exp(-inf) = 0
// to any sum and so leaves the state as it is.
__device__ __forceinline__ void md_push(MD& s, float x) {
  if (x == neg_inf()) return;
  const float m = fmaxf(s.m, x);
  s.d = s.d * expf(s.m - m) + expf(x - m);
  s.m = m;
}
// --8<-- [end:md_merge]

__device__ __forceinline__ MD shfl_xor(MD s, int mask) {
  return {__shfl_xor_sync(FULL_MASK, s.m, mask), __shfl_xor_sync(FULL_MASK, s.d, mask)};
}

// The merges the scaffold (reduce.cuh) takes: (m, d) states, and the three-pass kernel's floats.
struct MdMerge {
  __device__ __forceinline__ MD operator()(MD a, MD b) const { return md_merge(a, b); }
};
struct Max {
  static constexpr bool commutes = true;
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  static constexpr bool commutes = true;
  __device__ float operator()(float a, float b) const { return a + b; }
};

// The three-pass kernel reduces twice through one `smem`: a barrier after each reduction frees it.
template <typename Op>
__device__ float block_reduce_float(float v, float identity, float* smem, Op op) {
  v = block_all_reduce(v, identity, smem, op);
  __syncthreads();
  return v;
}

// --8<-- [start:softmax_three_pass]
// The safe softmax as a textbook writes it, one block per row: pass 1 finds the maximum, pass 2 sums
// exp(x - max), pass 3 writes exp(x - max) / sum. Subtracting the maximum keeps every exponent <= 0,
// so nothing overflows; the price is three reads of the row.
template <typename T, typename T_ACC>
__global__ void softmax_three_pass(const T* X, T* Y, int64_t M, int64_t N) {
  __shared__ float smem[32];
  const T* x = X + blockIdx.x * N;
  T* y = Y + blockIdx.x * N;
  float mx = neg_inf();
  for (int64_t j = threadIdx.x; j < N; j += blockDim.x) mx = fmaxf(mx, to_f(x[j]));
  mx = block_reduce_float(mx, neg_inf(), smem, Max());
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < N; j += blockDim.x) sum += expf(to_f(x[j]) - mx);
  sum = block_reduce_float(sum, 0.f, smem, Sum());
  for (int64_t j = threadIdx.x; j < N; j += blockDim.x) y[j] = from_f<T>(expf(to_f(x[j]) - mx) / sum);
}
// --8<-- [end:softmax_three_pass]

// --8<-- [start:softmax_online_warp]
// The online form, one warp per row: one pass folds each element into the lane's (m, d), the
// butterfly merges the lanes' states, and a second pass writes exp(x - m) / d. Two reads of the row.
template <typename T, typename T_ACC>
__global__ void softmax_online_warp(const T* X, T* Y, int64_t M, int64_t N) {
  const int64_t row = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= M) return;  // whole warps leave together
  const T* x = X + row * N;
  T* y = Y + row * N;
  MD s{neg_inf(), 0.f};
  for (int64_t j = lane; j < N; j += 32) md_push(s, to_f(x[j]));
  s = warp_all_reduce(s, MdMerge());
  for (int64_t j = lane; j < N; j += 32) y[j] = from_f<T>(expf(to_f(x[j]) - s.m) / s.d);
}
// --8<-- [end:softmax_online_warp]

// --8<-- [start:softmax_online_block]
// The online form, one block per row, for long rows: every thread folds its elements into (m, d),
// each warp merges its lanes by shuffles, lane 0 of each warp publishes the warp's state in shared
// memory, every warp merges those states by shuffles again, and the block writes the row.
template <typename T, typename T_ACC>
__global__ void softmax_online_block(const T* X, T* Y, int64_t M, int64_t N) {
  __shared__ MD smem[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const T* x = X + blockIdx.x * N;
  T* y = Y + blockIdx.x * N;
  MD s{neg_inf(), 0.f};
  for (int64_t j = threadIdx.x; j < N; j += blockDim.x) md_push(s, to_f(x[j]));
  s = warp_all_reduce(s, MdMerge());
  if (lane == 0) smem[warp] = s;
  __syncthreads();
  // every warp merges the warps' states itself (the same bits in every warp): no second barrier.
  // (block_all_reduce's shape written out, so that the indices are computed before the loop)
  s = warp_all_reduce(lane < warps ? smem[lane] : MD{neg_inf(), 0.f}, MdMerge());
  for (int64_t j = threadIdx.x; j < N; j += blockDim.x) y[j] = from_f<T>(expf(to_f(x[j]) - s.m) / s.d);
}
// --8<-- [end:softmax_online_block]

}  // namespace ladder
