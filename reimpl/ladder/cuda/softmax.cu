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
#include "row.cuh"

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

// The merges the scaffold (reduce.cuh) takes: (m, d) states (and its own Max and Sum, floats).
struct MdMerge {
  __device__ __forceinline__ MD operator()(MD a, MD b) const { return md_merge(a, b); }
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
// The one-read kernels: a row (or, in a thread-block cluster, a block's share of it) is read from
// global memory once, into registers (the *_regs kernels) or, with cp.async, into shared memory (the
// *_smem kernels), and written from there: one read and one write of the row. Each warp takes one exp
// an element against its own maximum, and the warps' (m, d) are merged online by the exchange above,
// each warp rescaling its exps once (the lanes that share a short row reduce the maximum first, as
// torch's safe softmax does). What the pass writes is an epilogue's: softmax's probabilities, or
// cross-entropy's gradient.
//
// Rows need not start on a 16-byte boundary (a vocabulary of 50257): the loads walk the 16-byte words
// that hold the row, from the one holding its first element (X's base is 16-byte aligned, the launcher
// checks). In registers, the row's first and last words are loaded whole and their elements that are
// not the row's set to -inf (the tensor's very last word is read an element at a time, so no load
// leaves the tensor); staged in shared memory, they are read an element at a time. Either way they are
// written an element at a time.

// The exponential of the one-read kernels. For float32 storage, expf. For 16-bit storage, whose
// output carries 8 or 11 bits, ex2.approx.ftz of v * log2(e) + EXP_BIAS, one FFMA and one MUFU
// instead of expf's eight instructions: the exps carry a factor 2^EXP_BIAS, which cancels in
// exp / sum (and which cross-entropy's log takes back out), and which keeps every exp whose value
// could round to a nonzero bf16 output clear of the subnormal range that .ftz flushes to 0. Its
// relative error, about (|v| + 44) * 2^-24 + 2^-22, is far below half a bf16 or fp16 ulp
// (accuracy.fast_exp_u counts it). A 16-bit row has twice the elements per byte of a float32 one.
template <typename T>
struct RowExp {
  static constexpr float BIAS = sizeof(T) == 4 ? 0.f : 64.f;  // log2 of the exps' common factor
};

template <typename T>
__device__ __forceinline__ float row_exp(float v) {
  if constexpr (sizeof(T) == 4) {
    return expf(v);
  } else {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(fmaf(v, 1.4426950408889634f, RowExp<T>::BIAS)));
    return r;
  }
}

// The largest of a word's values, as a float. 16-bit words take packed max instructions, two values
// each (exact: a maximum does not round; a NaN loses to a number, as with fmaxf).
template <typename T>
struct Pair;
template <>
struct Pair<__half> {
  using type = __half2;
};
template <>
struct Pair<__nv_bfloat16> {
  using type = __nv_bfloat162;
};

template <typename T, unsigned VEC>
__device__ __forceinline__ float word_max(const T (&v)[VEC]) {
  if constexpr (sizeof(T) == 2 && VEC % 2 == 0) {
    using T2 = typename Pair<T>::type;
    const T2* p = reinterpret_cast<const T2*>(v);
    T2 r = p[0];
#pragma unroll
    for (unsigned i = 1; i < VEC / 2; ++i) r = __hmax2(r, p[i]);
    return fmaxf(to_f(r.x), to_f(r.y));
  } else {
    float m = to_f(v[0]);
#pragma unroll
    for (unsigned j = 1; j < VEC; ++j) m = fmaxf(m, to_f(v[j]));
    return m;
  }
}

// --8<-- [start:row_exchange]
// How a block's warps (and a cluster's blocks) agree on a row's (m, d): the exchange of quack's
// softmax (Guo, Zadouri and Dao), rewritten here. Each warp reduces its own maximum and the sum of its
// exps against it by shuffles, with no barrier, and publishes that (m, d) once, to the slot it owns
// in every block of the row's cluster (one 8-byte store each: `st.async` into a peer block's shared
// memory, counted by the bytes it brings to that block's mbarrier). A block waits once, until all
// warps * CLUSTER states have arrived, and every warp merges all of them itself (Milakov and
// Gimelshein's merge, taken all at once: the largest maximum, then each sum rescaled to it), so all
// get the same bits. Then each warp rescales its own exps once, by exp(m_warp - m): the online merge
// is paid per warp, not per element. One wait a row, where reducing the maximum and the sum
// over the block and then the cluster one after the other takes two block barriers and two cluster
// barriers, with nothing in flight during each.
struct RowScratch {
  MD warp[REGS_MAX_BLOCK / 32 * 16];  // a slot for each warp of each block of a cluster of up to 16
  unsigned long long bar;            // the mbarrier the peers' stores count down (CLUSTER > 1)
};

__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// Before the row's loads: the mbarrier expects one arrival (this block's thread 0, which also says how
// many bytes to expect); the relaxed arrive lets the peers know it is set up, waited for just before
// the first store into them, after the loads and the warp's reductions.
template <unsigned CLUSTER>
__device__ __forceinline__ void exchange_begin(RowScratch& s) {
  if constexpr (CLUSTER > 1) {
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&s.bar)) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  }
}

template <unsigned CLUSTER>
__device__ __forceinline__ MD row_exchange(MD w, RowScratch& s) {
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const unsigned n = warps * CLUSTER;
  if constexpr (CLUSTER == 1) {
    if (lane == 0) s.warp[warp] = w;
    __syncthreads();
  } else {
    const unsigned bar = smem_addr(&s.bar), rank = __clusterRelativeBlockRank();
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // every peer's mbarrier is set up
    if (threadIdx.x == 0) {
      unsigned long long state;
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;"
                   : "=l"(state) : "r"(bar), "r"(n * (unsigned)sizeof(MD)) : "memory");
    }
    if (lane < CLUSTER) {  // lane b stores the warp's state into block b
      unsigned slot, peer_bar;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(slot) : "r"(smem_addr(&s.warp[rank * warps + warp])), "r"(lane));
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(peer_bar) : "r"(bar), "r"(lane));
      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];"
                   ::"r"(slot), "f"(w.m), "f"(w.d), "r"(peer_bar) : "memory");
    }
    asm volatile(
        "{\n .reg .pred done;\n"
        "WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
        " @!done bra WAIT;\n}" ::"r"(bar) : "memory");
  }
  // the largest maximum first, then each sum rescaled to it: one expf a state (a state of no exps adds
  // 0, whatever its maximum); max and + commute, so every lane of every warp ends with the same bits
  constexpr unsigned READS = (REGS_MAX_BLOCK / 32 * CLUSTER + 31) / 32;  // states a lane reads, at most
  float m = neg_inf(), d = 0.f;
#pragma unroll
  for (unsigned j = 0; j < READS; ++j)
    if (lane + 32 * j < n) m = fmaxf(m, s.warp[lane + 32 * j].m);
  m = warp_all_reduce(m, Max());
#pragma unroll
  for (unsigned j = 0; j < READS; ++j) {
    if (lane + 32 * j < n) {
      const MD o = s.warp[lane + 32 * j];
      d += o.d == 0.f ? 0.f : o.d * expf(o.m - m);
    }
  }
  return {m, warp_all_reduce(d, Sum())};
}
// --8<-- [end:row_exchange]

// The row's state from a thread's maximum `m` and `sums(shift)`, which takes the exps against a
// maximum (0 for one of -inf only, whose exps are then 0) and returns their sum: (m, d) of the whole
// row, the shift the thread's exps took, and what they are multiplied by. Rows of a few lanes of a
// warp reduce the maximum first, then the sum, by shuffles; rows of a block or cluster take the
// exchange above, each warp against its own maximum.
struct RowState {
  MD s;
  float shift, rescale;
};

template <unsigned LANES, unsigned CLUSTER, typename Sums>
__device__ __forceinline__ RowState row_state(float m, Sums sums, RowScratch& scratch) {
  constexpr unsigned LANES_ = LANES ? LANES : 32;
  m = row_reduce<LANES_>(m, neg_inf(), nullptr, Max());
  const float shift = m == neg_inf() ? 0.f : m;
  const float d = row_reduce<LANES_>(sums(shift), 0.f, nullptr, Sum());
  if constexpr (LANES > 0) {
    return {{m, d}, shift, 1.f};
  } else {
    const MD s = row_exchange<CLUSTER>(MD{m, d}, scratch);
    // a warp whose exps are all 0 adds 0, whatever the scale (exp(-s.m) may overflow)
    return {s, shift, d == 0.f ? 0.f : expf(shift - s.m)};
  }
}

// The epilogues: what the element at share position i (row element first + i) becomes, given its
// probability p = exp(x - m) / d.
template <typename T>
struct SoftmaxOut {
  T* Y;
  __device__ __forceinline__ bool begin(int64_t row, int64_t N, int64_t first, MD s, bool leader) { return true; }
  __device__ __forceinline__ float scale() const { return 1.f; }
  __device__ __forceinline__ float at(float p, int i) const { return p; }
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
  int64_t ignore_index;
  int at_target;  // the target's share position (32-bit: a compare an element), or -1 outside the share
  float g;
  __device__ __forceinline__ bool begin(int64_t row, int64_t N, int64_t first, MD s, bool leader) {
    const int64_t t = target[row];
    at_target = t >= first && t - first < 0x7fffffff ? (int)(t - first) : -1;
    const bool ignored = t == ignore_index, valid = ignored || (t >= 0 && t < N);
    const float nan = __int_as_float(0x7fc00000);
    // d carries 2^BIAS (row_exp): log(d) - BIAS ln 2
    constexpr float bias_ln = RowExp<T>::BIAS * 0.6931471805599453f;
    if (leader) loss[row] = ignored ? 0.f : valid ? (logf(s.d) - bias_ln) + s.m - to_f(X[row * N + t]) : nan;
    g = ignored ? 0.f : valid ? *grad_scale : nan;
    return true;
  }
  __device__ __forceinline__ float scale() const { return g; }
  __device__ __forceinline__ float at(float v, int i) const { return i == at_target ? v - g : v; }
  __device__ __forceinline__ T* out() const { return dX; }
};

// A word at share position p that touches the row lies wholly in the tensor (rows are contiguous and
// the base is 16-byte aligned), unless it is the last row's last word.
template <unsigned VEC, typename S>
__device__ __forceinline__ bool in_tensor(const S& sh, int p, int64_t M) {
  return sh.touches(p) && (sh.row + 1 < M || p + (int)VEC <= sh.hi);
}

// -inf's bits in every element of a 32-bit lane (load_whole's fill)
template <typename T>
struct NegInf;
template <>
struct NegInf<float> {
  static constexpr unsigned lane = 0xff800000u;
};
template <>
struct NegInf<__nv_bfloat16> {
  static constexpr unsigned lane = 0xff80ff80u;
};
template <>
struct NegInf<__half> {
  static constexpr unsigned lane = 0xfc00fc00u;
};

// row.cuh's pairwise unpack and pack, and element by element for the scalar words of a misaligned row
template <typename T, unsigned VEC>
__device__ __forceinline__ void widen(const Pack<T, VEC>& w, float (&f)[VEC]) {
  if constexpr (sizeof(T) == 4 || VEC % 2 == 0) {
    unpack(w, f);
  } else {
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) f[j] = to_f(w.v[j]);
  }
}
template <typename T, unsigned VEC>
__device__ __forceinline__ void narrow(const float (&f)[VEC], Pack<T, VEC>& w) {
  if constexpr (sizeof(T) == 4 || VEC % 2 == 0) {
    pack(f, w);
  } else {
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) w.v[j] = from_f<T>(f[j]);
  }
}

// The row in registers. A row belongs to LANES threads (4 to 32: several rows per block) or, with
// LANES = 0, to the whole block, and with CLUSTER > 1 to the CLUSTER blocks of a cluster, each holding
// a contiguous share. Thread `lane` loads VECS words of VEC elements: word k of the share is
// k * lanes + lane, so a warp's loads cover consecutive 16-byte words. After the maximum, each
// element's exp replaces it in registers, as a float. WHOLE (rows of whole, aligned 16-byte words: the
// launcher checks): every word is the row's or not at all, so the loads are one predicated 16-byte load
// each, all issued before the first is used (element-wise branches among them keep the compiler from
// batching them). Other rows of 16-byte words load every word whole the same way, and then set the
// elements of their first and last words that are not the row's to -inf. What is not the row's holds
// -inf: it adds nothing to the maximum and 0 to d.
template <typename T, unsigned VEC, unsigned VECS, unsigned LANES, unsigned CLUSTER, bool WHOLE, typename Epi>
__device__ __forceinline__ void row_pass_regs(const T* X, int64_t M, int64_t N, Epi& epi, RowScratch& scratch) {
  constexpr unsigned ELEMS = VECS * VEC;
  if constexpr (LANES == 0) exchange_begin<CLUSTER>(scratch);
  const Share<VEC, LANES, CLUSTER> sh(M, N, (int64_t)(LANES ? LANES : blockDim.x) * ELEMS);
  const T* x = X + sh.row * N + sh.first;
  Pack<T, VEC> held[VECS];
  const T fill = from_f<T>(neg_inf());
#pragma unroll
  for (unsigned k = 0; k < VECS; ++k) {
    const int p = (int)((k * sh.lanes + sh.lane) * VEC);
    if constexpr (VEC > 1) {
      held[k] = load_word_if<T, VEC>(x, p, WHOLE ? sh.holds(p) : in_tensor<VEC>(sh, p, M), NegInf<T>::lane);
    } else {
      load_word(held[k], x, p, sh, fill);
    }
  }
  if constexpr (!WHOLE && VEC > 1) {
    // a row that does not start (or end) on a word: its first and last words, loaded whole with a
    // neighbour row's elements, keep the row's own (the tensor's very last word, not loaded, is read
    // an element at a time)
#pragma unroll
    for (unsigned k = 0; k < VECS; ++k) {
      const int p = (int)((k * sh.lanes + sh.lane) * VEC);
      if (!sh.whole(p) && sh.touches(p)) {
        const bool loaded = in_tensor<VEC>(sh, p, M);
#pragma unroll
        for (unsigned j = 0; j < VEC; ++j)
          held[k].v[j] = !sh.holds(p + (int)j) ? fill : loaded ? held[k].v[j] : x[p + j];
      }
    }
  }
  float m = neg_inf();
#pragma unroll
  for (unsigned k = 0; k < VECS; ++k) m = fmaxf(m, word_max(held[k].v));
  float e[ELEMS];
  const RowState r = row_state<LANES, CLUSTER>(m, [&](float shift) {
    float d = 0.f;
#pragma unroll
    for (unsigned k = 0; k < VECS; ++k) {
      float f[VEC];
      widen(held[k], f);
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) {
        e[k * VEC + j] = row_exp<T>(f[j] - shift);
        d += e[k * VEC + j];
      }
    }
    return d;
  }, scratch);
  if (!sh.any() || !epi.begin(sh.row, N, sh.first, r.s, sh.lo >= 0 && sh.lane == 0)) return;  // after the reductions
  const float scale = epi.scale() * r.rescale / r.s.d;
  T* y = epi.out() + sh.row * N + sh.first;
#pragma unroll
  for (unsigned k = 0; k < VECS; ++k) {
    const int p = (int)((k * sh.lanes + sh.lane) * VEC);
    if (WHOLE ? sh.holds(p) : sh.touches(p)) {
      float f[VEC];
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) f[j] = epi.at(e[k * VEC + j] * scale, p + (int)j);
      Pack<T, VEC> o;
      narrow(f, o);
      store_word<WHOLE>(y, p, o, sh);
    }
  }
}

// The share in shared memory: every thread issues its cp.async copies of 16 bytes at once (nothing
// held in registers while they fly), waits, and from then on reads only the words it copied itself
// (no barrier). `share` positions per block, a whole number of words. With float32 storage the exps
// overwrite the staged row, so the write takes none; 16-bit storage has no room for a float and takes
// the exp again.
template <typename T, unsigned VEC, unsigned CLUSTER, typename Epi>
__device__ __forceinline__ void row_pass_smem(const T* X, int64_t M, int64_t N, int64_t share, Epi& epi,
                                              RowScratch& scratch) {
  extern __shared__ __align__(16) unsigned char staged_bytes[];
  T* staged = reinterpret_cast<T*>(staged_bytes);
  exchange_begin<CLUSTER>(scratch);
  const Share<VEC, 0, CLUSTER> sh(M, N, share);
  const int end = sh.hi < share ? sh.hi : (int)share;  // the words past the row's end are not copied
  const int step = (int)(sh.lanes * VEC);
  const T* x = X + sh.row * N + sh.first;
  for (int p = (int)(sh.lane * VEC); p < end; p += step) {
    if (sh.whole(p)) {
      const unsigned dst = (unsigned)__cvta_generic_to_shared(staged + p);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(x + p));
    } else {  // the row's first or last word: its own elements only
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) staged[p + j] = sh.holds(p + j) ? x[p + j] : from_f<T>(neg_inf());
    }
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  float m = neg_inf();
  for (int p = (int)(sh.lane * VEC); p < end; p += step) {
    m = fmaxf(m, word_max(reinterpret_cast<const Pack<T, VEC>*>(staged + p)->v));
  }
  const RowState r = row_state<0, CLUSTER>(m, [&](float shift) {
    float d = 0.f;
    for (int p = (int)(sh.lane * VEC); p < end; p += step) {
      Pack<T, VEC>& w = *reinterpret_cast<Pack<T, VEC>*>(staged + p);
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) {
        const float v = row_exp<T>(to_f(w.v[j]) - shift);
        if constexpr (sizeof(T) == 4) w.v[j] = v;
        d += v;
      }
    }
    return d;
  }, scratch);
  if (!sh.any() || !epi.begin(sh.row, N, sh.first, r.s, sh.lo >= 0 && sh.lane == 0)) return;
  const float scale = epi.scale() * r.rescale / r.s.d;
  T* y = epi.out() + sh.row * N + sh.first;
  for (int p = (int)(sh.lane * VEC); p < end; p += step) {
    const Pack<T, VEC> w = *reinterpret_cast<const Pack<T, VEC>*>(staged + p);
    Pack<T, VEC> o;
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) {
      const float v = sizeof(T) == 4 ? to_f(w.v[j]) : row_exp<T>(to_f(w.v[j]) - r.shift);
      o.v[j] = from_f<T>(epi.at(v * scale, p + (int)j));
    }
    store_word(y, p, o, sh);
  }
}
// --8<-- [end:row_pass]

// The registers a thread of the *_regs kernels may take: 128 (blocks of up to REGS_MAX_BLOCK threads),
// but 80 where a row puts 64 elements a thread in blocks of up to 256, so that three blocks share an
// SM where the compiler would take enough for two: 16-bit rows (their exps, as floats, take 64
// registers) and float32 rows over a cluster of 16. A float32 kernel for 8 blocks spills at 80 and
// runs slower than at 128 (results/softmax_caps.json times the settings below against each other).
#ifndef ONE_READ_REGS_16_64
#define ONE_READ_REGS_16_64 80
#endif
#ifndef ONE_READ_REGS_32_64
#define ONE_READ_REGS_32_64 128
#endif
#ifndef ONE_READ_REGS_32_64_WIDE
#define ONE_READ_REGS_32_64_WIDE 80
#endif
template <typename T, unsigned CLUSTER>
__host__ __device__ constexpr int regs_cap(unsigned elems) {
  return elems != 64       ? 65536 / REGS_MAX_BLOCK
         : sizeof(T) == 2  ? ONE_READ_REGS_16_64
         : CLUSTER == 16   ? ONE_READ_REGS_32_64_WIDE
                           : ONE_READ_REGS_32_64;
}

// --8<-- [start:softmax_online_regs]
template <typename T, typename T_ACC, unsigned VEC, unsigned VECS, unsigned LANES, unsigned CLUSTER, bool WHOLE>
__global__ void __maxnreg__((regs_cap<T, CLUSTER>(VEC * VECS))) __cluster_dims__(CLUSTER, 1, 1)
    softmax_online_regs(const T* X, T* Y, int64_t M, int64_t N) {
  __shared__ RowScratch scratch;
  SoftmaxOut<T> epi{Y};
  row_pass_regs<T, VEC, VECS, LANES, CLUSTER, WHOLE>(X, M, N, epi, scratch);
}
// --8<-- [end:softmax_online_regs]

// --8<-- [start:softmax_online_smem]
template <typename T, typename T_ACC, unsigned VEC, unsigned CLUSTER>
__global__ void __launch_bounds__(REGS_MAX_BLOCK) __cluster_dims__(CLUSTER, 1, 1)
    softmax_online_smem(const T* X, T* Y, int64_t M, int64_t N, int64_t share) {
  __shared__ RowScratch scratch;
  SoftmaxOut<T> epi{Y};
  row_pass_smem<T, VEC, CLUSTER>(X, M, N, share, epi, scratch);
}
// --8<-- [end:softmax_online_smem]

// --8<-- [start:cross_entropy_regs]
// Cross-entropy over a row of logits fused with its gradient: the row pass gives m and d, the loss is
// log(d) + m - x[target], and the gradient is written straight from the held row: the probabilities
// are never stored.
template <typename T, typename T_ACC, unsigned VEC, unsigned VECS, unsigned LANES, unsigned CLUSTER, bool WHOLE>
__global__ void __maxnreg__((regs_cap<T, CLUSTER>(VEC * VECS))) __cluster_dims__(CLUSTER, 1, 1)
    cross_entropy_regs(const T* X, const int64_t* target, T* dX, float* loss, const float* grad_scale, int64_t M,
                       int64_t N, int64_t ignore_index) {
  __shared__ RowScratch scratch;
  CrossEntropyOut<T> epi{X, target, dX, loss, grad_scale, ignore_index};
  row_pass_regs<T, VEC, VECS, LANES, CLUSTER, WHOLE>(X, M, N, epi, scratch);
}
// --8<-- [end:cross_entropy_regs]

// --8<-- [start:cross_entropy_smem]
template <typename T, typename T_ACC, unsigned VEC, unsigned CLUSTER>
__global__ void __launch_bounds__(REGS_MAX_BLOCK) __cluster_dims__(CLUSTER, 1, 1)
    cross_entropy_smem(const T* X, const int64_t* target, T* dX, float* loss, const float* grad_scale, int64_t M,
                       int64_t N, int64_t ignore_index, int64_t share) {
  __shared__ RowScratch scratch;
  CrossEntropyOut<T> epi{X, target, dX, loss, grad_scale, ignore_index};
  row_pass_smem<T, VEC, CLUSTER>(X, M, N, share, epi, scratch);
}
// --8<-- [end:cross_entropy_smem]

}  // namespace ladder
