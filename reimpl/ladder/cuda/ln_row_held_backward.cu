// The backward of the top CUDA rung (ln_row_held): its launcher is reimpl/ladder/backward.py, its
// rungs row_held and rms_row_held in reimpl/ladder/registry.py.
#include "ladder.cuh"
#include "row.cuh"

namespace ladder {

// Two sums of a row reduced together: sum(g * xhat) and sum(g), where g = dy * w.
struct Sum2 {
  static constexpr bool commutes = true;
  __device__ __forceinline__ float2 operator()(float2 a, float2 b) const { return make_float2(a.x + b.x, a.y + b.y); }
};

constexpr unsigned BACK_MAX_BLOCK = 512;  // backward.BACK_MAX_BLOCK: at most 128 registers a thread
#ifndef BACK_PREFETCH
#define BACK_PREFETCH 1
#endif

// --8<-- [start:ln_row_held_backward]
// dX, and dgamma / dbeta as partial sums, in one pass over x and dy. The row is held as in the
// forward (launch.RegsPlan: 4 to 32 lanes of a warp for short rows, a block, or a cluster of blocks
// for long ones), but the grid is persistent: each holder of a row (`group`) walks the rows g, g + G,
// g + 2G, ... and keeps, for the columns it holds, its running dgamma and dbeta in registers. So x
// and dy are read once, dx written once, and the weight gradients cost one row of partial sums per
// block (warp plans first fold their groups through shared memory) plus a second launch
// (column_sums) that adds those rows. The partial-sum idea is Liger-Kernel's (and Triton's
// layer-norm tutorial's); the held row and the cluster split are the forward's. Written by us.
// A thread holds 16 elements at most (x, g, dgamma, dbeta and the weight: five floats an element).
// Rows are 16-byte aligned and a whole number of words (the launcher checks).
template <typename T, typename T_ACC, bool RMS, unsigned VEC, unsigned VECS, unsigned LANES, unsigned CLUSTER>
__global__ void __launch_bounds__(LANES ? REGS_WARP_BLOCK : BACK_MAX_BLOCK) __cluster_dims__(CLUSTER, 1, 1)
    ln_row_held_backward(const T* DY, const T* X, const float* mean, const float* rstd, const T* W, T* DX,
                         float* dw_part, float* db_part, int64_t M, int64_t N) {
  __shared__ float2 red[2][32];  // a slot a warp, alternate rows: one barrier a row
  __shared__ float2 slot[2];     // the block's sums, read by the cluster's other blocks; alternate rows
  extern __shared__ float fold[];  // warp plans: each group's dgamma and dbeta, added per block
  const unsigned lanes = LANES ? LANES : blockDim.x;
  const unsigned lane = LANES ? threadIdx.x % LANES : threadIdx.x;
  const unsigned groups = LANES ? blockDim.x / LANES : 1;  // rows a block holds at once
  const unsigned group = LANES ? threadIdx.x / LANES : 0;
  const int64_t G = LANES ? (int64_t)gridDim.x * groups : gridDim.x / CLUSTER;  // rows held at once
  const int64_t g = LANES ? (int64_t)blockIdx.x * groups + group : blockIdx.x / CLUSTER;
  const int span = (int)(lanes * VECS * VEC);
  const int64_t first = CLUSTER > 1 ? (int64_t)__clusterRelativeBlockRank() * span : 0;
  const int hi = (int)(N - first < span ? N - first : span);  // the share's own positions: [0, hi)
  float w[VECS][VEC], dw[VECS][VEC], db[VECS][VEC];
#pragma unroll
  for (unsigned k = 0; k < VECS; ++k) {
    const int p = (int)((k * lanes + lane) * VEC);
    if (W != nullptr) {
      unpack(load_word_if<T, VEC>(W + first, p, p < hi), w[k]);
    } else {
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) w[k][j] = 1.f;
    }
#pragma unroll
    for (unsigned j = 0; j < VEC; ++j) dw[k][j] = db[k][j] = 0.f;
  }
  const float inv_n = 1.f / (float)N;
  // x, dy and the row's statistics of the row a holder takes next are requested while it still
  // reduces the current one (BACK_PREFETCH, timed by scripts/gpu/backward_probe.py): a block is the
  // only one on its SM where it holds 16 elements a thread, so nothing else would hide the loads
  Pack<T, VEC> xw[VECS], gw[VECS];
  float rs_next = 0.f, mu_next = 0.f;
  // a row past M is fetched as zeros (dy = 0: it adds nothing) and stores nothing
  auto fetch = [&](int64_t row) {
    const bool live = row < M;
    const T* x = X + row * N + first;
    const T* dy = DY + row * N + first;
#pragma unroll
    for (unsigned k = 0; k < VECS; ++k) {
      const int p = (int)((k * lanes + lane) * VEC);
      xw[k] = load_word_if<T, VEC>(x, p, live && p < hi);
      gw[k] = load_word_if<T, VEC>(dy, p, live && p < hi);
    }
    rs_next = live ? rstd[row] : 0.f;
    if constexpr (!RMS) mu_next = live ? mean[row] : 0.f;
  };
  // the loop runs while the row of the warp's first group is in range, so that every lane of a warp
  // takes part in every shuffle (a warp plan's later groups may have run out of rows)
  const int64_t lead = LANES && LANES < 32 ? g - group % (32 / LANES) : g;
  if (BACK_PREFETCH) fetch(g);
  unsigned parity = 0;
  for (int64_t row = g, lead_row = lead; lead_row < M; row += G, lead_row += G, parity ^= 1) {
    if (!BACK_PREFETCH) fetch(row);
    const float rs = rs_next, mu = mu_next;
    // xh: x normalised; gy: dy, then g = dy * w. Past the row dy is 0, so nothing there adds to a sum
    float xh[VECS][VEC], gy[VECS][VEC];
    float2 s = make_float2(0.f, 0.f);
#pragma unroll
    for (unsigned k = 0; k < VECS; ++k) {
      unpack(xw[k], xh[k]);
      unpack(gw[k], gy[k]);
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) {
        xh[k][j] = (xh[k][j] - mu) * rs;
        dw[k][j] += gy[k][j] * xh[k][j];
        db[k][j] += gy[k][j];
        gy[k][j] *= w[k][j];
        s.x += gy[k][j] * xh[k][j];
        s.y += gy[k][j];
      }
    }
    if (BACK_PREFETCH) fetch(row + G);
    if constexpr (LANES) {
      for (unsigned m = LANES / 2; m > 0; m >>= 1) s = Sum2()(s, shfl_xor(s, (int)m));
    } else {
      s = block_all_reduce(s, make_float2(0.f, 0.f), red[parity], Sum2());
    }
    if constexpr (CLUSTER > 1) {
      // the cluster's sums, one cluster barrier a row: a slot is written again two rows on, after
      // the next row's barrier, which no block passes before it has read this row's slots
      if (threadIdx.x == 0) slot[parity] = s;
      cluster_sync();
      s = make_float2(0.f, 0.f);
#pragma unroll
      for (unsigned b = 0; b < CLUSTER; ++b)
        s = Sum2()(s, *static_cast<const float2*>(__cluster_map_shared_rank(&slot[parity], b)));
    }
    const float c1 = s.x * inv_n, c2 = RMS ? 0.f : s.y * inv_n;
    T* dx = DX + row * N + first;
#pragma unroll
    for (unsigned k = 0; k < VECS; ++k) {
      const int p = (int)((k * lanes + lane) * VEC);
      float out[VEC];
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) out[j] = (gy[k][j] - (xh[k][j] * c1 + c2)) * rs;
      Pack<T, VEC> o;
      pack(out, o);
      if (row < M && p < hi) store_whole(dx + p, o);
    }
  }
  if constexpr (CLUSTER > 1) cluster_sync();  // no block leaves while another may still read its slots
  // one row of partial sums a block (warp plans) or a group (block and cluster plans)
  float* parts[2] = {dw_part, db_part};
  if constexpr (LANES) {
#pragma unroll
    for (unsigned k = 0; k < VECS; ++k)
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) {
        const int p = (int)((k * lanes + lane) * VEC + j);
        fold[group * span + p] = dw[k][j];
        fold[(groups + group) * span + p] = db[k][j];
      }
    __syncthreads();
    for (int p = threadIdx.x; p < hi; p += blockDim.x)
#pragma unroll
      for (int a = 0; a < 2; ++a) {
        if (parts[a] == nullptr) continue;
        float t = 0.f;
        for (unsigned r = 0; r < groups; ++r) t += fold[(a * groups + r) * span + p];
        parts[a][blockIdx.x * N + p] = t;
      }
  } else {
#pragma unroll
    for (unsigned k = 0; k < VECS; ++k) {
      const int p = (int)((k * lanes + lane) * VEC);
      if (p >= hi) continue;
#pragma unroll
      for (unsigned j = 0; j < VEC; ++j) {
        if (dw_part != nullptr) dw_part[g * N + first + p + j] = dw[k][j];
        if (db_part != nullptr) db_part[g * N + first + p + j] = db[k][j];
      }
    }
  }
}
// --8<-- [end:ln_row_held_backward]

// --8<-- [start:column_sums]
// The second launch: each column's partial sums added, P rows of them, in a fixed order (32 strided
// shares a column, then the shares in index order), so the weight gradients are deterministic.
// blockIdx.y picks the array (dgamma's, then dbeta's); OUT holds one row of N for each.
template <typename T, typename T_ACC>
__global__ void __launch_bounds__(1024) column_sums(const float* part, T* OUT, int64_t P, int64_t N) {
  __shared__ float t[32][33];
  const int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x;
  const float* src = part + (int64_t)blockIdx.y * P * N;
  float a = 0.f;
  if (j < N) {
#pragma unroll 8
    for (int64_t r = threadIdx.y; r < P; r += 32) a += src[r * N + j];
  }
  t[threadIdx.y][threadIdx.x] = a;
  __syncthreads();
  if (threadIdx.y == 0 && j < N) {
    float s = 0.f;
#pragma unroll
    for (int r = 0; r < 32; ++r) s += t[r][threadIdx.x];
    OUT[(int64_t)blockIdx.y * N + j] = from_f<T>(s);
  }
}
// --8<-- [end:column_sums]

}  // namespace ladder
