// Torch's bits, faster, the whole backward: dX, dgamma and dbeta of LayerNorm (dX and dgamma of
// RMSNorm) in one kernel that reads X and dY from DRAM once, for the inputs torch sends to
// layer_norm_grad_input_kernel_vectorized followed by a GammaBetaBackwardCUDAKernelTemplate tile
// <32, Y, 8 Y> (Y = 1, 8, 16, 32 thread rows; every M but the huge-M partial path), with a weight.
// Ours; it reuses the fast dX kernel's row (fast_grad_input.cu, grad_input_row).
//
// What fixes dgamma's bits (reimpl/mirror/cuda/layer_norm_kernel.cu, GammaBeta*):
//   a chain per column j and thread row y: rows 8 Y k + 8 y + i (k = 0, 1, ..., i = 0..7) in that
//     order, each adding, in float, dg = fma(dy * (x - mean), rstd, dg) (RMSNorm: fma(dy * x, rstd,
//     dg)) and db = db + dy (the SASS: FADD, FMUL, FFMA; FADD); rows past M in the last tile add +0;
//   the Y chains of a column, added by the warp's XOR tree (offsets Y/2 .. 1; lane 0's result):
//     for d = Y/2 .. 1, a[l] = a[l] + a[l + d] for l < d; then rounded to T. Y = 1 writes the chain.
// and dX's (fast_grad_input.cu): torch's 128 threads' sums over their vectors, its BlockReduceSum
// tree, and the per-element steps. Nothing else enters the bits.
//
// The kernel keeps both lists and changes who does what, and when:
//   1. A grid of as many 128-thread blocks as stay resident sweeps the rows from the top, block b
//      taking rows b, b + blocks, ...: each such row is the fast dX kernel's, torch's dX bits.
//   2. A chain is serial, so one warp owns it from the first tile to the last: warp-unit u is a
//      chain y and a slab of 32 vectors (128 columns), lane l holding the chains of the slab's
//      vector l. Units are dealt out over the blocks (unit u to block u % blocks), so no block holds
//      more than one unit beyond any other, beside its rows.
//   3. Between two of its rows, a block advances its units through every tile the sweep has passed:
//      rows the blocks have just read for dX, so the chains' reads of X and dY come from L2, not
//      DRAM. Nothing waits on another block: a block that runs late only reads from farther away.
//   4. The Y chains of a column end in a small kernel (fast_backward_finish_kernel) that adds them
//      in the XOR tree's pairs and rounds to T.
// Every rounding is an explicit __fadd_rn / __fmul_rn / __fmaf_rn, so contraction cannot drift.
#include "fast_grad_input.cu"

namespace reimpl_fast {

constexpr int CHAIN_UNITS = 2;  // warp-units a warp holds at most (the plan deals them out within that)
// registers beyond the dX row's: the units' chains, a tile's 8 rows of X and dY words, mean and rstd
constexpr int CHAIN_REGS = 48;

// --8<-- [start:chain_step]
// One row's contribution to a column's chains (torch's blockReduceGammaBetaBackwardsHelper).
template <bool rms_norm>
__device__ __forceinline__ void chain_step(float& dg, float& db, const float x, const float dy, const float mean,
                                          const float rstd) {
  if constexpr (!rms_norm) {
    dg = __fmaf_rn(__fmul_rn(dy, __fsub_rn(x, mean)), rstd, dg);
    db = __fadd_rn(db, dy);
  } else {
    dg = __fmaf_rn(__fmul_rn(dy, x), rstd, dg);
  }
}
// --8<-- [end:chain_step]

// Rows row0 .. row0 + 7 of a chain (torch's tile k, thread row y: row0 = 8 Y k + 8 y) at vector v,
// added in order to the chains of its vec_size columns; FULL: all 8 rows are below M (every tile but
// torch's last), so none needs a bound check. A row past M adds +0, as torch's zero-filled rows do.
template <typename T, bool rms_norm, bool FULL>
__device__ __forceinline__ void chain_rows(const words_t<T>* xw, const words_t<T>* dyw, const float* mean,
                                           const float* rstd, float (&ag)[vec_size], float (&ab)[vec_size],
                                           const int64_t row0, const int v, const int n_vec, const int64_t M) {
  constexpr int B = sizeof(T) == 4 ? 4 : 8;  // rows loaded at once: 64 registers of words at most
  const words_t<T>* xp = xw + row0 * n_vec + v;
  const words_t<T>* dyp = dyw + row0 * n_vec + v;
#pragma unroll
  for (int i0 = 0; i0 < 8; i0 += B) {
    words_t<T> xv[B], dyv[B];
    float mv[B], rv[B];
#pragma unroll
    for (int i = 0; i < B; i++) {
      if (FULL || row0 + i0 + i < M) {
        xv[i] = xp[(i0 + i) * n_vec];
        dyv[i] = dyp[(i0 + i) * n_vec];
        mv[i] = rms_norm ? 0.f : mean[row0 + i0 + i];
        rv[i] = rstd[row0 + i0 + i];
      }
    }
#pragma unroll
    for (int i = 0; i < B; i++) {
#pragma unroll
      for (int e = 0; e < vec_size; e++) {
        if (FULL || row0 + i0 + i < M) {
          chain_step<rms_norm>(ag[e], ab[e], element<T>(xv[i], e), element<T>(dyv[i], e), mv[i], rv[i]);
        } else {
          ag[e] = __fadd_rn(ag[e], 0.f);
          ab[e] = __fadd_rn(ab[e], 0.f);
        }
      }
    }
  }
}

// --8<-- [start:fast_backward_fused_kernel]
// Grid: the resident blocks of 128 threads (at least the warp-units / (4 CHAIN_UNITS)); R: vectors of
// a torch dX thread (ceil(N / 512) <= R). chains: [2][Y][N] floats (dgamma's, then dbeta's) for the
// finish kernel.
template <typename T, typename T_ACC, bool rms_norm, unsigned int R>
__global__ void __launch_bounds__(128, (grad_min_blocks<T, R, CHAIN_REGS>()))
fast_backward_fused_kernel(const T* __restrict__ dY, const T* __restrict__ X, const T_ACC* __restrict__ mean,
                           const T_ACC* __restrict__ rstd, const T* __restrict__ gamma, T* __restrict__ dX,
                           const int N, const int64_t M, const int Y, float* __restrict__ chains) {
  using words = words_t<T>;
  __shared__ float4 buf[2][rms_norm ? 1 : 2];  // block_sums' slots, by row parity (no barrier between rows)
  const int64_t blocks = gridDim.x;
  const int64_t rows_a_tile = 8 * (int64_t)Y;
  const int64_t tiles = (M + rows_a_tile - 1) / rows_a_tile;  // torch's tiles of 8 Y rows
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int n_vec = N / vec_size;
  const int slabs = (n_vec + 31) / 32;
  const int64_t units = (int64_t)slabs * Y;
  const words* xw = reinterpret_cast<const words*>(X);
  const words* dyw = reinterpret_cast<const words*>(dY);

  // this warp's units: u = blockIdx.x + blocks * (warp + 4 q), q < CHAIN_UNITS; unit u is chain
  // y = u / slabs over the slab's vector v = 32 (u % slabs) + lane
  float ag[CHAIN_UNITS][vec_size], ab[CHAIN_UNITS][vec_size];
#pragma unroll
  for (int q = 0; q < CHAIN_UNITS; q++)
#pragma unroll
    for (int e = 0; e < vec_size; e++) ag[q][e] = ab[q][e] = 0.f;
  const auto unit_of = [&](const int q) { return blockIdx.x + blocks * (warp + 4 * q); };

  // one tile's rows of this warp's chains, in chain order (every tile but torch's last is full)
  const auto chain_tile = [&](const int64_t k) {
#pragma unroll
    for (int q = 0; q < CHAIN_UNITS; q++) {
      const int64_t u = unit_of(q);
      if (u >= units) break;  // units are dealt in q order: none further
      const int v = 32 * (int)(u % slabs) + lane;
      if (v >= n_vec) continue;
      const int64_t row0 = k * rows_a_tile + 8 * (u / slabs);
      if (row0 + 8 <= M) {
        chain_rows<T, rms_norm, true>(xw, dyw, mean, rstd, ag[q], ab[q], row0, v, n_vec, M);
      } else {
        chain_rows<T, rms_norm, false>(xw, dyw, mean, rstd, ag[q], ab[q], row0, v, n_vec, M);
      }
    }
  };

  int64_t next_tile = 0;
  for (int64_t j = 0;; j++) {
    const int64_t row = blockIdx.x + blocks * j;
    if (row < M) {
      grad_input_row<T, rms_norm, true, R, 0>(dY, X, mean, rstd, gamma, dX, N, row, nullptr, buf[j & 1]);
    }
    // the sweep's front: every block has taken its row below blocks * (j + 1)
    const int64_t front = row < M ? blocks * (j + 1) : M;
    const int64_t passed = front >= M ? tiles : front / rows_a_tile;
    for (; next_tile < passed; next_tile++) chain_tile(next_tile);
    if (front >= M) break;
  }

  // the chains leave for the finish kernel
#pragma unroll
  for (int q = 0; q < CHAIN_UNITS; q++) {
    const int64_t u = unit_of(q);
    if (u >= units) break;
    const int64_t y = u / slabs;
    const int v = 32 * (int)(u % slabs) + lane;
    if (v >= n_vec) continue;
#pragma unroll
    for (int e = 0; e < vec_size; e++) {
      const int64_t col = (int64_t)vec_size * v + e;
      chains[y * N + col] = ag[q][e];
      if (!rms_norm) chains[(Y + y) * N + col] = ab[q][e];
    }
  }
}
// --8<-- [end:fast_backward_fused_kernel]

// --8<-- [start:fast_gamma_beta_chains_kernel]
// The chains alone, in place of torch's GammaBeta launch where dX ran in a kernel of
// its own. Torch's tile gives a column's chains to the threads of one block, so a row
// of N elements fills N / 32 blocks (24 of 132 SMs at N = 768), each thread with one
// tile's 8 rows of loads in flight. Here block b = y * slabs + s owns chain y of slab
// s (32 words of the row: 64 columns of a 16-bit type, 32 of float), one warp per
// column of a word (C warps): lane l of warp h holds the chain of column h of word
// 32 s + l. A column's chains spread over every SM, one thread each, as in torch.
// The block copies its chain's run of each tile (8 rows of X and dY words, their mean
// and rstd) into a ring of S stages of shared memory with cp.async, S - 1 tiles ahead
// of the run it adds: 8 (S - 1) rows a thread in flight, holding no register. The
// threads copy in pieces of V words: 4 (16 bytes) where the row is whole 16-byte
// pieces and 16-byte aligned, a quarter of the instructions of a word each.
// Grid: Y * slabs blocks of 32 C threads (C: columns a word).
// chains: [2][Y][N] floats, as the fused kernel leaves them for the finish kernel.
template <int S>
struct ChainStages {
  unsigned int x[S][8][32], dy[S][8][32];  // a lane's word of each row: conflict-free reads
  float mean[S][8], rstd[S][8];            // read by every lane at once: a broadcast
};

// An asynchronous copy of V 32-bit words from global to shared memory (cp.async; 16 bytes skip L1).
template <int V>
__device__ __forceinline__ void copy_words(void* dst, const void* src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  if constexpr (V == 4) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
  } else {
    static_assert(V == 1, "a word, or four");
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src));
  }
}

template <typename T, typename T_ACC, bool rms_norm, int S, int V>
__global__ void __launch_bounds__(128) fast_gamma_beta_chains_kernel(
    const T* __restrict__ dY, const T* __restrict__ X, const T_ACC* __restrict__ mean,
    const T_ACC* __restrict__ rstd, const int N, const int64_t M, const int Y,
    float* __restrict__ chains) {
  constexpr int C = 4 / sizeof(T);  // columns a word: the block's warps
  constexpr int PIECES = 32 / V;    // pieces of a row's 32 words
  static_assert((8 * PIECES) % (32 * C) == 0, "a stage's pieces are shared out evenly");
  __shared__ ChainStages<S> st;
  const int n_words = N / C;
  const int slabs = (n_words + 31) / 32;
  const int lane = threadIdx.x % 32, h = threadIdx.x / 32;
  const int y = (int)(blockIdx.x / slabs);
  const int slab0 = 32 * (int)(blockIdx.x % slabs);  // the slab's first word
  const int w = slab0 + lane;
  const int64_t rows_a_tile = 8 * (int64_t)Y;
  const int64_t tiles = (M + rows_a_tile - 1) / rows_a_tile;  // torch's tiles of 8 Y rows
  const unsigned int* xw = reinterpret_cast<const unsigned int*>(X);
  const unsigned int* dyw = reinterpret_cast<const unsigned int*>(dY);

  // tile k's 8 rows of the chain into stage k % S; a row past M is +0 with mean and rstd 0 (torch's
  // zero-filled rows); a tile past the last copies nothing (an empty group keeps the count)
  const auto issue = [&](const int64_t k) {
    if (k < tiles) {
      const int b = (int)(k % S);
      const int64_t row0 = k * rows_a_tile + 8 * y;
#pragma unroll
      for (int q = 0; q < 8 * PIECES / (32 * C); q++) {
        const int c = threadIdx.x + 32 * C * q;
        const int i = c / PIECES, off = V * (c % PIECES);
        const int64_t row = row0 + i;
        const int word = slab0 + off;
        if (row < M) {
          if (word < n_words) {  // V = 4: n_words is a multiple of 4, so the piece is whole
            copy_words<V>(&st.x[b][i][off], xw + row * n_words + word);
            copy_words<V>(&st.dy[b][i][off], dyw + row * n_words + word);
          }
        } else {
#pragma unroll
          for (int v = 0; v < V; v++) st.x[b][i][off + v] = st.dy[b][i][off + v] = 0u;
        }
      }
      if (threadIdx.x < 8) {
        const int64_t row = row0 + threadIdx.x;
        if (row < M) {
          if (!rms_norm) copy_words<1>(&st.mean[b][threadIdx.x], mean + row);
          copy_words<1>(&st.rstd[b][threadIdx.x], rstd + row);
        } else {
          st.mean[b][threadIdx.x] = st.rstd[b][threadIdx.x] = 0.f;
        }
      }
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };

  float ag = 0.f, ab = 0.f;
#pragma unroll
  for (int k = 0; k < S - 1; k++) issue(k);
  for (int64_t k = 0; k < tiles; k++) {
    __syncthreads();  // every thread is done reading the stage the next issue refills
    issue(k + S - 1);
    // this thread's copies of tile k have landed
    asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 1));
    __syncthreads();  // and every thread's
    const int b = (int)(k % S);
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const float m = rms_norm ? 0.f : st.mean[b][i];
      const float x = word_element<T>(st.x[b][i][lane], h);
      const float dy = word_element<T>(st.dy[b][i][lane], h);
      chain_step<rms_norm>(ag, ab, x, dy, m, st.rstd[b][i]);
    }
  }
  asm volatile("cp.async.wait_all;\n" ::);

  if (w >= n_words) return;  // a lane past the row added words it does not own
  const int64_t col = (int64_t)C * w + h;
  chains[y * (int64_t)N + col] = ag;
  if (!rms_norm) chains[(Y + y) * (int64_t)N + col] = ab;
}
// --8<-- [end:fast_gamma_beta_chains_kernel]

// --8<-- [start:fast_backward_finish_kernel]
// A column's Y chains added in the pairs of torch's XOR tree (lane 0's operands), rounded to T
// (Y = 1: the chain itself, torch's partial_reduction store). dg or db may be null (not requested).
template <typename T, typename T_ACC, bool rms_norm, unsigned int Y>
__global__ void __launch_bounds__(256) fast_backward_finish_kernel(const T_ACC* __restrict__ chains,
                                                                   T* __restrict__ dg, T* __restrict__ db,
                                                                   const int N) {
  const int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= N) return;
#pragma unroll
  for (int which = 0; which < (rms_norm ? 1 : 2); which++) {
    T* out = which == 0 ? dg : db;
    if (!out) continue;
    float a[Y];
#pragma unroll
    for (int l = 0; l < (int)Y; l++) a[l] = chains[(which * Y + l) * (int64_t)N + col];
    constexpr int LEVELS = Y >= 32 ? 5 : Y >= 16 ? 4 : Y >= 8 ? 3 : 0;  // Y = 1, 8, 16, 32
#pragma unroll
    for (int level = 1; level <= LEVELS; level++) {
#pragma unroll
      for (int l = 0; l < (int)(Y >> level); l++) a[l] = __fadd_rn(a[l], a[l + (Y >> level)]);
    }
    out[col] = a[0];
  }
}
// --8<-- [end:fast_backward_finish_kernel]

}  // namespace reimpl_fast
