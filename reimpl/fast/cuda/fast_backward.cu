// Torch's bits, faster, the whole backward: dX, dgamma and dbeta of LayerNorm (dX and dgamma of
// RMSNorm) in one kernel that reads X and dY once, for the inputs torch sends to
// layer_norm_grad_input_kernel_vectorized followed by a GammaBetaBackwardCUDAKernelTemplate tile
// <32, Y, 8 Y> (Y = 1, 8, 16, 32 thread rows; every M but the huge-M partial path), with a weight.
// Ours; it reuses the fast dX kernel's per-element steps and row view (fast_grad_input.cu).
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
// The kernel keeps both lists and changes who does what:
//   1. A cluster of 4 blocks owns thread row y's chains (all columns), and walks its rows in chain
//      order, STEP rows at a time (fused_step). Block c of the cluster plays torch's dX warp c (threads 32 c ..
//      32 c + 31) on every one of those rows: warp w of the block takes row w of the step, lane l
//      sums torch's thread 32 c + l's vectors and the warp's shuffle-down tree gives torch's warp c
//      sum u_c. The four u_c of each row cross the cluster through distributed shared memory and
//      every block finishes torch's second tree, (u0 + u2) + (u1 + u3) with each u_c + 0, itself.
//   2. The block stages its rows' X and dY (its quarter of each row: torch warp c's vectors) in
//      shared memory; after the cluster barrier each thread owns some of those vectors' columns and,
//      row by row in chain order, writes dX and advances the chains in registers. X and dY leave
//      DRAM once; the next step's rows are loaded while this step waits for its peers.
//   3. The Y chains of a column end in a small kernel (fast_backward_finish_kernel) that adds them
//      in the XOR tree's pairs and rounds to T.
// Every rounding is an explicit __fadd_rn / __fmul_rn / __fmaf_rn, so contraction cannot drift.
#include "fast_grad_input.cu"

namespace reimpl_fast {

constexpr int FUSED_CLUSTER = 4;  // blocks of a cluster: one per warp of torch's 128-thread dX block

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

// Rows a step (the block's warps): 8, one tile's share, for rows of 4 or more vectors a torch thread;
// two tiles' for shorter rows, so that more bytes are in flight. Either way two blocks fit an SM
// (registers and shared memory): the device keeps fewer than 32 clusters of 4 one-block-an-SM
// (30 on the H200: results/fused_backward_probe.json, ncu_first_layout), so at one a block the last
// clusters would run as a second wave.
__host__ __device__ constexpr unsigned int fused_step(const unsigned int R) { return R >= 4 ? 8 : 16; }

// --8<-- [start:fast_backward_fused_kernel]
// Grid: 4 Y blocks in clusters of 4 (cluster y = blockIdx.x / 4, block c = its rank); block: STEP
// warps. R: vectors of a torch dX thread (ceil(N / 512) <= R). Shared memory: STEP rows x (X, dY)
// x 32 R vectors. chains: [2][Y][N] floats (dgamma's, then dbeta's) for the finish kernel.
template <typename T, typename T_ACC, bool rms_norm, unsigned int R>
__global__ void __cluster_dims__(FUSED_CLUSTER, 1, 1)
__launch_bounds__(32 * fused_step(R), sizeof(T) == 4 && R >= 16 ? 1 : 2)  // fp32 R = 16: 2 would spill
fast_backward_fused_kernel(const T* __restrict__ dY, const T* __restrict__ X, const T_ACC* __restrict__ mean,
                           const T_ACC* __restrict__ rstd, const T* __restrict__ gamma, T* __restrict__ dX,
                           const int N, const int64_t M, const int Y, float* __restrict__ chains) {
  using words = words_t<T>;
  using vec_t = aligned_vector<T, vec_size>;
  constexpr int S = rms_norm ? 1 : 2;
  constexpr int STEP = fused_step(R);
  constexpr int V = 32 * R;                           // vectors a block holds of each row
  constexpr int Q = (V + 32 * STEP - 1) / (32 * STEP);  // of which a thread owns Q in the chains
  __shared__ float2 sums[2][STEP][FUSED_CLUSTER];       // (s1, s2) of torch's warp c for each row; by step parity
  __shared__ float row_mean[STEP], row_rstd[STEP];
  extern __shared__ __align__(16) unsigned char staged[];
  words* stage = reinterpret_cast<words*>(staged);      // [STEP][2][V]: row w's X, then its dY
  const unsigned c = __clusterRelativeBlockRank();
  const int64_t y = blockIdx.x / FUSED_CLUSTER;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n_vec = N / vec_size;
  const int64_t tiles = (M + 8 * Y - 1) / (8 * Y);        // torch's tiles of 8 Y rows
  constexpr int GROUPS = STEP / 8;                        // tiles a step covers (8 rows of each)
  const int64_t steps = (tiles + GROUPS - 1) / GROUPS;
  // row w of step k: the chain's (GROUPS k + w / 8)-th tile, its row 8 y + w % 8
  const auto tile_of = [&](const int64_t k, const int w) { return GROUPS * k + w / 8; };
  const auto row_of = [&](const int64_t k, const int w) { return tile_of(k, w) * 8 * Y + 8 * y + w % 8; };
  // this thread's vector in phase 1 (torch thread 32 c + lane's r-th) and its r-th owned one in phase 2
  const auto vec1 = [&](const int r) { return (int)(32 * c + lane + 128 * r); };
  const auto slot2 = [&](const int q) { return (int)threadIdx.x + 32 * STEP * q; };
  const auto vec2 = [&](const int j) { return (int)(32 * c + j % 32 + 128 * (j / 32)); };

  words xr[R], dyr[R];
  float mean_r = 0.f, rstd_r = 0.f;  // of the row this warp holds (loaded with it)
  const auto load = [&](const int64_t k) {
    const int64_t row = row_of(k, warp);
    if (row < M) {
      if (!rms_norm) mean_r = mean[row];
      rstd_r = rstd[row];
      const words* xw = reinterpret_cast<const words*>(X + row * N);
      const words* dyw = reinterpret_cast<const words*>(dY + row * N);
#pragma unroll
      for (int r = 0; r < (int)R; r++) {
        if (vec1(r) < n_vec) {
          xr[r] = load_once<false>(&xw[vec1(r)]);
          dyr[r] = load_once<false>(&dyw[vec1(r)]);
        }
      }
    }
  };

  // the weights of the vectors this thread owns in phase 2, loaded once (a load a row would put the
  // L2's latency on every row of the chain loop)
  words gq[Q];
  float ag[Q][vec_size], ab[Q][vec_size];
#pragma unroll
  for (int q = 0; q < Q; q++) {
    if (slot2(q) < V && vec2(slot2(q)) < n_vec) gq[q] = reinterpret_cast<const words*>(gamma)[vec2(slot2(q))];
#pragma unroll
    for (int e = 0; e < vec_size; e++) ag[q][e] = ab[q][e] = 0.f;
  }

  // the peers must have started before anything is stored into their shared memory
  __cluster_barrier_arrive_relaxed();
  load(0);
  for (int64_t k = 0; k < steps; k++) {
    // phase 1: torch thread 32 c + lane's sums over its vectors of row w, then warp c's tree
    const int64_t row = row_of(k, warp);
    float st[S] = {};
    if (row < M) {
      using G = GradRow<T, rms_norm, true>;
      const G g{reinterpret_cast<const words*>(X + row * N), reinterpret_cast<const words*>(dY + row * N),
                reinterpret_cast<const words*>(gamma), reinterpret_cast<vec_t*>(dX + row * N), mean_r, rstd_r};
#pragma unroll
      for (int r = 0; r < (int)R; r++) {
        if (vec1(r) < n_vec) g.sum(st[0], st[S - 1], xr[r], dyr[r], vec1(r));
        if (r % 4 == 3) asm volatile("" ::: "memory");
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
#pragma unroll
      for (int s = 0; s < S; s++) st[s] = __fadd_rn(st[s], WARP_SHFL_DOWN(st[s], offset));
    }
    if (k == 0) __cluster_barrier_wait();
    if (lane < FUSED_CLUSTER) {  // lane b publishes warp c's sums for row w in block b
      float2* peer = static_cast<float2*>(__cluster_map_shared_rank(&sums[k & 1][warp][c], lane));
      *peer = make_float2(__shfl_sync(0xfu, st[0], 0, FUSED_CLUSTER), __shfl_sync(0xfu, st[S - 1], 0, FUSED_CLUSTER));
    }
    // the stage and the rows' mean and rstd are free once every thread has left the previous step's
    // phase 2, which read them
    __syncthreads();
#pragma unroll
    for (int r = 0; r < (int)R; r++) {
      stage[(warp * 2 + 0) * V + 32 * r + lane] = xr[r];
      stage[(warp * 2 + 1) * V + 32 * r + lane] = dyr[r];
    }
    if (lane == 0) {
      row_mean[warp] = mean_r;
      row_rstd[warp] = rstd_r;
    }
    __cluster_barrier_arrive();  // release: the sums stored into the peers, the stage
    if (k + 1 < steps) load(k + 1);
    __cluster_barrier_wait();  // acquire: the four blocks' sums of every row of this step

    // torch's second tree for row `lane` of the step, then shuffled to every lane row by row
    float tot[S] = {};
    if (lane < (int)STEP) {
      const float2 u0 = sums[k & 1][lane][0], u1 = sums[k & 1][lane][1];
      const float2 u2 = sums[k & 1][lane][2], u3 = sums[k & 1][lane][3];
      tot[0] = __fadd_rn(__fadd_rn(__fadd_rn(u0.x, 0.f), __fadd_rn(u2.x, 0.f)),
                         __fadd_rn(__fadd_rn(u1.x, 0.f), __fadd_rn(u3.x, 0.f)));
      tot[S - 1] = __fadd_rn(__fadd_rn(__fadd_rn(u0.y, 0.f), __fadd_rn(u2.y, 0.f)),
                             __fadd_rn(__fadd_rn(u1.y, 0.f), __fadd_rn(u3.y, 0.f)));
    }
    const float fH = N;
    // phase 2: rows in chain order; each thread its owned vectors' dX and chains
#pragma unroll 1
    for (int w = 0; w < (int)STEP; w++) {
      float s[S];
#pragma unroll
      for (int i = 0; i < S; i++) s[i] = WARP_SHFL(tot[i], w);
      if (tile_of(k, w) >= tiles) break;  // torch's loop never reaches this tile
      const int64_t roww = row_of(k, w);
      if (roww < M) {
        const float mean_w = row_mean[w], rstd_w = row_rstd[w];
        const float term1 = __fmul_rn(__frcp_rn(fH), rstd_w);
        vec_t* dXw = reinterpret_cast<vec_t*>(dX + roww * N);
#pragma unroll
        for (int q = 0; q < Q; q++) {
          const int j = slot2(q);
          if (j < V && vec2(j) < n_vec) {
            const words xv = stage[(w * 2 + 0) * V + j], dyv = stage[(w * 2 + 1) * V + j];
            const words gv = gq[q];
            vec_t out;
#pragma unroll
            for (int e = 0; e < vec_size; e++) {
              const float xe = element<T>(xv, e), dye = element<T>(dyv, e);
              out.val[e] = grad_element<rms_norm, true>(xe, dye, element<T>(gv, e), mean_w, rstd_w, s[0], s[S - 1],
                                                        fH, term1);
              chain_step<rms_norm>(ag[q][e], ab[q][e], xe, dye, mean_w, rstd_w);
            }
            dXw[vec2(j)] = out;
          }
        }
      } else {
        // a row past M in torch's last tile: its zeros add +0 to every chain
#pragma unroll
        for (int q = 0; q < Q; q++) {
#pragma unroll
          for (int e = 0; e < vec_size; e++) {
            ag[q][e] = __fadd_rn(ag[q][e], 0.f);
            ab[q][e] = __fadd_rn(ab[q][e], 0.f);
          }
        }
      }
    }
  }

  // the chains leave for the finish kernel
#pragma unroll
  for (int q = 0; q < Q; q++) {
    const int j = slot2(q);
    if (j < V && vec2(j) < n_vec) {
#pragma unroll
      for (int e = 0; e < vec_size; e++) {
        const int64_t col = (int64_t)vec_size * vec2(j) + e;
        chains[y * N + col] = ag[q][e];
        if (!rms_norm) chains[(Y + y) * N + col] = ab[q][e];
      }
    }
  }
}
// --8<-- [end:fast_backward_fused_kernel]

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
