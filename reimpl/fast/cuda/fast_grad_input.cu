// Torch's bits, faster, backward: dX of LayerNorm/RMSNorm for exactly the inputs torch sends to
// layer_norm_grad_input_kernel_vectorized (N % 4 == 0; dY, X, gamma, dX aligned; float, half,
// bfloat16), giving torch 2.11's dX bit for bit. Ours; it reuses the mirror's warp-shuffle macros and
// the fast forward's row words (fast_common.cuh).
//
// What fixes torch's bits (reimpl/mirror/cuda/layer_norm_kernel.cu, layer_norm_grad_input_kernel_vectorized):
//   pass 1: each of 128 virtual threads t sums, over its elements (vectors t + 128 r, r ascending,
//     then the 4 elements of each in order), stats_x1 += dy*g and stats_x2 += (dy*g*(x-mean))*rstd
//     (RMSNorm: (dy*g*x)*rstd), where the SASS shows one FMUL dy*g shared by both sums, an FADD into
//     stats_x1 and an FFMA into stats_x2 (`accumulate` below);
//   the tree: BlockReduceSum over the 128 partial sums, for each statistic;
//   pass 2: per element, dX = ((fH*g)*dy - ((x-mean)*rstd)*stats_x2 - stats_x1) * ((1/fH)*rstd), with
//     the first subtraction fused into an FFMA (`grad_element`), and T's rounding on the store.
// Nothing else enters the bits. This kernel keeps that list and changes only what is not in it:
//   1. The row stays on chip between the two passes (X and dY in registers, and for rows of up to
//      16384 elements partly in shared memory), instead of being read twice: loads and copies
//      round nothing.
//   2. Short rows (fast_grad_input_warp_kernel, N < 512): one warp per row, lane l playing torch's threads
//      l + 32 w. Each keeps its own two sums, in its own order; the tree (warp_block_sum) adds the
//      same pairs as torch's shuffles and shared-memory rounds, with no barrier. IEEE addition is
//      commutative, so which of two lanes holds an operand does not matter, only which two values
//      meet, and when.
//   3. Without gamma, torch multiplies by T(1) == 1.f: dy * 1.f is dy and fH * 1.f is fH, exactly
//      (NaN stays NaN), so those products are left out.
//   4. 1.f / fH is __frcp_rn(fH): both are the correctly rounded reciprocal, so the same float.
//   5. Longer rows (block_sums): torch's two BlockReduceSum calls and its broadcast through shared
//      memory take one barrier instead of five; every thread finishes the tree with the additions
//      torch's warp 0 makes, on the same operands, so it holds what torch's thread 0 broadcasts.
// Every rounding torch's compiler fused into an FFMA is __fmaf_rn here, every other one __fadd_rn,
// __fsub_rn or __fmul_rn, so contraction choices cannot drift. Row offsets are 64-bit: torch's
// `bIdx * N` is 32-bit, which only matters beyond 2^32 elements, where torch reads the wrong rows.
#include "fast_common.cuh"

namespace reimpl_fast {

// --8<-- [start:grad_steps]
// One element of torch's pass 1: the SASS of layer_norm_kernel.cu:592-595 (results/sass_fma_table.md)
// is FMUL cg = dy * g; FADD s1 + cg; FADD x - mean; FMUL cg * that; FFMA that * rstd + s2.
template <bool rms_norm, bool has_gamma>
__device__ __forceinline__ void accumulate(float& s1, float& s2, const float x, const float dy, const float g,
                                           const float mean, const float rstd) {
  const float cg = has_gamma ? __fmul_rn(dy, g) : dy;
  if constexpr (!rms_norm) {
    s1 = __fadd_rn(s1, cg);
    s2 = __fmaf_rn(__fmul_rn(cg, __fsub_rn(x, mean)), rstd, s2);
  } else {
    s2 = __fmaf_rn(__fmul_rn(cg, x), rstd, s2);
  }
}

// One element of torch's pass 2 (layer_norm_kernel.cu:647-654): FADD x - mean; FMUL rstd * that;
// FMUL stats_x2 * that; FMUL fH * g; FFMA (fH * g) * dy - that; FADD - stats_x1; FMUL by term1.
template <bool rms_norm, bool has_gamma>
__device__ __forceinline__ float grad_element(const float x, const float dy, const float g, const float mean,
                                              const float rstd, const float s1, const float s2, const float fH,
                                              const float term1) {
  const float xhat = rms_norm ? __fmul_rn(rstd, x) : __fmul_rn(rstd, __fsub_rn(x, mean));
  float f = __fmaf_rn(has_gamma ? __fmul_rn(fH, g) : fH, dy, -__fmul_rn(s2, xhat));
  if constexpr (!rms_norm) f = __fsub_rn(f, s1);
  return __fmul_rn(term1, f);
}
// --8<-- [end:grad_steps]

// A thread's share of one row: the vectors it holds and the per-vector work of the two passes.
template <typename T, bool rms_norm, bool has_gamma>
struct GradRow {
  using words = words_t<T>;
  using vec_t = aligned_vector<T, vec_size>;
  const words* X;
  const words* dY;
  const words* gamma;
  vec_t* dX;
  float mean, rstd;

  __device__ __forceinline__ float weight(const words& g, const int ii) const {
    return has_gamma ? element<T>(g, ii) : 1.f;
  }
  __device__ __forceinline__ void sum(float& s1, float& s2, const words& x, const words& dy, const int i) const {
    words g;
    if (has_gamma) g = gamma[i];
#pragma unroll
    for (int ii = 0; ii < vec_size; ii++)
      accumulate<rms_norm, has_gamma>(s1, s2, element<T>(x, ii), element<T>(dy, ii), weight(g, ii), mean, rstd);
  }
  __device__ __forceinline__ void store(const words& x, const words& dy, const int i, const float s1,
                                        const float s2, const float fH, const float term1) const {
    words g;
    if (has_gamma) g = gamma[i];
    vec_t out;
#pragma unroll
    for (int ii = 0; ii < vec_size; ii++)
      out.val[ii] = grad_element<rms_norm, has_gamma>(element<T>(x, ii), element<T>(dy, ii), weight(g, ii), mean,
                                                      rstd, s1, s2, fH, term1);
    dX[i] = out;
  }
};

template <typename T, bool rms_norm, bool has_gamma>
__device__ __forceinline__ GradRow<T, rms_norm, has_gamma> grad_row(const T* dY, const T* X, const float* mean,
                                                                  const float* rstd, const T* gamma, T* dX,
                                                                  const int64_t row, const int N) {
  using G = GradRow<T, rms_norm, has_gamma>;
  return G{reinterpret_cast<const typename G::words*>(X + row * N),
           reinterpret_cast<const typename G::words*>(dY + row * N),
           reinterpret_cast<const typename G::words*>(gamma), reinterpret_cast<typename G::vec_t*>(dX + row * N),
           rms_norm ? 0.f : mean[row], rstd[row]};
}

// --8<-- [start:warp_block_sum]
// Torch's BlockReduceSum over one row's 128 partial sums, for S statistics, where lane l holds
// v[s][w] = the sum of torch's thread l + 32 w. Torch adds, in warp w, lane l and lane l + 16, then
// l + 8, l + 4, l + 2, l + 1 (lane 0's result is the warp's), then in warp 0 reads the four warp sums
// into lanes 0-3 (zeros elsewhere) and runs the same shuffle-down tree: each warp sum u gets + 0
// three times, then (u0 + u2) + (u1 + u3). Here, as the forward's warp_tree: folds at offsets 16
// and 8 put torch's warp w at lane 8 (w >> 1) + 16 (w & 1) after its rounds 16 and 8; with two
// statistics, offset 4 folds them (the first at lanes with bit 2 clear, the second 4 lanes higher);
// offsets 2 and 1 finish each warp's tree. + 0 once equals + 0 three times (it only turns -0 into
// +0), then lane 0 adds lane 8 and lane 16 adds lane 24, and lane 0 adds lane 16. Lane 4 s holds
// statistic s; every lane gets it, as torch's threads read it from shared memory.
__device__ __forceinline__ float fold_sum(const float a, const float b, const int width) {
  const bool upper = threadIdx.x & width;
  // the lower lane keeps a and takes its partner's a; the upper keeps b and takes the lower's b
  return __fadd_rn(upper ? b : a, WARP_SHFL_XOR(upper ? a : b, width));
}

template <int S>
__device__ __forceinline__ void warp_block_sum(const float (&v)[S][4], float (&out)[S]) {
  static_assert(S == 1 || S == 2, "one or two statistics");
  float t[S];
#pragma unroll
  for (int s = 0; s < S; s++) t[s] = fold_sum(fold_sum(v[s][0], v[s][1], 16), fold_sum(v[s][2], v[s][3], 16), 8);
  float u = S == 1 ? __fadd_rn(t[0], WARP_SHFL_DOWN(t[0], 4)) : fold_sum(t[0], t[S - 1], 4);
  u = __fadd_rn(u, WARP_SHFL_DOWN(u, 2));
  u = __fadd_rn(u, WARP_SHFL_DOWN(u, 1));
  u = __fadd_rn(u, 0.f);  // torch's second tree adds the zeros of lanes 4-31: -0 becomes +0
  u = __fadd_rn(u, WARP_SHFL_DOWN(u, 8));
  u = __fadd_rn(u, WARP_SHFL_DOWN(u, 16));
#pragma unroll
  for (int s = 0; s < S; s++) out[s] = WARP_SHFL(u, 4 * s);
}
// --8<-- [end:warp_block_sum]

// --8<-- [start:fast_grad_input_warp_kernel]
// Rows shorter than 512 elements (the plan's choice; the kernel takes any RW). Block (32, WARPS),
// one warp per row; lane l plays torch's threads l + 32 w (w = 0..3) and holds each one's at most
// RW vectors (l + 32 w + 128 r) of X and dY in registers. The plan picks the smallest RW that holds
// a thread's share, so the first RW / 2 slots of every thread are present and need no bounds check.
template <typename T, typename T_ACC, bool rms_norm, bool has_gamma, unsigned int RW, unsigned int WARPS>
__global__ void __launch_bounds__(32 * WARPS) fast_grad_input_warp_kernel(
    const T* __restrict__ dY, const T* __restrict__ X, const T_ACC* __restrict__ mean,
    const T_ACC* __restrict__ rstd, const T* __restrict__ gamma, T* dX, const int N, const int64_t M,
    const int from_last) {
  constexpr int S = rms_norm ? 1 : 2;  // statistics: stats_x1 (LayerNorm only) and stats_x2
  const int64_t block = from_last ? gridDim.x - 1 - blockIdx.x : blockIdx.x;  // see fast_grad_input_kernel
  const int64_t row = block * WARPS + threadIdx.y;
  if (row >= M) return;  // whole warps leave; nothing below waits on another warp
  const int lane = threadIdx.x;
  const int n_vec = N / vec_size;
  const auto present = [&](const int r, const int i) { return r < (int)RW / 2 || i < n_vec; };
  const auto g = grad_row<T, rms_norm, has_gamma>(dY, X, mean, rstd, gamma, dX, row, N);
  words_t<T> x[4][RW], dy[4][RW];
#pragma unroll
  for (int r = 0; r < (int)RW; r++) {
#pragma unroll
    for (int w = 0; w < 4; w++) {
      const int i = lane + 32 * w + 128 * r;
      if (present(r, i)) {
        x[w][r] = g.X[i];
        dy[w][r] = g.dY[i];
      }
    }
  }
  float v[S][4];
#pragma unroll
  for (int w = 0; w < 4; w++) {
    float s1 = 0.f, s2 = 0.f;
#pragma unroll
    for (int r = 0; r < (int)RW; r++) {
      const int i = lane + 32 * w + 128 * r;
      if (present(r, i)) g.sum(s1, s2, x[w][r], dy[w][r], i);
    }
    v[0][w] = rms_norm ? s2 : s1;
    v[S - 1][w] = s2;
  }
  float st[S];
  warp_block_sum<S>(v, st);
  const float fH = N;
  const float term1 = __fmul_rn(__frcp_rn(fH), g.rstd);
#pragma unroll
  for (int r = 0; r < (int)RW; r++) {
#pragma unroll
    for (int w = 0; w < 4; w++) {
      const int i = lane + 32 * w + 128 * r;
      keep_packed<T>(x[w][r]);
      keep_packed<T>(dy[w][r]);
      if (present(r, i)) g.store(x[w][r], dy[w][r], i, st[0], st[S - 1], fH, term1);
    }
  }
}
// --8<-- [end:fast_grad_input_warp_kernel]

// Blocks per SM the compiler must fit in registers: the words held (R vectors each of X and dY)
// plus 40 for everything else (EXTRA more for a kernel that also holds other work); R == 0 asks
// for nothing.
template <typename T, unsigned int R, int EXTRA = 0>
__host__ __device__ constexpr int grad_min_blocks() {
  const int regs = int(2 * R * sizeof(T)) + 40 + EXTRA;
  const int b = 65536 / (128 * ((regs + 7) / 8 * 8));
  return R == 0 ? 1 : (b < 1 ? 1 : (b > 16 ? 16 : b));
}

// --8<-- [start:block_sums]
// Torch's two BlockReduceSum calls and its broadcast through reduce_buf, for S statistics, with one
// barrier where torch has five. v[s] enters as this thread's sum and leaves as the block's. Each
// warp runs torch's shuffle-down tree (lane 0's result is the warp's sum u_w); torch's warp 0 then
// reads u_0..u_3 into lanes 0-3 (zeros elsewhere) and runs the tree again, where each u_w gets + 0
// three times (only -0 changes, to +0, and once does that), then lane 0 computes
// (u_0 + u_2) + (u_1 + u_3). Here every thread reads the four u_w from shared memory and makes those
// additions itself: the same operands meet in the same pairs, so every thread holds thread 0's
// result, which torch's threads read back from reduce_buf. buf: one float4 (a float per warp) per
// statistic; a caller that sums again must first pass a barrier or switch to another buf.
template <int S>
__device__ __forceinline__ void block_sums(float (&v)[S], float4* buf) {
  const int lane = threadIdx.x % C10_WARP_SIZE;
  const int wid = threadIdx.x / C10_WARP_SIZE;
#pragma unroll
  for (int offset = C10_WARP_SIZE >> 1; offset > 0; offset >>= 1) {
#pragma unroll
    for (int s = 0; s < S; s++) v[s] = __fadd_rn(v[s], WARP_SHFL_DOWN(v[s], offset));
  }
  if (lane == 0) {
#pragma unroll
    for (int s = 0; s < S; s++) reinterpret_cast<float*>(&buf[s])[wid] = v[s];
  }
  __syncthreads();
#pragma unroll
  for (int s = 0; s < S; s++) {
    const float4 u = buf[s];
    v[s] = __fadd_rn(__fadd_rn(__fadd_rn(u.x, 0.f), __fadd_rn(u.z, 0.f)),
                     __fadd_rn(__fadd_rn(u.y, 0.f), __fadd_rn(u.w, 0.f)));
  }
}
// --8<-- [end:block_sums]

// --8<-- [start:fast_grad_input_kernel]
// Longer rows: one block of 128 threads per row, torch's shape and thread-to-vector map. Thread t's
// vectors are t + 128 r; it keeps the first R of X and dY in registers and the next RS in dynamic
// shared memory (filled by cp.async while the register ones load), so both passes read the row from
// chip. Each thread reads back only what it wrote, so no barrier guards the shared slots.
// R == RS == 0 (rows beyond 128 * 32 vectors) streams the row twice, as torch does.
// grad_input_row is one row of it, for the kernel below and for the fused backward's row loop
// (fast_backward.cu): `held` the block's RS vectors of X, then RS of dY, per thread; `buf` S float4.
template <typename T, bool rms_norm, bool has_gamma, unsigned int R, unsigned int RS>
__device__ __forceinline__ void grad_input_row(const T* __restrict__ dY, const T* __restrict__ X,
                                               const float* __restrict__ mean, const float* __restrict__ rstd,
                                               const T* __restrict__ gamma, T* dX, const int N, const int64_t row,
                                               unsigned char* held, float4* buf) {
  using words = words_t<T>;
  constexpr int S = rms_norm ? 1 : 2;  // statistics: stats_x1 (LayerNorm only) and stats_x2
  constexpr int P = R + RS;  // vectors a thread holds
  words* xs = reinterpret_cast<words*>(held);
  words* dys = xs + RS * 128;
  const int t = threadIdx.x;
  const int n_vec = N / vec_size;
  const auto g = grad_row<T, rms_norm, has_gamma>(dY, X, mean, rstd, gamma, dX, row, N);
  float st[S] = {};  // stats_x1 (LayerNorm), stats_x2 last
  float& s1 = st[0];
  float& s2 = st[S - 1];
  words xr[R > 0 ? R : 1], dyr[R > 0 ? R : 1];
  // the plan picks P below twice a thread's share, so the first half needs no bounds check
  const auto present = [&](const int r) { return r < P / 2 || t + 128 * r < n_vec; };
  if constexpr (P > 0) {
#pragma unroll
    for (int s = 0; s < (int)RS; s++) {
      if (present(R + s)) {
        copy_to_shared(&xs[s * 128 + t], &g.X[t + 128 * (R + s)]);
        copy_to_shared(&dys[s * 128 + t], &g.dY[t + 128 * (R + s)]);
      }
    }
    if constexpr (RS > 0) asm volatile("cp.async.commit_group;");
#pragma unroll
    for (int r = 0; r < (int)R; r++) {
      if (present(r)) {
        xr[r] = g.X[t + 128 * r];
        dyr[r] = g.dY[t + 128 * r];
      }
    }
#pragma unroll
    for (int r = 0; r < (int)R; r++) {
      if (present(r)) g.sum(s1, s2, xr[r], dyr[r], t + 128 * r);
      // At most 4 vectors' weights in flight: all of them at once would spill.
      if (r % 4 == 3) asm volatile("" ::: "memory");
    }
    if constexpr (RS > 0) asm volatile("cp.async.wait_all;" ::: "memory");
#pragma unroll
    for (int s = 0; s < (int)RS; s++) {
      if (present(R + s)) g.sum(s1, s2, xs[s * 128 + t], dys[s * 128 + t], t + 128 * (R + s));
      if (s % 4 == 3) asm volatile("" ::: "memory");
    }
  } else {
    for (int i = t; i < n_vec; i += 128) g.sum(s1, s2, g.X[i], g.dY[i], i);
  }
  block_sums<S>(st, buf);
  const float fH = N;
  const float term1 = __fmul_rn(__frcp_rn(fH), g.rstd);
  if constexpr (P > 0) {
#pragma unroll
    for (int r = 0; r < (int)R; r++) {
      keep_packed<T>(xr[r]);
      keep_packed<T>(dyr[r]);
      if (present(r)) g.store(xr[r], dyr[r], t + 128 * r, s1, s2, fH, term1);
      if (r % 4 == 3) asm volatile("" ::: "memory");
    }
#pragma unroll
    for (int s = 0; s < (int)RS; s++) {
      if (present(R + s)) g.store(xs[s * 128 + t], dys[s * 128 + t], t + 128 * (R + s), s1, s2, fH, term1);
      if (s % 4 == 3) asm volatile("" ::: "memory");
    }
  } else {
    for (int i = t; i < n_vec; i += 128) g.store(g.X[i], g.dY[i], i, s1, s2, fH, term1);
  }
}

template <typename T, typename T_ACC, bool rms_norm, bool has_gamma, unsigned int R, unsigned int RS>
__global__ void __launch_bounds__(128, (grad_min_blocks<T, R>())) fast_grad_input_kernel(
    const T* __restrict__ dY, const T* __restrict__ X, const T_ACC* __restrict__ mean,
    const T_ACC* __restrict__ rstd, const T* __restrict__ gamma, T* dX, const int N, const int64_t M,
    const int from_last) {
  __shared__ float4 buf[rms_norm ? 1 : 2];  // one float per warp for each statistic (torch: reduce_buf, 4 floats)
  extern __shared__ __align__(16) unsigned char held[];  // RS vectors of X, then RS of dY, per thread
  // from_last: rows from the last up (a row's bits do not depend on when it runs), so that the
  // chains kernel that may follow, which starts at the top, finds the rows read last still in L2
  const int64_t row = from_last ? M - 1 - blockIdx.x : blockIdx.x;
  grad_input_row<T, rms_norm, has_gamma, R, RS>(dY, X, mean, rstd, gamma, dX, N, row, held, buf);
}
// --8<-- [end:fast_grad_input_kernel]

}  // namespace reimpl_fast
