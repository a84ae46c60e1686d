// One rung of the study ladder: its entry is in reimpl/ladder/registry.py, the rungs' contract in ladder.cuh.
#include "ladder.cuh"
#include "row.cuh"

namespace ladder {

// --8<-- [start:ln_row_held]
// The top CUDA rung: the row held on chip, laid out by its width as OneFlow's layer_norm.cuh does
// (launch.held_plan: 4 to 32 lanes of a warp for short rows, several rows a block; a block for
// middle rows; a thread-block cluster for long ones), read once as 16-byte words and written once.
// Every word a thread holds is requested before any is used. Inside a block the statistics take two
// passes over the held row: the mean, then the squared deviations about it, so nothing cancels
// (RMSNorm: the sum of squares alone). A cluster's blocks merge their Welford states (count, mean,
// M2) with Chan's formula (welford_merge) through distributed shared memory, in rank order, so that
// every block holds the same bits. (One reduction instead, of per-thread Welford states merged by
// Chan's formula over lanes and warps, measured slower: a division in every merge step.) Rows are
// 16-byte aligned and a whole number of words (the launcher checks; block_vec or rms_warp_sumsq
// take the others).
// The probe's knobs (scripts/gpu/row_held_probe.py times each setting; the defaults' median is
// within a point of the best setting's, for both rungs):
// the most bytes of the row a thread holds for which it fetches weight and bias words early, and
// the blocks an SM is asked to hold (__launch_bounds__) where a thread holds at most 32 bytes of the
// row, for warp plans (blocks of 128 threads) and for block plans.
#ifndef ROW_HELD_EARLY_BYTES
#define ROW_HELD_EARLY_BYTES 0
#endif
#ifndef ROW_HELD_WARP_BLOCKS
#define ROW_HELD_WARP_BLOCKS 1
#endif
#ifndef ROW_HELD_BLOCK_BLOCKS
#define ROW_HELD_BLOCK_BLOCKS 1
#endif
template <typename T, unsigned VEC, unsigned VECS, unsigned LANES>
struct RowHeldBounds {
  static constexpr bool early = VECS * VEC * sizeof(T) <= ROW_HELD_EARLY_BYTES;
  static constexpr unsigned threads = LANES ? REGS_WARP_BLOCK : REGS_MAX_BLOCK;
  static constexpr bool small = VECS * VEC * sizeof(T) <= 32;
  // a block plan's thread that holds 32 floats or fewer is held to 64 registers: two blocks of 512
  // threads an SM, so that one block's reductions overlap the other's loads
  static constexpr unsigned fit = !LANES && VECS * VEC <= 32 ? 2 : 1;
  static constexpr unsigned blocks = !small ? fit : LANES ? ROW_HELD_WARP_BLOCKS : ROW_HELD_BLOCK_BLOCKS;
};

struct RowHeldScratch {
  float sum[32], sq[32];
  Welford block;
};

template <typename T, typename T_ACC, bool RMS, unsigned VEC, unsigned VECS, unsigned LANES, unsigned CLUSTER>
__global__ void __launch_bounds__(RowHeldBounds<T, VEC, VECS, LANES>::threads,
                                  RowHeldBounds<T, VEC, VECS, LANES>::blocks) __cluster_dims__(CLUSTER, 1, 1)
    ln_row_held(const T* X, const T* W, const T* B, T* Y, float* mean, float* rstd, int64_t M, int64_t N,
                T_ACC eps) {
  constexpr bool EARLY = RowHeldBounds<T, VEC, VECS, LANES>::early;
  constexpr unsigned PVECS = EARLY ? VECS : 1;
  __shared__ RowHeldScratch scratch;
  const int span = (int)((LANES ? LANES : blockDim.x) * VECS * VEC);
  const Share<VEC, LANES, CLUSTER> sh(M, N, span);
  const T* x = X + sh.row * N + sh.first;
  Pack<T, VEC> held[VECS], w[PVECS], b[PVECS];
#pragma unroll
  for (unsigned k = 0; k < VECS; ++k) held[k] = load_whole<T, VEC>(x, (int)((k * sh.lanes + sh.lane) * VEC), sh);
  if constexpr (EARLY) {
#pragma unroll
    for (unsigned k = 0; k < VECS; ++k) {
      const int p = (int)((k * sh.lanes + sh.lane) * VEC);
      if (W != nullptr) w[k] = load_whole<T, VEC>(W + sh.first, p, sh);
      if (B != nullptr) b[k] = load_whole<T, VEC>(B + sh.first, p, sh);
    }
  }
  // widened once: every later use reads floats (words past the row hold zeros)
  float v[VECS][VEC];
#pragma unroll
  for (unsigned k = 0; k < VECS; ++k) unpack(held[k], v[k]);
  float s = 0.f;
#pragma unroll
  for (unsigned k = 0; k < VECS; ++k)
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) s += v[k][j];
  const int lo = sh.lo > 0 ? sh.lo : 0, hi = sh.hi < span ? sh.hi : span;
  const float n = hi > lo ? (float)(hi - lo) : 0.f;  // the share's own elements
  float m_b = 0.f;
  if constexpr (!RMS) {
    const float total = row_reduce<LANES>(s, 0.f, scratch.sum, Sum());
    m_b = n > 0.f ? total / n : 0.f;
  }
  float q = 0.f;
#pragma unroll
  for (unsigned k = 0; k < VECS; ++k) {
    float qk = 0.f;  // a word's own sum, kept or dropped whole: one select a word, not one an element
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) {
      const float d = v[k][j] - m_b;
      qk += d * d;
    }
    q += sh.holds((int)((k * sh.lanes + sh.lane) * VEC)) ? qk : 0.f;
  }
  Welford st{n, m_b, row_reduce<LANES>(q, 0.f, scratch.sq, Sum())};
  if constexpr (CLUSTER > 1) st = cluster_reduce<CLUSTER>(st, &scratch.block, Welford{0.f, 0.f, 0.f}, WelfordMerge());
  const float mu = RMS ? 0.f : st.mean, rs = rsqrtf(st.m2 / (float)N + eps);
  if (!sh.any()) return;  // after the reductions: every thread took part
  if (sh.lo >= 0 && sh.lane == 0) {
    if constexpr (!RMS) mean[sh.row] = mu;
    rstd[sh.row] = rs;
  }
  T* y = Y + sh.row * N + sh.first;
#pragma unroll
  for (unsigned k = 0; k < VECS; ++k) {
    const int p = (int)((k * sh.lanes + sh.lane) * VEC);
    if (sh.holds(p)) {
      Pack<T, VEC> o;
      float wf[VEC], bf[VEC], out[VEC];
      if constexpr (!RMS) {
#pragma unroll
        for (unsigned j = 0; j < VEC; ++j) wf[j] = 1.f, bf[j] = 0.f;  // missing factors: w = 1, b = 0
      }
      if constexpr (EARLY) {
        if (W != nullptr) unpack(w[k], wf);
        if (B != nullptr) unpack(b[k], bf);
      } else if constexpr (RMS) {  // RMSNorm keeps the cast Pack, which the compiler splits into 4-byte loads
        if (W != nullptr) unpack(*reinterpret_cast<const Pack<T, VEC>*>(W + sh.first + p), wf);
        if (B != nullptr) unpack(*reinterpret_cast<const Pack<T, VEC>*>(B + sh.first + p), bf);
      } else {  // one 16-byte load a parameter word
        if (W != nullptr) unpack(load_word_if<T, VEC>(W + sh.first, p, true), wf);
        if (B != nullptr) unpack(load_word_if<T, VEC>(B + sh.first, p, true), bf);
      }
      if constexpr (RMS) {  // y = x * rstd * w (mu = 0, no bias)
#pragma unroll
        for (unsigned j = 0; j < VEC; ++j) {
          float r = (v[k][j] - mu) * rs;
          if (W != nullptr) r *= wf[j];
          if (B != nullptr) r += bf[j];
          out[j] = r;
        }
      } else {
        // y = (x - mean) * rstd * w + b as x * a + c, with a = rstd * w and c = b - mean * a: one
        // multiply and two fused multiply-adds an element where there were four operations
#pragma unroll
        for (unsigned j = 0; j < VEC; ++j) {
          const float a = rs * wf[j];
          out[j] = fmaf(v[k][j], a, fmaf(-mu, a, bf[j]));
        }
      }
      pack(out, o);
      store_word<true>(y, p, o, sh);
    }
  }
}
// --8<-- [end:ln_row_held]

}  // namespace ladder
