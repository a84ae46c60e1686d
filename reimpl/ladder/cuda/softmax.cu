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
//   softmax_online_regs   the row read once into registers (16-byte loads), one (m, d) per thread,
//                         merged over the row's lanes, warps, and the blocks of a thread-block
//                         cluster (Hopper's distributed shared memory), then y from the registers:
//                         one read and one write of the row
//   softmax_online_smem   the same, the row staged in shared memory by cp.async instead
//   cross_entropy_regs,   the same row passes turned into a loss: log-sum-exp minus the target's
//   cross_entropy_smem    logit, and the gradient softmax - onehot written in place of the probabilities
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

// --8<-- [start:row_pass]
// The one-read kernels: a row (or, in a thread-block cluster, a block's contiguous share of it) is read
// from global memory once, into registers (the *_regs kernels) or, with cp.async, into shared memory
// (the *_smem kernels); each thread folds its elements into (m, d) against its own maximum, the states
// merge over the row's lanes, warps and blocks, and the output is written from the held copy as
// exp(x - m) / d: two exps per element (row_exp), one read and one write of the row.
// What the pass writes is an epilogue's: softmax's probabilities, or cross-entropy's gradient.
constexpr unsigned REGS_MAX_BLOCK = 512;  // launch.REGS_MAX_BLOCK: at most 128 registers a thread

template <typename T, unsigned VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

// The exponential of the one-read kernels. For float32 storage, expf. For 16-bit storage, whose
// output carries 8 or 11 bits, ex2.approx of (x - m) * log2(e): two instructions instead of expf's
// eight, with a relative error of about |x - m| * 2^-24 + 2^-22, far below half a bf16 or fp16 ulp
// (accuracy.py counts it). The kernels take two exps per element (the sum, then the output), and
// with 16-bit rows the exps, not memory, set the pace unless they are this cheap
// (results/softmax_plans.json).
template <typename T>
__device__ __forceinline__ float row_exp(float v) {
  if constexpr (sizeof(T) == 4) {
    return expf(v);
  } else {
    float r;
    asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(v * 1.4426950408889634f));
    return r;
  }
}

// A thread's (m, d) over COUNT values read by `at(i)`: the maximum first, then one exp per value
// against it (0 stands in for a maximum of -inf, so that exp(-inf - m) is 0, not NaN).
template <typename T, unsigned COUNT, typename At>
__device__ __forceinline__ MD thread_md(At at) {
  float m = neg_inf();
#pragma unroll
  for (unsigned i = 0; i < COUNT; ++i) m = fmaxf(m, at(i));
  const float shift = m == neg_inf() ? 0.f : m;
  float d = 0.f;
#pragma unroll
  for (unsigned i = 0; i < COUNT; ++i) d += row_exp<T>(at(i) - shift);
  return {m, d};
}

// Hopper's cluster barrier: every thread of every block of the cluster arrives (release) and waits
// (acquire), so shared-memory writes before it are seen by the other blocks after it.
__device__ __forceinline__ void cluster_sync() {
  __cluster_barrier_arrive();
  __cluster_barrier_wait();
}

// (m, d) of the whole row in every thread: a butterfly over the row's lanes, then (LANES = 0) the
// block's warps through shared memory, then (CLUSTER > 1) the cluster's blocks through distributed
// shared memory, merged by every block in rank order so that all hold the same bits.
template <unsigned LANES, unsigned CLUSTER>
__device__ __forceinline__ MD row_merge(MD s, MD* smem) {
  const unsigned lane = threadIdx.x & 31;
  for (unsigned mask = (LANES == 0 || LANES > 32 ? 32 : LANES) / 2; mask > 0; mask >>= 1) {
    const MD o = shfl_xor(s, mask);
    s = (lane & mask) ? md_merge(o, s) : md_merge(s, o);
  }
  if constexpr (LANES == 0) {
    const unsigned warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    if (lane == 0) smem[warp] = s;
    __syncthreads();
    s = warp_all_reduce(lane < warps ? smem[lane] : MD{neg_inf(), 0.f}, MdMerge());
  }
  if constexpr (CLUSTER > 1) {
    if (threadIdx.x == 0) smem[32] = s;
    cluster_sync();
    MD r{neg_inf(), 0.f};
    for (unsigned b = 0; b < CLUSTER; ++b) r = md_merge(r, *static_cast<const MD*>(__cluster_map_shared_rank(smem + 32, b)));
    cluster_sync();  // no block leaves while another still reads its shared memory
    s = r;
  }
  return s;
}

// The epilogues: what element i of a row becomes, given its probability p = exp(x - m) / d.
template <typename T>
struct SoftmaxOut {
  T* Y;
  __device__ __forceinline__ bool begin(int64_t row, int64_t N, MD s, bool leader) { return true; }
  __device__ __forceinline__ float scale() const { return 1.f; }
  __device__ __forceinline__ float at(float p, int64_t i) const { return p; }
  __device__ __forceinline__ T* out() const { return Y; }
};

// Cross-entropy: the row's loss is log(d) + m - x[target], and its gradient (p - onehot(target)) * g,
// g = *grad_scale (1 / the counted rows for a mean: a device scalar, so the host never waits), is
// written in place of p. A row whose target is `ignore_index` has loss 0 and gradient 0; a target
// outside [0, N) is not read, its row's loss and gradient are NaN (torch asserts instead).
template <typename T>
struct CrossEntropyOut {
  const T* X;
  const int64_t* target;
  T* dX;
  float* loss;
  const float* grad_scale;
  int64_t ignore_index, t;
  float g;
  __device__ __forceinline__ bool begin(int64_t row, int64_t N, MD s, bool leader) {
    t = target[row];
    const bool ignored = t == ignore_index, valid = ignored || (t >= 0 && t < N);
    const float nan = __int_as_float(0x7fc00000);
    if (leader) loss[row] = ignored ? 0.f : valid ? logf(s.d) + s.m - to_f(X[row * N + t]) : nan;
    g = ignored ? 0.f : valid ? *grad_scale : nan;
    return true;
  }
  __device__ __forceinline__ float scale() const { return g; }
  __device__ __forceinline__ float at(float v, int64_t i) const { return i == t ? v - g : v; }
  __device__ __forceinline__ T* out() const { return dX; }
};

// Where a block's or warp's share of a row starts: (row, first element, lane, lanes).
template <unsigned LANES, unsigned CLUSTER>
__device__ __forceinline__ void share_of(int64_t& row, int64_t& first, unsigned& lane, unsigned& lanes,
                                         int64_t share) {
  if constexpr (LANES == 0) {
    row = blockIdx.x / CLUSTER;
    lanes = blockDim.x;
    lane = threadIdx.x;
    first = CLUSTER > 1 ? (int64_t)__clusterRelativeBlockRank() * share : 0;
  } else {
    row = (int64_t)blockIdx.x * (blockDim.x / LANES) + threadIdx.x / LANES;
    lanes = LANES;
    lane = threadIdx.x % LANES;
    first = 0;
  }
}

// The row in registers. A row belongs to LANES threads (8, 16 or 32: several rows per block) or, with
// LANES = 0, to the whole block, and with CLUSTER > 1 to the CLUSTER blocks of a cluster, each holding
// a contiguous share. Thread `lane` holds VECS vectors of VEC elements as loaded (16-bit types stay
// 16-bit: half the registers of floats): vector k of the share is k * lanes + lane, so a warp's loads
// cover consecutive 16-byte words.
template <typename T, unsigned VEC, unsigned VECS, unsigned LANES, unsigned CLUSTER, typename Epi>
__device__ __forceinline__ void row_pass_regs(const T* X, int64_t M, int64_t N, Epi& epi, MD* smem) {
  int64_t row, first;
  unsigned lane, lanes;
  share_of<LANES, CLUSTER>(row, first, lane, lanes, (int64_t)blockDim.x * VECS * VEC);
  // rows past M (the last block of short rows) still take part in the shuffles, on no elements
  const int64_t n = row < M ? N - first : 0;
  const T* x = X + row * N + first;
  Pack<T, VEC> held[VECS];
#pragma unroll
  for (unsigned k = 0; k < VECS; ++k) {
    const int64_t i = (int64_t)(k * lanes + lane) * VEC;
    if (i < n) {
      held[k] = *reinterpret_cast<const Pack<T, VEC>*>(x + i);
    } else {
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) held[k].v[j] = from_f<T>(neg_inf());
    }
  }
  const MD mine = thread_md<T, VECS * VEC>([&](unsigned i) { return to_f(held[i / VEC].v[i % VEC]); });
  const MD s = row_merge<LANES, CLUSTER>(mine, smem);
  if (n <= 0 || !epi.begin(row, N, s, first == 0 && lane == 0)) return;  // after the merge: all took part
  const float scale = epi.scale() / s.d;
  T* y = epi.out() + row * N + first;
#pragma unroll
  for (unsigned k = 0; k < VECS; ++k) {
    const int64_t i = (int64_t)(k * lanes + lane) * VEC;
    if (i < n) {
      Pack<T, VEC> p;
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) p.v[j] = from_f<T>(epi.at(row_exp<T>(to_f(held[k].v[j]) - s.m) * scale, first + i + j));
      *reinterpret_cast<Pack<T, VEC>*>(y + i) = p;
    }
  }
}

// The share in shared memory: every thread issues its cp.async copies of 16 bytes at once (nothing
// held in registers while they fly), waits, then folds and writes from shared memory. `share` elements
// per block; VEC elements per 16-byte copy; the rows are 16-byte aligned (the launcher checks).
template <typename T, unsigned VEC, unsigned CLUSTER, typename Epi>
__device__ __forceinline__ void row_pass_smem(const T* X, int64_t M, int64_t N, int64_t share, Epi& epi, MD* smem) {
  extern __shared__ __align__(16) unsigned char staged_bytes[];
  T* staged = reinterpret_cast<T*>(staged_bytes);
  int64_t row, first;
  unsigned lane, lanes;
  share_of<0, CLUSTER>(row, first, lane, lanes, share);
  const int64_t n = N - first < share ? N - first : share;
  const T* x = X + row * N + first;
  for (int64_t i = (int64_t)lane * VEC; i < n; i += (int64_t)lanes * VEC) {
    const unsigned dst = (unsigned)__cvta_generic_to_shared(staged + i);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(x + i));
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  float m = neg_inf();
  for (int64_t i = (int64_t)lane * VEC; i < n; i += (int64_t)lanes * VEC) {
    const Pack<T, VEC> p = *reinterpret_cast<const Pack<T, VEC>*>(staged + i);
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) m = fmaxf(m, to_f(p.v[j]));
  }
  const float shift = m == neg_inf() ? 0.f : m;
  float d = 0.f;
  for (int64_t i = (int64_t)lane * VEC; i < n; i += (int64_t)lanes * VEC) {
    const Pack<T, VEC> p = *reinterpret_cast<const Pack<T, VEC>*>(staged + i);
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) d += row_exp<T>(to_f(p.v[j]) - shift);
  }
  const MD s = row_merge<0, CLUSTER>(MD{m, d}, smem);
  if (n <= 0 || !epi.begin(row, N, s, first == 0 && lane == 0)) return;
  const float scale = epi.scale() / s.d;
  T* y = epi.out() + row * N + first;
  for (int64_t i = (int64_t)lane * VEC; i < n; i += (int64_t)lanes * VEC) {
    const Pack<T, VEC> p = *reinterpret_cast<const Pack<T, VEC>*>(staged + i);
    Pack<T, VEC> o;
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) o.v[j] = from_f<T>(epi.at(row_exp<T>(to_f(p.v[j]) - s.m) * scale, first + i + j));
    *reinterpret_cast<Pack<T, VEC>*>(y + i) = o;
  }
}
// --8<-- [end:row_pass]

// --8<-- [start:softmax_online_regs]
template <typename T, typename T_ACC, unsigned VEC, unsigned VECS, unsigned LANES, unsigned CLUSTER>
__global__ void __launch_bounds__(REGS_MAX_BLOCK) __cluster_dims__(CLUSTER, 1, 1)
    softmax_online_regs(const T* X, T* Y, int64_t M, int64_t N) {
  __shared__ MD smem[33];
  SoftmaxOut<T> epi{Y};
  row_pass_regs<T, VEC, VECS, LANES, CLUSTER>(X, M, N, epi, smem);
}
// --8<-- [end:softmax_online_regs]

// --8<-- [start:softmax_online_smem]
template <typename T, typename T_ACC, unsigned VEC, unsigned CLUSTER>
__global__ void __launch_bounds__(REGS_MAX_BLOCK) __cluster_dims__(CLUSTER, 1, 1)
    softmax_online_smem(const T* X, T* Y, int64_t M, int64_t N, int64_t share) {
  __shared__ MD smem[33];
  SoftmaxOut<T> epi{Y};
  row_pass_smem<T, VEC, CLUSTER>(X, M, N, share, epi, smem);
}
// --8<-- [end:softmax_online_smem]

// --8<-- [start:cross_entropy_regs]
// Cross-entropy over a row of logits fused with its gradient: the row pass gives m and d, the loss is
// log(d) + m - x[target], and the gradient is written straight from the held row: the probabilities
// are never stored.
template <typename T, typename T_ACC, unsigned VEC, unsigned VECS, unsigned LANES, unsigned CLUSTER>
__global__ void __launch_bounds__(REGS_MAX_BLOCK) __cluster_dims__(CLUSTER, 1, 1)
    cross_entropy_regs(const T* X, const int64_t* target, T* dX, float* loss, const float* grad_scale, int64_t M,
                       int64_t N, int64_t ignore_index) {
  __shared__ MD smem[33];
  CrossEntropyOut<T> epi{X, target, dX, loss, grad_scale, ignore_index};
  row_pass_regs<T, VEC, VECS, LANES, CLUSTER>(X, M, N, epi, smem);
}
// --8<-- [end:cross_entropy_regs]

// --8<-- [start:cross_entropy_smem]
template <typename T, typename T_ACC, unsigned VEC, unsigned CLUSTER>
__global__ void __launch_bounds__(REGS_MAX_BLOCK) __cluster_dims__(CLUSTER, 1, 1)
    cross_entropy_smem(const T* X, const int64_t* target, T* dX, float* loss, const float* grad_scale, int64_t M,
                       int64_t N, int64_t ignore_index, int64_t share) {
  __shared__ MD smem[33];
  CrossEntropyOut<T> epi{X, target, dX, loss, grad_scale, ignore_index};
  row_pass_smem<T, VEC, CLUSTER>(X, M, N, share, epi, smem);
}
// --8<-- [end:cross_entropy_smem]

}  // namespace ladder
