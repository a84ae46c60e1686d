// Torch's bits, faster: a forward LayerNorm/RMSNorm kernel for exactly the inputs torch sends to
// vectorized_layer_norm_kernel (N % 4 == 0, aligned pointers, float/half/bfloat16, N <= 2^24),
// giving torch 2.11's out, mean and rstd bit for bit. Ours; it reuses the mirror's aligned_vector
// and WelfordDataLN by including the mirror (reimpl/mirror/cuda/), and restates its cuWelfordCombine
// (combine, below) with the same roundings.
//
// What fixes torch's bits is the list of floating-point operations each of torch's 128 "virtual"
// threads of a row applies, in order: its Welford updates over its elements, the shuffle-down tree,
// the shared-memory tree over the 4 warps, sigma2 / N, rsqrtf, and the normalisation expression.
// This kernel keeps that list exactly and changes only what is not in it:
//   1. 1.f / new_count is not divided at run time. Where the count is known when compiling (the
//      unrolled loops over a thread's registers), `1.f / c` is a constant the compiler folds with
//      IEEE round-to-nearest, the value the division gives; where it is not (long rows that
//      stream, and the merges), it is rcp.rn's own fast path without its range check
//      (count_reciprocal), the same value for every count.
//   2. The row stays on chip between the statistics and the normalisation (R vectors per thread
//      in registers), instead of being read a second time: loads and copies round nothing.
//   3. The row is held as 32-bit words, two 16-bit elements each, and converted with T's own
//      conversion when used: the same bits in, the same float out, half the registers, so more
//      blocks fit on an SM.
//   4. Short rows (fast_layer_norm_warp_kernel): one warp per row, each lane playing the same lane of
//      torch's four warps. Lane l keeps four Welford states, one per virtual warp, updated in the
//      same order as torch's threads l, l+32, l+64, l+96. Torch's shuffle-down tree only ever
//      uses lane 0's result, so the warp computes only the merges that feed it: 8 instead of the
//      20 + 3 a lane would run for four states (see warp_tree); each one merges the same two
//      operands, in the same order, as torch's. No barrier and no shared memory remain.
//   5. Rows that fill every slot (N = 512, 1024; the warp kernel's `full`): every count is a
//      constant, so counts, reciprocals and merge weights fold when compiling (combine's
//      known_counts); the data still meets the same roundings with operands of the same value.
//   6. Which warp takes which rows, and in what order it finishes them, rounds nothing: for grids
//      of about one wave a warp loads four rows and finishes them as two pairs, one after the other.
//   7. Rows of at most 32 vectors (fast_layer_norm_group_kernel): one group of lanes per row, several
//      rows a warp; torch's merges with threads that hold nothing keep their value without the
//      shuffle (merge_empty).
//   8. Rows of whole 128-byte lines up to 64 of them (fast_layer_norm_lane_kernel): 32 rows a warp
//      staged in shared memory, and each lane evaluates one row's whole tree alone, merge by merge
//      in torch's operand order (lane_tree): no shuffle rounds in which most lanes' results are
//      thrown away.
// Every rounding that torch's compiler fused into an FFMA is written here as __fmaf_rn, and every
// separate rounding as __fadd_rn / __fsub_rn / __fmul_rn, so contraction choices cannot drift.
#include "fast_common.cuh"

namespace reimpl_fast {

using at::native::WelfordDataLN;

// torch's cuWelfordOnlineSum with the reciprocal handed in (change 1). LayerNorm: delta = x - mean;
// mean' = fma(delta, 1/count', mean); sigma2' = fma(delta, x - mean', sigma2) -- the FADD/FFMA
// pattern results/sass_fma_table.md shows for layer_norm_kernel.cu:160-163. RMSNorm: fma(x, x, s).
// `new_count` is count + 1, an integer below 2^24 and so exact either way.
template <bool rms_norm>
__device__ __forceinline__ WelfordDataLN online_sum(const float val, const WelfordDataLN& s, const float rcp,
                                                    const float new_count) {
  if constexpr (!rms_norm) {
    const float delta = __fsub_rn(val, s.mean);
    const float new_mean = __fmaf_rn(delta, rcp, s.mean);
    return {new_mean, __fmaf_rn(delta, __fsub_rn(val, new_mean), s.sigma2), new_count};
  } else {
    return {0.f, __fmaf_rn(val, val, s.sigma2), 0.f};
  }
}

// 1.f / c for c a count (an integer from 0 to 2^24), IEEE round-to-nearest: the hardware's
// approximate reciprocal and one Newton step, the sequence NVRTC emits for `1.f / c` whenever c is
// a normal float (results/sass_fma_table.md: rcp.rn.f32 = MUFU.RCP, FFMA, FADD.FTZ, FFMA). What is
// left out is only the range check and its call to the slow path, which is taken for subnormal or
// huge c, never for a count. c = 0 gives NaN, which combine() discards as torch's branch does.
// Checked on the GPU against 1.f / c for every c up to 2^24 (tests/gpu/test_fast_gpu.py).
__device__ __forceinline__ float count_reciprocal(const float c) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(c));
  return __fmaf_rn(r, -__fmaf_rn(c, r, -1.f), r);
}

// torch's cuWelfordCombine(dataB, dataA) (layer_norm_kernel.cu:176-198 in reimpl/cuda), the same
// roundings in the same order as its SASS (FMUL nB*meanB then FFMA nA*meanA; FMUL, FMUL, FADD, FFMA
// for sigma2), with count_reciprocal for `1.f / count` and the `count > 0` branch as selects: no
// branch is left, so the compiler can interleave the merges of two rows.
// known_counts: both counts are constants when compiling (rows that fill every slot, below), so the
// count, 1.f / count, nA and nB fold to the IEEE values the instructions would compute, and the
// select to its `count > 0` side. The counts are integers below 2^24: their sum is exact either way.
template <bool rms_norm, bool known_counts = false>
__device__ __forceinline__ WelfordDataLN combine(const WelfordDataLN dataB, const WelfordDataLN dataA) {
  if constexpr (!rms_norm) {
    const float delta = __fsub_rn(dataB.mean, dataA.mean);
    const float count = known_counts ? dataA.count + dataB.count : __fadd_rn(dataA.count, dataB.count);
    const float coef = known_counts ? 1.f / count : count_reciprocal(count);
    const float nA = known_counts ? dataA.count * coef : __fmul_rn(dataA.count, coef);
    const float nB = known_counts ? dataB.count * coef : __fmul_rn(dataB.count, coef);
    const float mean = __fmaf_rn(nA, dataA.mean, __fmul_rn(nB, dataB.mean));
    const float sigma2 = __fmaf_rn(nB, __fmul_rn(__fmul_rn(delta, delta), dataA.count),
                                   __fadd_rn(dataA.sigma2, dataB.sigma2));
    const bool positive = count > 0.f;
    return {positive ? mean : 0.f, positive ? sigma2 : 0.f, count};
  } else {
    return {0.f, __fadd_rn(dataB.sigma2, dataA.sigma2), 0.f};
  }
}

// A virtual thread's four updates over one of its vectors, the one whose first element is its
// (k0 + 1)-th: in the unrolled loops k0 is known when compiling, so 1.f / float(k) folds (change 1).
template <typename T, bool rms_norm>
__device__ __forceinline__ WelfordDataLN update(WelfordDataLN wd, const words_t<T>& v, const int k0) {
#pragma unroll
  for (int ii = 0; ii < vec_size; ii++) {
    const int k = k0 + ii + 1;
    wd = online_sum<rms_norm>(element<T>(v, ii), wd, 1.f / float(k), float(k));
  }
  return wd;
}

// torch's tree for one row on a (32, 4) group, unchanged: shuffle-down within each warp, then the
// halving tree over the 4 warps in `buf` (6 floats), then (mean, sigma2 / N) for every thread.
template <bool rms_norm>
__device__ __forceinline__ WelfordDataLN block_tree(WelfordDataLN wd, const int N, float* buf) {
  for (int offset = (C10_WARP_SIZE >> 1); offset > 0; offset >>= 1) {
    WelfordDataLN wdB{WARP_SHFL_DOWN(wd.mean, offset), WARP_SHFL_DOWN(wd.sigma2, offset),
                      WARP_SHFL_DOWN(wd.count, offset)};
    wd = combine<rms_norm>(wd, wdB);
  }
  float* meansigmabuf = buf;
  float* countbuf = buf + 4;
  for (int offset = 2; offset > 0; offset /= 2) {
    if (threadIdx.x == 0 && threadIdx.y >= offset && threadIdx.y < 2 * offset) {
      const int wrt_y = threadIdx.y - offset;
      meansigmabuf[2 * wrt_y] = wd.mean;
      meansigmabuf[2 * wrt_y + 1] = wd.sigma2;
      countbuf[wrt_y] = wd.count;
    }
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y < offset) {
      WelfordDataLN wdB{meansigmabuf[2 * threadIdx.y], meansigmabuf[2 * threadIdx.y + 1], countbuf[threadIdx.y]};
      wd = combine<rms_norm>(wd, wdB);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    meansigmabuf[0] = wd.mean;
    meansigmabuf[1] = wd.sigma2 / float(N);
  }
  __syncthreads();
  return WelfordDataLN{meansigmabuf[0], meansigmabuf[1], 0.f};
}

// torch's normalisation of one element, roundings spelled out (layer_norm_kernel.cu:326-338 in the
// SASS table: FADD x - mean, FMUL rstd * that, then FFMA with gamma and beta, or FMULs).
template <bool rms_norm, bool has_gamma, bool has_beta>
__device__ __forceinline__ float normalize(const float x, const float mean, const float rstd, const float g,
                                           const float b) {
  const float xhat = rms_norm ? __fmul_rn(rstd, x) : __fmul_rn(rstd, __fsub_rn(x, mean));
  if (has_gamma && has_beta && !rms_norm) return __fmaf_rn(g, xhat, b);
  if (has_gamma) return __fmul_rn(g, xhat);
  if (has_beta && !rms_norm) return __fadd_rn(xhat, b);
  return xhat;
}

// Vector i of gamma and beta, as words: element<T> converts them as T's conversion does, in fewer
// instructions. Loaded apart from the stores, so that a caller can have several in flight before
// its first store (the loads may not move past a store the compiler cannot tell apart from them).
template <typename T, bool has_gamma, bool has_beta>
struct Weights {
  words_t<T> g, b;
};

template <typename T, bool has_gamma, bool has_beta, typename vec_t>
__device__ __forceinline__ void load_weights(Weights<T, has_gamma, has_beta>& w, const vec_t* gamma_vec,
                                             const vec_t* beta_vec, const int i) {
  if (has_gamma) w.g = reinterpret_cast<const words_t<T>*>(gamma_vec)[i];
  if (has_beta) w.b = reinterpret_cast<const words_t<T>*>(beta_vec)[i];
}

template <typename T, bool rms_norm, bool has_gamma, bool has_beta, typename vec_t>
__device__ __forceinline__ void store_row(const words_t<T>& data, const Weights<T, has_gamma, has_beta>& w,
                                          const int i, const float mean, const float rstd, vec_t* Y_vec) {
  vec_t out;
#pragma unroll
  for (int ii = 0; ii < vec_size; ii++) {
    out.val[ii] = normalize<rms_norm, has_gamma, has_beta>(element<T>(data, ii), mean, rstd,
                                                           has_gamma ? element<T>(w.g, ii) : 0.f,
                                                           has_beta ? element<T>(w.b, ii) : 0.f);
  }
  Y_vec[i] = out;
}

// Blocks per SM the compiler must fit in registers: the row's share (R * sizeof(T) words) plus
// 32 for everything else, which the kernels need without spilling (bf16 R = 32: 92 registers,
// 5 blocks; fp32 R = 32: 3 blocks).
template <typename T, unsigned int R>
__host__ __device__ constexpr int min_blocks() {
  const int regs = int(R * sizeof(T)) + 32;
  const int b = 65536 / (128 * ((regs + 7) / 8 * 8));
  return b < 1 ? 1 : (b > 16 ? 16 : b);
}

// --8<-- [start:fast_layer_norm_kernel]
// One (32, 4) block per row, exactly torch's shape and thread-to-vector map: thread t keeps
// vectors t + 128 r (r < R) in registers between the statistics and the normalisation.
template <typename T, typename T_ACC, bool rms_norm, bool has_gamma, bool has_beta, unsigned int R>
__global__ void __launch_bounds__(128, min_blocks<T, R>()) fast_layer_norm_kernel(
    const int N, T_ACC eps, const T* __restrict__ X, const T* gamma, const T* beta, T_ACC* mean,
    T_ACC* rstd, T* Y, const int64_t M) {
  static_assert(R > 0, "rows beyond the registers go to fast_layer_norm_stream_kernel");
  using vec_t = aligned_vector<T, vec_size>;
  using words = words_t<T>;
  __shared__ float s_data[6];  // torch's 1.5 * blockDim.y floats
  const int64_t row = blockIdx.x;
  const int thrx = threadIdx.x + threadIdx.y * 32;
  const int n_vec = N / vec_size;
  const words* X_words = reinterpret_cast<const words*>(X + row * N);
  const vec_t* gamma_vec = reinterpret_cast<const vec_t*>(gamma);
  const vec_t* beta_vec = reinterpret_cast<const vec_t*>(beta);
  vec_t* Y_vec = reinterpret_cast<vec_t*>(Y + row * N);
  // thread t's slots are a prefix of its R, at least half of them: the plan picks R below twice a
  // thread's share, so the first half needs no bounds check
  const int n_mine = thrx < n_vec ? min((int)R, (n_vec - thrx + 127) / 128) : 0;
  words data[R];
#pragma unroll
  for (int r = 0; r < (int)R; r++) {
    if (r >= (int)R / 2 && r == n_mine) break;
    data[r] = X_words[thrx + r * 128];
  }
  WelfordDataLN wd(0.f, 0.f, 0.f);
#pragma unroll
  for (int r = 0; r < (int)R; r++) {
    if (r >= (int)R / 2 && r == n_mine) break;
    wd = update<T, rms_norm>(wd, data[r], r * vec_size);
  }
  const WelfordDataLN st = block_tree<rms_norm>(wd, N, s_data);
  const float rstd_val = c10::cuda::compat::rsqrt(st.sigma2 + eps);
  using W = Weights<T, has_gamma, has_beta>;
#pragma unroll
  for (int r = 0; r < (int)R; r++) {
    if (r >= (int)R / 2 && r == n_mine) break;
    keep_packed<T>(data[r]);
    W w;
    load_weights(w, gamma_vec, beta_vec, thrx + r * 128);
    store_row<T, rms_norm, has_gamma, has_beta>(data[r], w, thrx + r * 128, st.mean, rstd_val, Y_vec);
    // At most 4 vectors' weights in flight: loading all R at once would cost 4 R registers.
    if (r % 4 == 3) asm volatile("" ::: "memory");
  }
  if (thrx == 0) {
    if constexpr (!rms_norm) {
      mean[row] = st.mean;
    }
    rstd[row] = rstd_val;
  }
}
// --8<-- [end:fast_layer_norm_kernel]

// --8<-- [start:fast_layer_norm_stream_kernel]
// The stream kernel's steps on a chunk of a thread's vectors j0 .. j0 + n - 1 (vector j at
// X_words[128 j]); whole: all n are the thread's, so no bounds check is left. The empty asm after
// the loads keeps them ahead of the work on the chunk before (the compiler would sink them below it).
template <int n, typename words>
__device__ __forceinline__ void load_chunk(words (&v)[n], const words* X_words, const int j0, const int n_mine,
                                           const bool whole) {
#pragma unroll
  for (int u = 0; u < n; u++)
    if (whole || j0 + u < n_mine) v[u] = X_words[(j0 + u) * 128];
  asm volatile("" ::: "memory");
}

// A thread's Welford updates over the chunk, in its order, each vector then kept in the stash if it
// is among the thread's first S. The count before the chunk, 4 j0, is exact below 2^24.
template <typename T, bool rms_norm, int n, typename words>
__device__ __forceinline__ void welford_chunk(WelfordDataLN& wd, const words (&v)[n], words* stash, const int S,
                                              const int thrx, const int j0, const int n_mine, const bool whole) {
  const float c0 = float(j0 * vec_size);
#pragma unroll
  for (int u = 0; u < n; u++) {
    if (whole || j0 + u < n_mine) {
#pragma unroll
      for (int ii = 0; ii < vec_size; ii++) {
        const float c = __fadd_rn(c0, float(u * vec_size + ii + 1));
        wd = online_sum<rms_norm>(element<T>(v[u], ii), wd, rms_norm ? 0.f : count_reciprocal(c), c);
      }
      if (j0 + u < S) stash[(j0 + u) * 128 + thrx] = v[u];
    }
  }
}

// Rows the plan streams (past 32 vectors a thread, and rows of 17 to 32 where reimpl/fast/forward.py's
// `streams` says so): one (32, 4) block per row, torch's map.
// Thread t reads its vectors t + 128 j in chunks of U, two chunks in flight: the next chunk's loads
// are issued before the current chunk's updates, so a thread's Welford chain runs while its next
// loads travel. It keeps the first S vectors in shared memory, where the launch's dynamic shared
// memory is S * 128 vectors; the normalisation reads those from there and the rest again from
// global memory (from the L2 where it still holds them), in chunks of U / 2 with their weights,
// again two in flight. The plan sizes the shared memory to hold as much of the row as it can with
// the blocks per SM it wants, so the size also caps the rows in flight. Counts are known only at run
// time here: 1.f / count is count_reciprocal, the IEEE value (checked for every count up to 2^24).
template <typename T, typename T_ACC, bool rms_norm, bool has_gamma, bool has_beta, unsigned int U>
__global__ void __launch_bounds__(128) fast_layer_norm_stream_kernel(
    const int N, T_ACC eps, const T* __restrict__ X, const T* __restrict__ gamma, const T* __restrict__ beta,
    T_ACC* mean, T_ACC* rstd, T* Y, const int64_t M) {
  static_assert(U % 2 == 0, "the normalisation reads chunks of U / 2");
  using vec_t = aligned_vector<T, vec_size>;
  using words = words_t<T>;
  using W = Weights<T, has_gamma, has_beta>;
  constexpr int U2 = U / 2;
  __shared__ float s_data[6];  // torch's 1.5 * blockDim.y floats
  extern __shared__ __align__(16) unsigned char dynamic_shared[];
  words* stash = reinterpret_cast<words*>(dynamic_shared);  // [S][128]: thread t's vector j at 128 j + t
  unsigned int stash_bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(stash_bytes));
  const int S = stash_bytes / (128 * sizeof(words));
  const int64_t row = blockIdx.x;
  const int thrx = threadIdx.x + threadIdx.y * 32;
  const int n_vec = N / vec_size;
  const int n_mine = thrx < n_vec ? (n_vec - thrx + 127) / 128 : 0;
  const words* X_words = reinterpret_cast<const words*>(X + row * N) + thrx;

  // chunks of U the thread holds whole, each one's loads issued before the work on the one before;
  // then what is left, U / 2 at a time
  const int n_whole = n_mine / U * U;
  WelfordDataLN wd(0.f, 0.f, 0.f);
  {
    words cur[U], next[U];
    if (n_whole > 0) load_chunk(cur, X_words, 0, n_mine, true);
    for (int j0 = 0; j0 < n_whole; j0 += U) {
      if (j0 + U < n_whole) load_chunk(next, X_words, j0 + U, n_mine, true);
      welford_chunk<T, rms_norm>(wd, cur, stash, S, thrx, j0, n_mine, true);
#pragma unroll
      for (int u = 0; u < (int)U; u++) cur[u] = next[u];
    }
    // the last, partial chunk in two halves: fewer live bounds checks at once
    for (int j0 = n_whole; j0 < n_mine; j0 += U2) {
      words part[U2];
      load_chunk(part, X_words, j0, n_mine, false);
      welford_chunk<T, rms_norm>(wd, part, stash, S, thrx, j0, n_mine, false);
    }
  }
  const WelfordDataLN st = block_tree<rms_norm>(wd, N, s_data);
  const float rstd_val = c10::cuda::compat::rsqrt(st.sigma2 + eps);
  const vec_t* gamma_vec = reinterpret_cast<const vec_t*>(gamma);
  const vec_t* beta_vec = reinterpret_cast<const vec_t*>(beta);
  vec_t* Y_vec = reinterpret_cast<vec_t*>(Y + row * N);
  const int n_whole2 = n_mine / U2 * U2;
  const auto fetch = [&](words (&v)[U2], W (&w)[U2], const int j0, const bool whole) {
#pragma unroll
    for (int u = 0; u < U2; u++) {
      if (whole || j0 + u < n_mine) {
        v[u] = j0 + u < S ? stash[(j0 + u) * 128 + thrx] : X_words[(j0 + u) * 128];
        load_weights(w[u], gamma_vec, beta_vec, thrx + (j0 + u) * 128);
      }
    }
    asm volatile("" ::: "memory");
  };
  const auto store = [&](const words (&v)[U2], const W (&w)[U2], const int j0, const bool whole) {
#pragma unroll
    for (int u = 0; u < U2; u++)
      if (whole || j0 + u < n_mine)
        store_row<T, rms_norm, has_gamma, has_beta>(v[u], w[u], thrx + (j0 + u) * 128, st.mean, rstd_val, Y_vec);
  };
  {
    words v[U2], v_next[U2];
    W w[U2], w_next[U2];
    if (n_whole2 > 0) fetch(v, w, 0, true);
    for (int j0 = 0; j0 < n_whole2; j0 += U2) {
      if (j0 + U2 < n_whole2) fetch(v_next, w_next, j0 + U2, true);
      store(v, w, j0, true);
#pragma unroll
      for (int u = 0; u < U2; u++) {
        v[u] = v_next[u];
        if (has_gamma) w[u].g = w_next[u].g;
        if (has_beta) w[u].b = w_next[u].b;
      }
    }
    if (n_whole2 < n_mine) {
      fetch(v, w, n_whole2, false);
      store(v, w, n_whole2, false);
    }
  }
  if (thrx == 0) {
    if constexpr (!rms_norm) {
      mean[row] = st.mean;
    }
    rstd[row] = rstd_val;
  }
}
// --8<-- [end:fast_layer_norm_stream_kernel]

// One round of torch's shuffle-down tree in which only half the lanes' results are ever used,
// played on two sets of states (a, b) packed into the warp: the lane with bit `width` clear keeps
// its `a` and merges the partner's `a` from lane + width after it (torch's combine(own, from_below));
// the lane with the bit set keeps its `b` and merges it after the partner's `b` from lane - width.
// Afterwards every lane holds one merged state: a's for lanes with the bit clear, b's otherwise.
__device__ __forceinline__ WelfordDataLN pick(const bool first, const WelfordDataLN a, const WelfordDataLN b) {
  return {first ? a.mean : b.mean, first ? a.sigma2 : b.sigma2, first ? a.count : b.count};
}

// known_counts: every state of a round has the same count, a constant, so the partner's count is
// our own and is not shuffled.
template <bool rms_norm, bool known_counts>
__device__ __forceinline__ WelfordDataLN fold(const WelfordDataLN a, const WelfordDataLN b, const int width) {
  const bool upper = threadIdx.x & width;
  const WelfordDataLN send = pick(upper, a, b);
  const WelfordDataLN keep = pick(upper, b, a);
  WelfordDataLN got;
  got.sigma2 = WARP_SHFL_XOR(send.sigma2, width);
  if constexpr (!rms_norm) {
    got.mean = WARP_SHFL_XOR(send.mean, width);
    got.count = known_counts ? send.count : WARP_SHFL_XOR(send.count, width);
  }
  // torch's operand order: the state of the lower lane first
  return combine<rms_norm, known_counts>(pick(upper, got, keep), pick(upper, keep, got));
}

template <bool rms_norm, bool known_counts>
__device__ __forceinline__ WelfordDataLN merge_down(const WelfordDataLN wd, const int offset) {
  WelfordDataLN got;
  got.sigma2 = WARP_SHFL_DOWN(wd.sigma2, offset);
  if constexpr (!rms_norm) {
    got.mean = WARP_SHFL_DOWN(wd.mean, offset);
    got.count = known_counts ? wd.count : WARP_SHFL_DOWN(wd.count, offset);
  }
  return combine<rms_norm, known_counts>(wd, got);
}

// --8<-- [start:warp_tree]
// Torch's tree over a row's 128 states, where lane l holds x[w] = the state of torch's thread
// l + 32 w. Torch merges, in warp w, lane l with lane l + 16, then l with l + 8, ... (only lane 0's
// result is kept), then warp 0 with 2, 1 with 3, and 0 with 1 in shared memory. Here:
//   offset 16: fold(x0, x1) and fold(x2, x3) leave torch's (l, w) for l < 16 at lane l + 16 (w & 1),
//              in set w >> 1;
//   offset 8:  fold of the two sets leaves (l, w) for l < 8 at lane l + 8 (w >> 1) + 16 (w & 1);
//   offsets 4, 2, 1: plain shuffle-down merges inside each group of 8 lanes;
// so warp w's lane-0 result sits at lane 8 (w >> 1) + 16 (w & 1): 0, 16, 8, 24. Two more merges
// by shuffle (lane 0 takes lane 8, lane 16 takes lane 24, then lane 0 takes lane 16) are torch's
// shared-memory rounds. Lane 0 returns torch's final state.
// Two rows (ROWS = 2): after offset 8 each row fills the warp with 32 states of which offset 4
// uses half, so offset 4 folds the two rows instead (row 0 at lanes with bit 2 clear, row 1 at
// lanes with it set, 4 lanes higher); the merges that follow serve both rows at once: 11 merges
// for two rows instead of 16. Lane 4 k returns row k's final state.
template <bool rms_norm, unsigned int ROWS, bool known_counts>
__device__ __forceinline__ WelfordDataLN warp_tree(const WelfordDataLN (&x)[ROWS][4]) {
  static_assert(ROWS == 1 || ROWS == 2, "one or two rows per warp");
  WelfordDataLN t[ROWS];
#pragma unroll
  for (int k = 0; k < (int)ROWS; k++) {
    const WelfordDataLN s0 = fold<rms_norm, known_counts>(x[k][0], x[k][1], 16);
    const WelfordDataLN s1 = fold<rms_norm, known_counts>(x[k][2], x[k][3], 16);
    t[k] = fold<rms_norm, known_counts>(s0, s1, 8);
  }
  WelfordDataLN wd = ROWS == 1 ? merge_down<rms_norm, known_counts>(t[0], 4)
                               : fold<rms_norm, known_counts>(t[0], t[ROWS - 1], 4);
  wd = merge_down<rms_norm, known_counts>(wd, 2);
  wd = merge_down<rms_norm, known_counts>(wd, 1);
  wd = merge_down<rms_norm, known_counts>(wd, 8);   // lane 0: warp 0 with warp 2; lane 16: warp 1 with warp 3
  return merge_down<rms_norm, known_counts>(wd, 16);  // lane 0: (0, 2) with (1, 3)
}
// --8<-- [end:warp_tree]

// --8<-- [start:fast_layer_norm_warp_kernel]
// Block (32, WARPS): each warp takes ROWS consecutive rows; for each, lane l plays torch's threads
// l + 32 w (w = 0..3) and keeps each one's at most RW vectors (l + 32 w + 128 r) in registers.
// ROWS = 2 or 4 (16-bit rows, RW <= 2): the rows' weights are the same vectors, so each lane loads
// them once, before the statistics (their latency hides behind the rows'), and converts each weight
// once per pair; rows go in pairs whose two trees share their last five merges (warp_tree). With
// four rows, all four are loaded first and the pairs are finished one after the other, so the
// first pair's arithmetic and stores overlap the second pair's loads (what helps a grid of about
// one wave, kernel.py's rows_per_warp). Loads, conversions and merge order are each row's own as
// before, so no bit changes. A warp whose rows run past M recomputes row M - 1 and stores nothing
// for the copies.
// full (N == 512 RW: every virtual thread holds RW vectors): each state's count is a constant, so the
// tree's counts, reciprocals and weights fold when compiling and no bounds check is left; the
// roundings applied to the data are the same (combine's known_counts).
template <typename T, typename T_ACC, bool rms_norm, bool has_gamma, bool has_beta, unsigned int RW,
          unsigned int WARPS, unsigned int ROWS, bool full>
// registers for 32 resident rows per SM (16 warps of 2 rows, 8 of 4); one row a warp asks nothing
__global__ void __launch_bounds__(32 * WARPS, ROWS > 1 ? 32 / (WARPS * ROWS) : 1) fast_layer_norm_warp_kernel(
    const int N, T_ACC eps, const T* __restrict__ X, const T* gamma, const T* beta, T_ACC* mean,
    T_ACC* rstd, T* Y, const int64_t M) {
  static_assert(ROWS == 1 || ROWS == 2 || ROWS == 4, "one, two or four rows per warp");
  constexpr int PAIR = ROWS > 1 ? 2 : 1;  // rows whose trees are folded together
  using vec_t = aligned_vector<T, vec_size>;
  using words = words_t<T>;
  const int64_t row0 = (blockIdx.x * (int64_t)WARPS + threadIdx.y) * ROWS;
  if (row0 >= M) return;  // whole warps leave; nothing below waits on another warp
  const int lane = threadIdx.x;
  const int n_vec = full ? 128 * RW : N / vec_size;
  // whether torch's thread lane + 32 w holds vector i = lane + 32 w + 128 r
  const auto present = [&](const int r, const int i) { return full || r < (int)RW / 2 || i < n_vec; };
  words data[ROWS][4][RW];
#pragma unroll
  for (int k = 0; k < (int)ROWS; k++) {
    const words* X_words = reinterpret_cast<const words*>(X + min(row0 + k, M - 1) * N);
#pragma unroll
    for (int r = 0; r < (int)RW; r++) {
#pragma unroll
      for (int w = 0; w < 4; w++) {
        const int i = lane + 32 * w + 128 * r;
        if (present(r, i)) data[k][w][r] = X_words[i];
      }
    }
  }
  // fp32 rows too: loaded as each vector is stored, one row a warp waits on a weight load per store
  // (results/fast_grid_bench.json, fp32 4096 x 2048)
  constexpr bool early_weights = ROWS > 1 || (sizeof(T) == 4 && RW == 4);
  words gw[early_weights ? 4 : 1][early_weights ? RW : 1], bw[early_weights ? 4 : 1][early_weights ? RW : 1];
  if constexpr (early_weights) {
#pragma unroll
    for (int r = 0; r < (int)RW; r++) {
#pragma unroll
      for (int w = 0; w < 4; w++) {
        const int i = lane + 32 * w + 128 * r;
        if (present(r, i)) {
          if (has_gamma) gw[w][r] = reinterpret_cast<const words*>(gamma)[i];
          if (has_beta) bw[w][r] = reinterpret_cast<const words*>(beta)[i];
        }
      }
    }
  }
#pragma unroll
  for (int p = 0; p < (int)ROWS; p += PAIR) {
    WelfordDataLN wd[PAIR][4];
#pragma unroll
    for (int j = 0; j < PAIR; j++) {
#pragma unroll
      for (int r = 0; r < (int)RW; r++) {
#pragma unroll
        for (int ii = 0; ii < vec_size; ii++) {
          const int c = r * vec_size + ii + 1;  // the same count for all four threads: change 1
#pragma unroll
          for (int w = 0; w < 4; w++) {
            if (present(r, lane + 32 * w + 128 * r))
              wd[j][w] = online_sum<rms_norm>(element<T>(data[p + j][w][r], ii), wd[j][w], 1.f / float(c),
                                              float(c));
          }
        }
      }
    }
    const WelfordDataLN st = warp_tree<rms_norm, PAIR, full>(wd);
    const float var = st.sigma2 / float(full ? 4 * n_vec : N);  // full: a power of two, so an exact FMUL
    // lane 4 j's values are torch's for row p + j; every lane takes them, as torch's threads take
    // them from shared memory
    float row_mean[PAIR], rstd_val[PAIR];
#pragma unroll
    for (int j = 0; j < PAIR; j++) {
      row_mean[j] = WARP_SHFL(st.mean, 4 * j);
      rstd_val[j] = c10::cuda::compat::rsqrt(WARP_SHFL(var, 4 * j) + eps);
    }
#pragma unroll
    for (int r = 0; r < (int)RW; r++) {
#pragma unroll
      for (int w = 0; w < 4; w++) {
        const int i = lane + 32 * w + 128 * r;
#pragma unroll
        for (int j = 0; j < PAIR; j++) keep_packed<T>(data[p + j][w][r]);
        if (present(r, i)) {
          words gv, bv;
          if constexpr (early_weights) {
            if (has_gamma) gv = gw[w][r];
            if (has_beta) bv = bw[w][r];
          } else {
            if (has_gamma) gv = reinterpret_cast<const words*>(gamma)[i];
            if (has_beta) bv = reinterpret_cast<const words*>(beta)[i];
          }
          vec_t out[PAIR];
#pragma unroll
          for (int ii = 0; ii < vec_size; ii++) {
            const float g = has_gamma ? element<T>(gv, ii) : 0.f;
            const float b = has_beta ? element<T>(bv, ii) : 0.f;
#pragma unroll
            for (int j = 0; j < PAIR; j++)
              out[j].val[ii] = normalize<rms_norm, has_gamma, has_beta>(element<T>(data[p + j][w][r], ii),
                                                                        row_mean[j], rstd_val[j], g, b);
          }
#pragma unroll
          for (int j = 0; j < PAIR; j++)
            if (row0 + p + j < M) reinterpret_cast<vec_t*>(Y + (row0 + p + j) * N)[i] = out[j];
        }
      }
    }
    if (lane == 0) {
#pragma unroll
      for (int j = 0; j < PAIR; j++) {
        const int64_t row = row0 + p + j;
        if (row < M) {
          if constexpr (!rms_norm) {
            mean[row] = row_mean[j];
          }
          rstd[row] = rstd_val[j];
        }
      }
    }
  }
}
// --8<-- [end:fast_layer_norm_warp_kernel]

// --8<-- [start:fast_layer_norm_group_kernel]
// torch's cuWelfordCombine(own, partner) where the partner is one of torch's threads (or warps) that
// holds nothing, so (0, 0, 0), and own's count c has c * (1.f / c) == 1 exactly (for the counts met
// below, 4 and N <= 128, checked by tests/test_fast_cpu.py). Then nA == 0 and nB == 1, so torch's
// mean, fma(0, 0, 1 * mean), is own mean + 0 (which turns a -0 into +0: a negative mean too small
// to represent rounds to -0), and its sigma2, fma(1, (mean * mean) * 0, 0 + sigma2), is own sigma2 + 0, or
// NaN where mean * mean overflows: that term is kept. An empty own state stays (0, 0, 0), as
// torch's `count > 0` branch leaves it. RMSNorm's merge is 0 + sigma2.
template <bool rms_norm>
__device__ __forceinline__ WelfordDataLN merge_empty(const WelfordDataLN own) {
  if constexpr (rms_norm) {
    return {own.mean, __fadd_rn(own.sigma2, 0.f), own.count};
  } else {
    return {__fadd_rn(own.mean, 0.f), __fadd_rn(own.sigma2, __fmul_rn(__fmul_rn(own.mean, own.mean), 0.f)),
            own.count};
  }
}

// Rows of at most 32 vectors (N <= 128): only torch's first warp holds anything, each of its
// threads at most one vector, and its other three warps merge nothing into the result. A group of
// G lanes (G = N / 4 rounded up to a power of two) plays that warp's threads 0 .. G-1, so one warp
// takes 32 / G rows at a time, and K such sets of rows one after another: all K loads are issued
// first (a row of 64 bf16 elements is 128 bytes, too little in flight per warp to keep the DRAM
// busy otherwise), then the K trees run, independent of each other. Torch's rounds at offsets
// 16 .. G pair each of those threads with one that holds nothing, and so do its two shared-memory
// rounds: merge_empty gives their values without a partner to fetch. The rounds at offsets below G
// are torch's shuffle-downs, operands in torch's order. A lane near the end of its group reads the
// next row's lane there, where torch's read a thread with nothing; only merges whose results torch
// discards depend on it.
// full (G == N / 4: every lane of a group holds a vector): every count is a constant, so the merges
// fold their counts and reciprocals as the warp kernel's `full` instance does (combine's known_counts).
template <typename T, typename T_ACC, bool rms_norm, bool has_gamma, bool has_beta, unsigned int G,
          unsigned int WARPS, bool full, unsigned int K>
__global__ void __launch_bounds__(32 * WARPS) fast_layer_norm_group_kernel(
    const int N, T_ACC eps, const T* __restrict__ X, const T* __restrict__ gamma, const T* __restrict__ beta, T_ACC* mean,
    T_ACC* rstd, T* Y, const int64_t M) {
  static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "a group is a power of two of lanes");
  using vec_t = aligned_vector<T, vec_size>;
  constexpr int ROWS = 32 / G;
  const int64_t first = (blockIdx.x * (int64_t)WARPS + threadIdx.y) * ROWS * K;
  if (first >= M) return;  // whole warps leave; nothing below waits on another warp
  const int lane = threadIdx.x;
  const int j = lane % G;  // torch's thread j of this lane's row
  const bool holds = full || j < N / vec_size;
  words_t<T> data[K];
#pragma unroll
  for (int k = 0; k < (int)K; k++) {
    const int64_t row = first + k * ROWS + lane / G;
    if (holds) data[k] = reinterpret_cast<const words_t<T>*>(X + min(row, M - 1) * N)[j];
  }
  // the same vector of the weights for all K rows of this lane: loaded once
  Weights<T, has_gamma, has_beta> w;
  if (holds) load_weights(w, reinterpret_cast<const vec_t*>(gamma), reinterpret_cast<const vec_t*>(beta), j);
#pragma unroll
  for (int k = 0; k < (int)K; k++) {
    const int64_t row = first + k * ROWS + lane / G;
    WelfordDataLN wd{0.f, 0.f, 0.f};
    if (holds) wd = update<T, rms_norm>(wd, data[k], 0);
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      wd = offset >= (int)G ? merge_empty<rms_norm>(wd) : merge_down<rms_norm, full>(wd, offset);
    }
    wd = merge_empty<rms_norm>(merge_empty<rms_norm>(wd));  // shared memory: warp 2, then warps 1 and 3
    const float var = wd.sigma2 / float(N);
    const int head = lane - j;  // the group's lane 0 holds torch's final state; every lane takes it
    const float row_mean = WARP_SHFL(wd.mean, head);
    const float rstd_val = c10::cuda::compat::rsqrt(WARP_SHFL(var, head) + eps);
    if (row < M) {
      if (holds) {
        store_row<T, rms_norm, has_gamma, has_beta>(data[k], w, j, row_mean, rstd_val,
                                                    reinterpret_cast<vec_t*>(Y + row * N));
      }
      if (j == 0) {
        if constexpr (!rms_norm) {
          mean[row] = row_mean;
        }
        rstd[row] = rstd_val;
      }
    }
  }
}
// --8<-- [end:fast_layer_norm_group_kernel]

// --8<-- [start:lane_tree]
// Torch's tree for one row, evaluated by one lane: the value that torch's thread j of a warp holds
// after its shuffle-down round at `offset` is combine(its value before, the value of thread j + offset
// before), down from the leaves (offset 32: a thread's own Welford state over its vector). Lane 0's
// final value, the only one torch keeps, needs 31 merges; evaluated depth first, each merge takes the
// same two operands, in the same order, as torch's, with no shuffle and no lane idle. j counts torch's
// threads across the block (thread j holds vector j, or nothing from j = NV on), so every count is a
// constant and the merges fold their counts and reciprocals (combine's known_counts).
template <typename T, bool rms_norm, unsigned int NV, int j, int offset>
__device__ __forceinline__ WelfordDataLN lane_tree(const unsigned char* row, const int swizzle) {
  if constexpr (offset == 32) {
    if constexpr (j >= (int)NV) {
      return WelfordDataLN{0.f, 0.f, 0.f};
    } else {
      constexpr int bytes = vec_size * sizeof(T);  // one vector
      constexpr int chunk = j * bytes / 16;
      const int at = ((chunk & ~7) | ((chunk & 7) ^ swizzle)) * 16 + j * bytes % 16;
      return update<T, rms_norm>(WelfordDataLN{0.f, 0.f, 0.f}, *reinterpret_cast<const words_t<T>*>(row + at), 0);
    }
  } else {
    const WelfordDataLN own = lane_tree<T, rms_norm, NV, j, offset * 2>(row, swizzle);
    return combine<rms_norm, true>(own, lane_tree<T, rms_norm, NV, j + offset, offset * 2>(row, swizzle));
  }
}
// --8<-- [end:lane_tree]

// --8<-- [start:fast_layer_norm_lane_kernel]
// Rows of 8, 16, 32 or 64 chunks of 16 bytes (16-bit N = 64 .. 512, fp32 N = 32 .. 256), 32 rows a
// warp: the warp copies its 32 rows, one contiguous run of memory, into shared memory with cp.async
// (16-byte chunks, coalesced), then each lane computes one row's statistics on its own (lane_tree),
// then the warp normalises the rows chunk by chunk, coalesced again, each lane taking a chunk's
// mean and rstd from the lane that computed them. A shuffle tree spends 5 rounds of the whole warp
// on one row's 31 merges; here each of the row's merges runs once, on one lane. Chunk c of row r sits at chunk
// (c ^ (r & 7)) of its 128-byte line: the lanes reading one vector of 32 rows then spread over all 32
// banks, 4 ways each for 16-bit vectors (8 bytes), without that they would all hit the same ones.
// SETS: sets of 32 rows a warp takes, all copies issued first (one cp.async group a set), each set
// finished as soon as its group has landed, so that one set's statistics and stores overlap the
// next set's copy. Which lane computes a row, and when, rounds nothing.
// Each warp is on its own (no barrier); one that runs past M loads row M - 1 for the rows it lacks
// and stores nothing for them. X, gamma, beta and Y are 16-byte aligned (the plan checks).
template <typename T, typename T_ACC, bool rms_norm, bool has_gamma, bool has_beta, unsigned int NV,
          unsigned int WARPS, unsigned int SETS>
__global__ void __launch_bounds__(32 * WARPS) fast_layer_norm_lane_kernel(
    const int N, T_ACC eps, const T* __restrict__ X, const T* __restrict__ gamma, const T* __restrict__ beta,
    T_ACC* mean, T_ACC* rstd, T* Y, const int64_t M) {
  constexpr int ROW_BYTES = NV * vec_size * sizeof(T);
  constexpr int CHUNKS = ROW_BYTES / 16;  // per row
  constexpr int PER = 16 / sizeof(T);     // elements per chunk
  static_assert(CHUNKS == 8 || CHUNKS == 16 || CHUNKS == 32 || CHUNKS == 64, "whole 128-byte lines, a power of two");
  static_assert(NV <= 128, "at most one vector per torch thread");
  static_assert(SETS == 1 || SETS == 2, "one or two sets of 32 rows a warp");
  using chunk_t = aligned_vector<T, PER>;
  extern __shared__ __align__(16) unsigned char dynamic_shared[];
  const int lane = threadIdx.x;
  const int64_t first = (blockIdx.x * (int64_t)WARPS + threadIdx.y) * 32 * SETS;
  if (first >= M) return;  // whole warps leave; nothing below waits on another warp
  uint4* tiles = reinterpret_cast<uint4*>(dynamic_shared) + threadIdx.y * SETS * 32 * CHUNKS;
  const auto slot = [](const int r, const int c) { return r * CHUNKS + (c ^ (r & 7)); };
  // chunk q = lane + 32 k of the warp's rows: row q / CHUNKS, chunk q % CHUNKS (spelled so that
  // the compiler sees the row, or the chunk, as a constant of k)
  const auto row_of = [&](const int k) { return CHUNKS >= 32 ? k / (CHUNKS / 32) : k * (32 / CHUNKS) + lane / CHUNKS; };
  const auto chunk_of = [&](const int k) { return CHUNKS >= 32 ? lane + 32 * (k % (CHUNKS / 32)) : lane % CHUNKS; };
#pragma unroll
  for (int s = 0; s < (int)SETS; s++) {
#pragma unroll
    for (int k = 0; k < CHUNKS; k++) {
      const int r = row_of(k), c = chunk_of(k);
      const uint4* src = reinterpret_cast<const uint4*>(X + min(first + 32 * s + r, M - 1) * N) + c;
      copy_to_shared(tiles + s * 32 * CHUNKS + slot(r, c), src);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  // the weights' chunks this lane normalises: one (CHUNKS <= 32), or CHUNKS / 32
  constexpr int WC = CHUNKS > 32 ? CHUNKS / 32 : 1;
  uint4 gw[WC], bw[WC];
#pragma unroll
  for (int k = 0; k < WC; k++) {
    if (has_gamma) gw[k] = reinterpret_cast<const uint4*>(gamma)[chunk_of(k)];
    if (has_beta) bw[k] = reinterpret_cast<const uint4*>(beta)[chunk_of(k)];
  }
#pragma unroll 1  // one set's statistics at a time: unrolled, two sets' would share the registers
  for (int s = 0; s < (int)SETS; s++) {
    const int64_t base = first + 32 * s;
    if (base >= M) break;  // the whole warp: its last set lies past M
    // set s has landed once at most SETS - 1 - s groups are still in flight
    if (s + 1 < (int)SETS) {
      asm volatile("cp.async.wait_group 1;" ::: "memory");
    } else {
      asm volatile("cp.async.wait_group 0;" ::: "memory");
    }
    __syncwarp();
    const uint4* tile = tiles + s * 32 * CHUNKS;

    // this lane's row: torch's four warp trees, then its two shared-memory rounds (warp 0 with 2,
    // 1 with 3, then 0 with 1), then sigma2 / N
    const unsigned char* row = reinterpret_cast<const unsigned char*>(tile + lane * CHUNKS);
    const int swizzle = lane & 7;
    const WelfordDataLN w0 = lane_tree<T, rms_norm, NV, 0, 1>(row, swizzle);
    const WelfordDataLN w1 = lane_tree<T, rms_norm, NV, 32, 1>(row, swizzle);
    const WelfordDataLN w2 = lane_tree<T, rms_norm, NV, 64, 1>(row, swizzle);
    const WelfordDataLN w3 = lane_tree<T, rms_norm, NV, 96, 1>(row, swizzle);
    const WelfordDataLN st = combine<rms_norm, true>(combine<rms_norm, true>(w0, w2), combine<rms_norm, true>(w1, w3));
    const float row_mean = st.mean;
    // torch divides, stores the quotient and adds eps apart: __fadd_rn keeps the compiler from
    // fusing a multiply by 1 / N (exact for these N) with the add, which rounds once where torch
    // rounds twice when the quotient is subnormal
    const float rstd_val = c10::cuda::compat::rsqrt(__fadd_rn(st.sigma2 / float(NV * vec_size), eps));
    if (base + lane < M) {
      if constexpr (!rms_norm) {
        mean[base + lane] = row_mean;
      }
      rstd[base + lane] = rstd_val;
    }
#pragma unroll
    for (int k = 0; k < CHUNKS; k++) {
      const int r = row_of(k), c = chunk_of(k);
      const float m = WARP_SHFL(row_mean, r);
      const float sd = WARP_SHFL(rstd_val, r);
      const uint4 v = tile[slot(r, c)];
      const unsigned int* xw = reinterpret_cast<const unsigned int*>(&v);
      const unsigned int* gwk = reinterpret_cast<const unsigned int*>(&gw[k % WC]);
      const unsigned int* bwk = reinterpret_cast<const unsigned int*>(&bw[k % WC]);
      chunk_t out;
#pragma unroll
      for (int e = 0; e < PER; e++) {
        const int word = sizeof(T) == 4 ? e : e / 2, half = sizeof(T) == 4 ? 0 : e % 2;
        out.val[e] = normalize<rms_norm, has_gamma, has_beta>(
            word_element<T>(xw[word], half), m, sd, has_gamma ? word_element<T>(gwk[word], half) : 0.f,
            has_beta ? word_element<T>(bwk[word], half) : 0.f);
      }
      if (base + r < M) reinterpret_cast<chunk_t*>(Y + (base + r) * N)[c] = out;
    }
  }
}
// --8<-- [end:fast_layer_norm_lane_kernel]

}  // namespace reimpl_fast
