// Torch's bits, faster: a forward LayerNorm/RMSNorm kernel for exactly the inputs torch sends to
// vectorized_layer_norm_kernel (N % 4 == 0, aligned pointers, float/half/bfloat16, N <= 2^24),
// giving torch 2.11's out, mean and rstd bit for bit. Ours; it reuses the mirror's own
// cuWelfordCombine, aligned_vector and WelfordDataLN by including the mirror (reimpl/cuda/).
//
// What fixes torch's bits is the list of floating-point operations each of torch's 128 "virtual"
// threads of a row applies, in order: its Welford updates over its elements, the shuffle-down tree,
// the shared-memory tree over the 4 warps, sigma2 / N, rsqrtf, and the normalisation expression.
// This kernel keeps that list exactly and changes only what is not in it:
//   1. 1.f / new_count is read from a table (rcp[c] = 1.f / c, computed with IEEE division once):
//      the same correctly rounded value, so the FFMA that uses it sees the same operand.
//   2. The row stays in registers between the statistics and the normalisation (R vectors per
//      thread), instead of being read a second time from L2: loads do not round anything.
//   3. A block holds ROWS rows, one (32, 4) group of warps per row (threadIdx.z): each row's
//      threads, warps, shuffle partners and shared-memory slots are those torch uses for it.
//   4. Short rows (fast_layer_norm_warp_kernel): one warp per row, each lane playing the same lane of
//      torch's four warps. Lane l keeps four Welford states, one per virtual warp, updated in the
//      same order as torch's threads l, l+32, l+64, l+96; the shuffle-down rounds run on each state
//      as torch's four warps run them; and torch's shared-memory tree over the warps (warp 0 with 2,
//      1 with 3, then 0 with 1) becomes three combines in lane 0's registers, same operands, same
//      order. No barrier and no shared memory remain, and the four chains give the lane independent
//      work to overlap.
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
template <bool rms_norm>
__device__ __forceinline__ WelfordDataLN online_sum(const float val, const WelfordDataLN& s, const float rcp) {
  if constexpr (!rms_norm) {
    const float delta = __fsub_rn(val, s.mean);
    const float new_count = __fadd_rn(s.count, 1.f);
    const float new_mean = __fmaf_rn(delta, rcp, s.mean);
    return {new_mean, __fmaf_rn(delta, __fsub_rn(val, new_mean), s.sigma2), new_count};
  } else {
    return {0.f, __fmaf_rn(val, val, s.sigma2), 0.f};
  }
}

// One row's statistics, exactly as torch's compute_stats for a (32, 4) group of warps, with this
// thread's vectors already in registers (`data`, `n_mine` of them). `buf` is this row's 6 floats.
template <bool rms_norm, unsigned int R, typename vec_t>
__device__ __forceinline__ WelfordDataLN row_stats(const vec_t* data, const int n_mine, const int N, float* buf,
                                                   const float* __restrict__ rcp, const vec_t* X_vec,
                                                   const int thrx) {
  WelfordDataLN wd(0.f, 0.f, 0.f);
  int c = 1;  // the count after the next update: torch's new_count, as an index into rcp
  if (R > 0) {
#pragma unroll
    for (int r = 0; r < (int)R; r++) {
      if (r < n_mine) {
#pragma unroll
        for (int ii = 0; ii < vec_size; ii++, c++)
          wd = online_sum<rms_norm>(static_cast<float>(data[r].val[ii]), wd, rms_norm ? 0.f : __ldg(rcp + c));
      }
    }
  } else {  // long rows: stream the row (torch's loop order) and read it again later
    const int n_vec = N / vec_size;
    for (int i = thrx; i < n_vec; i += 128) {
      const vec_t v = X_vec[i];
#pragma unroll
      for (int ii = 0; ii < vec_size; ii++, c++)
        wd = online_sum<rms_norm>(static_cast<float>(v.val[ii]), wd, rms_norm ? 0.f : __ldg(rcp + c));
    }
  }
  // torch's tree, unchanged: shuffle-down within the warp, then the halving tree over 4 warps
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
    __syncthreads();  // block-wide: every row of the block passes it together
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
__device__ __forceinline__ void store_row(const vec_t& data, const int i, const float mean, const float rstd,
                                          const vec_t* gamma_vec, const vec_t* beta_vec, vec_t* Y_vec) {
  vec_t out;
  vec_t g, b;
  if (has_gamma) g = gamma_vec[i];
  if (has_beta) b = beta_vec[i];
#pragma unroll
  for (int ii = 0; ii < vec_size; ii++) {
    out.val[ii] = normalize<rms_norm, has_gamma, has_beta>(
        static_cast<float>(data.val[ii]), mean, rstd, has_gamma ? static_cast<float>(g.val[ii]) : 0.f,
        has_beta ? static_cast<float>(b.val[ii]) : 0.f);
  }
  Y_vec[i] = out;
}

// --8<-- [start:fast_layer_norm_kernel]
// Block (32, 4, ROWS): ROWS rows, each handled by one (32, 4) group exactly as torch's block handles
// it. R > 0: each thread keeps its at most R vectors of the row in registers; R == 0: it streams.
template <typename T, typename T_ACC, bool rms_norm, bool has_gamma, bool has_beta, unsigned int R,
          unsigned int ROWS>
__global__ void __launch_bounds__(128 * ROWS) fast_layer_norm_kernel(
    const int N, T_ACC eps, const T* __restrict__ X, const T* gamma, const T* beta, T_ACC* mean,
    T_ACC* rstd, T* Y, const float* __restrict__ rcp, const int64_t M) {
  using vec_t = aligned_vector<T, vec_size>;
  __shared__ float s_data[ROWS][6];  // torch's 1.5 * blockDim.y floats, per row
  const int64_t row = blockIdx.x * (int64_t)ROWS + threadIdx.z;
  const bool live = row < M;  // a block's spare rows still join every __syncthreads
  const int thrx = threadIdx.x + threadIdx.y * 32;
  const int n_vec = N / vec_size;
  const vec_t* X_vec = reinterpret_cast<const vec_t*>(X + (live ? row : 0) * N);
  vec_t data[R > 0 ? R : 1];
  int n_mine = 0;
  if (R > 0 && live) {
#pragma unroll
    for (int r = 0; r < (int)R; r++) {
      const int i = thrx + r * 128;
      if (i < n_vec) {
        data[r] = X_vec[i];
        n_mine = r + 1;
      }
    }
  }
  const WelfordDataLN wd = row_stats<rms_norm, R>(data, n_mine, live ? N : 0, s_data[threadIdx.z], rcp, X_vec, thrx);
  if (!live) return;  // no barrier follows
  const float rstd_val = c10::cuda::compat::rsqrt(wd.sigma2 + eps);
  const vec_t* gamma_vec = reinterpret_cast<const vec_t*>(gamma);
  const vec_t* beta_vec = reinterpret_cast<const vec_t*>(beta);
  vec_t* Y_vec = reinterpret_cast<vec_t*>(Y + row * N);
  if (R > 0) {
#pragma unroll
    for (int r = 0; r < (int)R; r++) {
      if (r < n_mine)
        store_row<T, rms_norm, has_gamma, has_beta>(data[r], thrx + r * 128, wd.mean, rstd_val, gamma_vec,
                                                      beta_vec, Y_vec);
    }
  } else {
    for (int i = thrx; i < n_vec; i += 128)
      store_row<T, rms_norm, has_gamma, has_beta>(X_vec[i], i, wd.mean, rstd_val, gamma_vec, beta_vec, Y_vec);
  }
  if (thrx == 0) {
    if constexpr (!rms_norm) {
      mean[row] = wd.mean;
    }
    rstd[row] = rstd_val;
  }
}
// --8<-- [end:fast_layer_norm_kernel]

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
  const vec_t* X_vec = reinterpret_cast<const vec_t*>(X + row * N);
  vec_t data[4][RW];
#pragma unroll
  for (int r = 0; r < (int)RW; r++) {
#pragma unroll
    for (int w = 0; w < 4; w++) {
      const int i = lane + 32 * w + 128 * r;
      if (i < n_vec) data[w][r] = X_vec[i];
    }
  }
  WelfordDataLN wd[4];
  int c = 1;
#pragma unroll
  for (int r = 0; r < (int)RW; r++) {
#pragma unroll
    for (int ii = 0; ii < vec_size; ii++, c++) {
      const float inv = rms_norm ? 0.f : __ldg(rcp + c);  // the same count for all four threads
#pragma unroll
      for (int w = 0; w < 4; w++) {
        if (lane + 32 * w + 128 * r < n_vec)
          wd[w] = online_sum<rms_norm>(static_cast<float>(data[w][r].val[ii]), wd[w], inv);
      }
    }
  }
#pragma unroll
  for (int offset = (C10_WARP_SIZE >> 1); offset > 0; offset >>= 1) {
#pragma unroll
    for (int w = 0; w < 4; w++) {
      WelfordDataLN wdB{WARP_SHFL_DOWN(wd[w].mean, offset), WARP_SHFL_DOWN(wd[w].sigma2, offset),
                        WARP_SHFL_DOWN(wd[w].count, offset)};
      wd[w] = at::native::cuWelfordCombine<rms_norm>(wd[w], wdB);
    }
  }
  // torch's shared-memory rounds: offset 2 (warp 0 takes warp 2, warp 1 takes warp 3), then offset 1
  wd[0] = at::native::cuWelfordCombine<rms_norm>(wd[0], wd[2]);
  wd[1] = at::native::cuWelfordCombine<rms_norm>(wd[1], wd[3]);
  wd[0] = at::native::cuWelfordCombine<rms_norm>(wd[0], wd[1]);
  // lane 0's values are torch's; every lane takes them, as torch's threads take them from shared memory
  const float row_mean = WARP_SHFL(wd[0].mean, 0);
  const float var = WARP_SHFL(wd[0].sigma2 / float(N), 0);
  const float rstd_val = c10::cuda::compat::rsqrt(var + eps);
  const vec_t* gamma_vec = reinterpret_cast<const vec_t*>(gamma);
  const vec_t* beta_vec = reinterpret_cast<const vec_t*>(beta);
  vec_t* Y_vec = reinterpret_cast<vec_t*>(Y + row * N);
#pragma unroll
  for (int r = 0; r < (int)RW; r++) {
#pragma unroll
    for (int w = 0; w < 4; w++) {
      const int i = lane + 32 * w + 128 * r;
      if (i < n_vec)
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
