// Torch's bits, faster: a forward LayerNorm/RMSNorm kernel for exactly the inputs torch sends to
// vectorized_layer_norm_kernel (N % 4 == 0, aligned pointers, float/half/bfloat16, N <= 2^24),
// giving torch 2.11's out, mean and rstd bit for bit. Ours; it reuses the mirror's own
// cuWelfordCombine, aligned_vector and WelfordDataLN by including the mirror (reimpl/cuda/).
//
// What fixes torch's bits is the list of floating-point operations each of torch's 128 "virtual"
// threads of a row applies, in order: its Welford updates over its elements, the shuffle-down tree,
// the shared-memory tree over the 4 warps, sigma2 / N, rsqrtf, and the normalisation expression.
// This kernel keeps that list exactly and changes only what is not in it:
//   1. 1.f / new_count is not divided at run time. Where the count is known when compiling (the
//      unrolled loops over a thread's registers), `1.f / c` is a constant the compiler folds with
//      IEEE round-to-nearest, the value the division gives; where it is not (long rows that
//      stream), it is read from a table of the same correctly rounded values.
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
// Every rounding that torch's compiler fused into an FFMA is written here as __fmaf_rn, and every
// separate rounding as __fadd_rn / __fsub_rn / __fmul_rn, so contraction choices cannot drift.
#include "layer_norm_kernel.cu"

namespace reimpl_fast {

using at::native::WelfordDataLN;
using at::native::aligned_vector;
using at::native::vec_size;

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

// A row's 4-wide vector kept as 32-bit words (two per vector for 16-bit types). Held as the
// type's own struct, the compiler splits each 16-bit element into a register of its own (4 instead
// of 2 per vector); as words it keeps them packed. Each element still converts through T's own
// conversion to float, from the same 16 bits.
template <typename T>
using words_t = aligned_vector<unsigned int, sizeof(T) == 4 ? 4 : 2>;

template <typename T>
__device__ __forceinline__ float element(const words_t<T>& v, const int ii) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(v.val[ii]);
  } else {
    const unsigned int w = v.val[ii / 2];
    const unsigned short bits = (ii % 2) ? (unsigned short)(w >> 16) : (unsigned short)(w & 0xffffu);
    return static_cast<float>(T(bits, typename T::from_bits_t()));
  }
}

// A virtual thread's updates over the at most R vectors it keeps in registers, torch's order.
// The k-th update's count is k, known here at compile time: 1.f / float(k) folds to a constant.
template <typename T, bool rms_norm, unsigned int R>
__device__ __forceinline__ WelfordDataLN thread_stats(const words_t<T> (&data)[R], const int n_mine) {
  WelfordDataLN wd(0.f, 0.f, 0.f);
#pragma unroll
  for (int r = 0; r < (int)R; r++) {
    if (r >= (int)R / 2 && r == n_mine) break;  // a prefix of its R slots, at least half of them
#pragma unroll
    for (int ii = 0; ii < vec_size; ii++) {
      const int k = r * vec_size + ii + 1;
      wd = online_sum<rms_norm>(element<T>(data[r], ii), wd, 1.f / float(k), float(k));
    }
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
    wd = at::native::cuWelfordCombine<rms_norm>(wd, wdB);
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
      wd = at::native::cuWelfordCombine<rms_norm>(wd, wdB);
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

template <typename T, bool rms_norm, bool has_gamma, bool has_beta, typename vec_t>
__device__ __forceinline__ void store_row(const words_t<T>& data, const int i, const float mean, const float rstd,
                                          const vec_t* gamma_vec, const vec_t* beta_vec, vec_t* Y_vec) {
  vec_t out;
  vec_t g, b;
  if (has_gamma) g = gamma_vec[i];
  if (has_beta) b = beta_vec[i];
#pragma unroll
  for (int ii = 0; ii < vec_size; ii++) {
    out.val[ii] = normalize<rms_norm, has_gamma, has_beta>(
        element<T>(data, ii), mean, rstd, has_gamma ? static_cast<float>(g.val[ii]) : 0.f,
        has_beta ? static_cast<float>(b.val[ii]) : 0.f);
  }
  Y_vec[i] = out;
}

// The compiler would rather keep a 16-bit row converted to float between the statistics and the
// normalisation (twice the registers) than convert it twice. An empty asm that claims to change
// the packed words hides that the second conversion repeats the first, so only words stay live.
// It emits no instruction and changes no value.
template <typename T>
__device__ __forceinline__ void keep_packed(words_t<T>& v) {
  if constexpr (sizeof(T) < 4) {
#pragma unroll
    for (int i = 0; i < 2; i++) asm volatile("" : "+r"(v.val[i]));
  }
}

// Blocks per SM the compiler must fit in registers: the row's share (R * sizeof(T) words) plus
// 32 for everything else, which the kernels need without spilling (bf16 R = 32: 92 registers,
// 5 blocks; fp32 R = 32: 3 blocks). R == 0 (streaming) asks for nothing.
template <typename T, unsigned int R>
__host__ __device__ constexpr int min_blocks() {
  const int regs = int(R * sizeof(T)) + 32;
  const int b = 65536 / (128 * ((regs + 7) / 8 * 8));
  return R == 0 ? 1 : (b < 1 ? 1 : (b > 16 ? 16 : b));
}

// --8<-- [start:fast_layer_norm_kernel]
// One (32, 4) block per row, exactly torch's shape and thread-to-vector map. R > 0: thread t keeps
// vectors t + 128 r (r < R) in registers between the statistics and the normalisation. R == 0
// (rows beyond 128 * 32 vectors): it streams the row twice, as torch does; counts are then only
// known at run time, so the reciprocals come from the table `rcp` (rcp[c] = 1.f / c, IEEE).
template <typename T, typename T_ACC, bool rms_norm, bool has_gamma, bool has_beta, unsigned int R>
__global__ void __launch_bounds__(128, min_blocks<T, R>()) fast_layer_norm_kernel(
    const int N, T_ACC eps, const T* __restrict__ X, const T* gamma, const T* beta, T_ACC* mean,
    T_ACC* rstd, T* Y, const float* __restrict__ rcp, const int64_t M) {
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
  if constexpr (R > 0) {
    const int n_mine = thrx < n_vec ? min((int)R, (n_vec - thrx + 127) / 128) : 0;
    words data[R];
#pragma unroll
    for (int r = 0; r < (int)R; r++) {
      if (r >= (int)R / 2 && r == n_mine) break;  // a prefix of its R slots, at least half of them
      data[r] = X_words[thrx + r * 128];
    }
    const WelfordDataLN st = block_tree<rms_norm>(thread_stats<T, rms_norm, R>(data, n_mine), N, s_data);
    const float rstd_val = c10::cuda::compat::rsqrt(st.sigma2 + eps);
#pragma unroll
    for (int r = 0; r < (int)R; r++) {
      if (r >= (int)R / 2 && r == n_mine) break;
      keep_packed<T>(data[r]);
      store_row<T, rms_norm, has_gamma, has_beta>(data[r], thrx + r * 128, st.mean, rstd_val, gamma_vec,
                                                    beta_vec, Y_vec);
      // At most 4 vectors' weights in flight: loading all R at once would cost 4 R registers.
      if (r % 4 == 3) asm volatile("" ::: "memory");
    }
    if (thrx == 0) {
      if constexpr (!rms_norm) {
        mean[row] = st.mean;
      }
      rstd[row] = rstd_val;
    }
  } else {
    WelfordDataLN wd(0.f, 0.f, 0.f);
    int c = 1;  // the count after the next update: torch's new_count, as an index into rcp
    for (int i = thrx; i < n_vec; i += 128) {
      const words v = X_words[i];
#pragma unroll
      for (int ii = 0; ii < vec_size; ii++, c++)
        wd = online_sum<rms_norm>(element<T>(v, ii), wd, rms_norm ? 0.f : __ldg(rcp + c), float(c));
    }
    const WelfordDataLN st = block_tree<rms_norm>(wd, N, s_data);
    const float rstd_val = c10::cuda::compat::rsqrt(st.sigma2 + eps);
    for (int i = thrx; i < n_vec; i += 128)
      store_row<T, rms_norm, has_gamma, has_beta>(X_words[i], i, st.mean, rstd_val, gamma_vec, beta_vec, Y_vec);
    if (thrx == 0) {
      if constexpr (!rms_norm) {
        mean[row] = st.mean;
      }
      rstd[row] = rstd_val;
    }
  }
}
// --8<-- [end:fast_layer_norm_kernel]

// One round of torch's shuffle-down tree in which only half the lanes' results are ever used,
// played on two sets of states (a, b) packed into the warp: the lane with bit `width` clear keeps
// its `a` and merges the partner's `a` from lane + width after it (torch's combine(own, from_below));
// the lane with the bit set keeps its `b` and merges it after the partner's `b` from lane - width.
// Afterwards every lane holds one merged state: a's for lanes with the bit clear, b's otherwise.
template <bool rms_norm>
__device__ __forceinline__ WelfordDataLN pick(const bool first, const WelfordDataLN a, const WelfordDataLN b) {
  return {first ? a.mean : b.mean, first ? a.sigma2 : b.sigma2, first ? a.count : b.count};
}

template <bool rms_norm>
__device__ __forceinline__ WelfordDataLN fold(const WelfordDataLN a, const WelfordDataLN b, const int width) {
  const bool upper = threadIdx.x & width;
  const WelfordDataLN send = pick<rms_norm>(upper, a, b);
  const WelfordDataLN keep = pick<rms_norm>(upper, b, a);
  WelfordDataLN got;
  got.sigma2 = WARP_SHFL_XOR(send.sigma2, width);
  if constexpr (!rms_norm) {
    got.mean = WARP_SHFL_XOR(send.mean, width);
    got.count = WARP_SHFL_XOR(send.count, width);
  }
  // torch's operand order: the state of the lower lane first
  return at::native::cuWelfordCombine<rms_norm>(pick<rms_norm>(upper, got, keep), pick<rms_norm>(upper, keep, got));
}

template <bool rms_norm>
__device__ __forceinline__ WelfordDataLN merge_down(const WelfordDataLN wd, const int offset) {
  WelfordDataLN got;
  got.sigma2 = WARP_SHFL_DOWN(wd.sigma2, offset);
  if constexpr (!rms_norm) {
    got.mean = WARP_SHFL_DOWN(wd.mean, offset);
    got.count = WARP_SHFL_DOWN(wd.count, offset);
  }
  return at::native::cuWelfordCombine<rms_norm>(wd, got);
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
template <bool rms_norm>
__device__ __forceinline__ WelfordDataLN warp_tree(const WelfordDataLN (&x)[4]) {
  const WelfordDataLN s0 = fold<rms_norm>(x[0], x[1], 16);
  const WelfordDataLN s1 = fold<rms_norm>(x[2], x[3], 16);
  WelfordDataLN wd = fold<rms_norm>(s0, s1, 8);
#pragma unroll
  for (int offset = 4; offset > 0; offset >>= 1) wd = merge_down<rms_norm>(wd, offset);
  wd = merge_down<rms_norm>(wd, 8);   // lane 0: warp 0 with warp 2; lane 16: warp 1 with warp 3
  return merge_down<rms_norm>(wd, 16);  // lane 0: (0, 2) with (1, 3)
}
// --8<-- [end:warp_tree]

// --8<-- [start:fast_layer_norm_warp_kernel]
// Block (32, WARPS): WARPS rows, one warp each; lane l plays torch's threads l + 32 w (w = 0..3) and
// keeps each one's at most RW vectors (l + 32 w + 128 r) in registers.
template <typename T, typename T_ACC, bool rms_norm, bool has_gamma, bool has_beta, unsigned int RW,
          unsigned int WARPS>
__global__ void __launch_bounds__(32 * WARPS) fast_layer_norm_warp_kernel(
    const int N, T_ACC eps, const T* __restrict__ X, const T* gamma, const T* beta, T_ACC* mean,
    T_ACC* rstd, T* Y, const float* __restrict__ rcp, const int64_t M) {
  using vec_t = aligned_vector<T, vec_size>;
  const int64_t row = blockIdx.x * (int64_t)WARPS + threadIdx.y;
  if (row >= M) return;  // whole warps leave; nothing below waits on another warp
  const int lane = threadIdx.x;
  const int n_vec = N / vec_size;
  const words_t<T>* X_words = reinterpret_cast<const words_t<T>*>(X + row * N);
  words_t<T> data[4][RW];
#pragma unroll
  for (int r = 0; r < (int)RW; r++) {
#pragma unroll
    for (int w = 0; w < 4; w++) {
      const int i = lane + 32 * w + 128 * r;
      if (r < (int)RW / 2 || i < n_vec) data[w][r] = X_words[i];
    }
  }
  WelfordDataLN wd[4];
#pragma unroll
  for (int r = 0; r < (int)RW; r++) {
#pragma unroll
    for (int ii = 0; ii < vec_size; ii++) {
      const int k = r * vec_size + ii + 1;  // the same count for all four threads: change 1
#pragma unroll
      for (int w = 0; w < 4; w++) {
        if (r < (int)RW / 2 || lane + 32 * w + 128 * r < n_vec)
          wd[w] = online_sum<rms_norm>(element<T>(data[w][r], ii), wd[w], 1.f / float(k), float(k));
      }
    }
  }
  const WelfordDataLN st = warp_tree<rms_norm>(wd);
  // lane 0's values are torch's; every lane takes them, as torch's threads take them from shared memory
  const float row_mean = WARP_SHFL(st.mean, 0);
  const float var = WARP_SHFL(st.sigma2 / float(N), 0);
  const float rstd_val = c10::cuda::compat::rsqrt(var + eps);
  const vec_t* gamma_vec = reinterpret_cast<const vec_t*>(gamma);
  const vec_t* beta_vec = reinterpret_cast<const vec_t*>(beta);
  vec_t* Y_vec = reinterpret_cast<vec_t*>(Y + row * N);
#pragma unroll
  for (int r = 0; r < (int)RW; r++) {
#pragma unroll
    for (int w = 0; w < 4; w++) {
      const int i = lane + 32 * w + 128 * r;
      keep_packed<T>(data[w][r]);
      if (r < (int)RW / 2 || i < n_vec)
        store_row<T, rms_norm, has_gamma, has_beta>(data[w][r], i, row_mean, rstd_val, gamma_vec, beta_vec, Y_vec);
    }
  }
  if (lane == 0) {
    if constexpr (!rms_norm) {
      mean[row] = row_mean;
    }
    rstd[row] = rstd_val;
  }
}
// --8<-- [end:fast_layer_norm_warp_kernel]

}  // namespace reimpl_fast
