// What the one-read kernels share (softmax.cu's, and the ladder's ln_row_held.cu): a row, or a
// thread-block cluster block's share of it, laid out over the threads that hold it as 16-byte words;
// a float reduced over those threads; a state reduced over a cluster's blocks; and the load and the
// store of a word. launch.regs_plan
// chooses the layout (lanes of a warp or a block, words a thread, blocks a cluster).
#pragma once
#include "common.cuh"

namespace ladder {

// --8<-- [start:row_layout]
constexpr unsigned REGS_MAX_BLOCK = 512;  // launch.REGS_MAX_BLOCK: at most 128 registers a thread
constexpr unsigned REGS_WARP_BLOCK = 128;  // launch.REGS_WARP_BLOCK: the blocks of the warp plans

template <typename T, unsigned VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

// A float reduced over the threads of a row: LANES lanes of a warp by a butterfly, or (LANES = 0) the
// whole block, its warps through `red` (a slot a warp). Every thread gets the same bits.
template <unsigned LANES, typename Op>
__device__ __forceinline__ float row_reduce(float v, float identity, float* red, Op op) {
  if constexpr (LANES == 0) {
    return block_all_reduce(v, identity, red, op);
  } else {
    for (unsigned mask = LANES / 2; mask > 0; mask >>= 1) v = op(v, shfl_xor(v, (int)mask));
    return v;
  }
}

// Hopper's cluster barrier: every thread of every block of the cluster arrives (release) and waits
// (acquire), so shared-memory writes before it are seen by the other blocks after it.
__device__ __forceinline__ void cluster_sync() {
  __cluster_barrier_arrive();
  __cluster_barrier_wait();
}

// A state reduced over a cluster's blocks: each block publishes its own in `slot`, and every block
// merges all of them in rank order through distributed shared memory, so that all hold the same bits.
template <unsigned CLUSTER, typename S, typename Merge>
__device__ __forceinline__ S cluster_reduce(S s, S* slot, S empty, Merge merge) {
  if (threadIdx.x == 0) *slot = s;
  cluster_sync();
  S r = empty;
  for (unsigned b = 0; b < CLUSTER; ++b) r = merge(r, *static_cast<const S*>(__cluster_map_shared_rank(slot, b)));
  cluster_sync();  // no block leaves while another still reads its shared memory
  return r;
}

// Where a thread's share of a row lies. A share is `span` window positions: block `rank` of a
// cluster (or the one group of LANES threads) holds positions [rank * span, (rank + 1) * span) of the
// row's window, which starts at the 16-byte word holding the row's first element, `lead` elements
// before it. Element e of the row sits at position e + lead; in share coordinates, the row's elements
// are the positions [lo, hi).
template <unsigned VEC, unsigned LANES, unsigned CLUSTER>
struct Share {
  int64_t row, first;  // first: the row's element at the share's position 0
  int lo, hi;          // 32-bit: a row a plan holds is far shorter than 2^31 (launch.regs_plan)
  unsigned lane, lanes;
  __device__ __forceinline__ Share(int64_t M, int64_t N, int64_t span) {
    if constexpr (LANES == 0) {
      row = blockIdx.x / CLUSTER;
      lanes = blockDim.x;
      lane = threadIdx.x;
    } else {
      row = (int64_t)blockIdx.x * (blockDim.x / LANES) + threadIdx.x / LANES;
      lanes = LANES;
      lane = threadIdx.x % LANES;
    }
    const int64_t rank = CLUSTER > 1 ? (int64_t)__clusterRelativeBlockRank() : 0;
    const int64_t lead = VEC > 1 ? (row * N) % VEC : 0;
    first = rank * span - lead;
    lo = (int)-first;
    // rows past M (the last block of short rows) still take part in the reductions, on no elements
    hi = row < M ? (int)(N - first) : lo;
  }
  __device__ __forceinline__ bool any() const { return hi > 0 && hi > lo; }
  // the word at position p: does it hold any of the row, all of it; is position p the row's
  __device__ __forceinline__ bool touches(int p) const { return p + (int)VEC > lo && p < hi; }
  __device__ __forceinline__ bool whole(int p) const { return p >= lo && p + (int)VEC <= hi; }
  __device__ __forceinline__ bool holds(int p) const { return p >= lo && p < hi; }
};

// Loads the word at share position p: 16 bytes at once where the word is all this row's, else only
// the row's own elements, `fill` standing in for the others (no load leaves the row).
template <typename T, unsigned VEC, typename S>
__device__ __forceinline__ void load_word(Pack<T, VEC>& w, const T* x, int p, const S& sh, T fill) {
  if (sh.whole(p)) {
    w = *reinterpret_cast<const Pack<T, VEC>*>(x + p);
  } else {
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) w.v[j] = sh.holds(p + j) ? x[p + j] : fill;
  }
}

// One predicated 16-byte load into a word whose 32-bit lanes hold `fill` where `load` is false (zero
// bits, or softmax's -inf: nothing to a maximum, 0 to a sum of exps), with no element-wise branch
// (whose control flow keeps the compiler from batching the loads) and no per-element fill. For rows
// of whole, aligned 16-byte words (the launcher checks), a word is the row's entirely or not at all,
// and load_whole loads exactly the row's.
template <typename T, unsigned VEC>
__device__ __forceinline__ Pack<T, VEC> load_word_if(const T* x, int p, bool load, unsigned fill = 0u) {
  static_assert(sizeof(Pack<T, VEC>) == 16, "whole words are 16 bytes");
  uint4 r = make_uint4(fill, fill, fill, fill);
  if (load) r = *reinterpret_cast<const uint4*>(x + p);
  return *reinterpret_cast<const Pack<T, VEC>*>(&r);
}
template <typename T, unsigned VEC, typename S>
__device__ __forceinline__ Pack<T, VEC> load_whole(const T* x, int p, const S& sh, unsigned fill = 0u) {
  return load_word_if<T, VEC>(x, p, sh.holds(p), fill);
}

// A word's elements as floats, and floats rounded (to nearest even, as from_f) into a word, a pair of
// 16-bit elements at a time: bf16 widens by a shift or a mask of its 32-bit pair, fp16 by one paired
// conversion, and a pair packs in one instruction. Element-wise, the compiler re-extracts each 16-bit
// half from the word with a byte permute before every use of it.
template <unsigned VEC>
__device__ __forceinline__ void unpack(const Pack<float, VEC>& w, float (&f)[VEC]) {
#pragma unroll
  for (unsigned j = 0; j < VEC; ++j) f[j] = w.v[j];
}
template <unsigned VEC>
__device__ __forceinline__ void unpack(const Pack<__nv_bfloat16, VEC>& w, float (&f)[VEC]) {
  const unsigned* u = reinterpret_cast<const unsigned*>(&w);
#pragma unroll
  for (unsigned j = 0; j < VEC / 2; ++j) {
    f[2 * j] = __uint_as_float(u[j] << 16);  // the pair's first element is its low half
    f[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
  }
}
template <unsigned VEC>
__device__ __forceinline__ void unpack(const Pack<__half, VEC>& w, float (&f)[VEC]) {
#pragma unroll
  for (unsigned j = 0; j < VEC / 2; ++j) {
    const float2 t = __half22float2(reinterpret_cast<const __half2*>(&w)[j]);
    f[2 * j] = t.x;
    f[2 * j + 1] = t.y;
  }
}
template <unsigned VEC>
__device__ __forceinline__ void pack(const float (&f)[VEC], Pack<float, VEC>& w) {
#pragma unroll
  for (unsigned j = 0; j < VEC; ++j) w.v[j] = f[j];
}
template <unsigned VEC>
__device__ __forceinline__ void pack(const float (&f)[VEC], Pack<__nv_bfloat16, VEC>& w) {
#pragma unroll
  for (unsigned j = 0; j < VEC / 2; ++j)
    reinterpret_cast<__nv_bfloat162*>(&w)[j] = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
}
template <unsigned VEC>
__device__ __forceinline__ void pack(const float (&f)[VEC], Pack<__half, VEC>& w) {
#pragma unroll
  for (unsigned j = 0; j < VEC / 2; ++j) reinterpret_cast<__half2*>(&w)[j] = __floats2half2_rn(f[2 * j], f[2 * j + 1]);
}

// One word stored whole. The 16-byte store is written in PTX: as plain C++ the compiler merges it
// with an element-wise branch beside it (both store the same values) into per-element stores,
// eight 2-byte stores a word for 16-bit types.
template <typename T, unsigned VEC>
__device__ __forceinline__ void store_whole(T* y, const Pack<T, VEC>& o) {
  if constexpr (sizeof(o) == 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(&o);
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(y), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  } else {
    *reinterpret_cast<Pack<T, VEC>*>(y) = o;
  }
}

// Writes the VEC outputs of the word at share position p: 16 bytes at once where the word is all this
// row's, else only the row's own elements.
template <bool WHOLE = false, typename T, unsigned VEC, typename S>
__device__ __forceinline__ void store_word(T* y, int p, const Pack<T, VEC>& o, const S& sh) {
  if (WHOLE ? sh.holds(p) : sh.whole(p)) {
    store_whole(y + p, o);
  } else if constexpr (!WHOLE) {
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j)
      if (sh.holds(p + j)) y[p + j] = o.v[j];
  }
}
// --8<-- [end:row_layout]

}  // namespace ladder
