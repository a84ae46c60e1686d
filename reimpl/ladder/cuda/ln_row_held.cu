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
// The probe's knobs (scripts/gpu/row_held_probe.py times each setting; the defaults have the best
// median for LayerNorm, and are within 2 points of the best for RMSNorm):
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
  static constexpr unsigned blocks = !small ? 1 : LANES ? ROW_HELD_WARP_BLOCKS : ROW_HELD_BLOCK_BLOCKS;
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
  const T zero = from_f<T>(0.f);
  Pack<T, VEC> held[VECS], w[PVECS], b[PVECS];
#pragma unroll
  for (unsigned k = 0; k < VECS; ++k) load_word<true>(held[k], x, (int)((k * sh.lanes + sh.lane) * VEC), sh, zero);
  if constexpr (EARLY) {
#pragma unroll
    for (unsigned k = 0; k < VECS; ++k) {
      const int p = (int)((k * sh.lanes + sh.lane) * VEC);
      if (W != nullptr) load_word<true>(w[k], W + sh.first, p, sh, zero);
      if (B != nullptr) load_word<true>(b[k], B + sh.first, p, sh, zero);
    }
  }
  float s = 0.f;
#pragma unroll
  for (unsigned k = 0; k < VECS; ++k)
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) s += to_f(held[k].v[j]);  // words past the row hold zeros
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
    const bool mine = sh.holds((int)((k * sh.lanes + sh.lane) * VEC));
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) {
      const float d = mine ? to_f(held[k].v[j]) - m_b : 0.f;
      q += d * d;
    }
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
      Pack<T, VEC> wk{}, bk{}, o;
      if constexpr (EARLY) {
        wk = w[k];
        bk = b[k];
      } else {
        if (W != nullptr) wk = *reinterpret_cast<const Pack<T, VEC>*>(W + sh.first + p);
        if (B != nullptr) bk = *reinterpret_cast<const Pack<T, VEC>*>(B + sh.first + p);
      }
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) {
        float v = (to_f(held[k].v[j]) - mu) * rs;
        if (W != nullptr) v *= to_f(wk.v[j]);
        if (B != nullptr) v += to_f(bk.v[j]);
        o.v[j] = from_f<T>(v);
      }
      store_word<true>(y, p, o, sh);
    }
  }
}
// --8<-- [end:ln_row_held]

}  // namespace ladder
