// Mirror of aten/src/ATen/native/cuda/layer_norm_kernel.cu at torch 2.11.0
// (git 70d99e998b4955e0049d13a98d77ae1b14db1f45): the device half. The host half (dispatch,
// launch configuration) is Python, in reimpl/mirror/layer_norm_kernel.py, in the same order.
// Each symbol below carries the upstream line range it mirrors and its docs anchor.
// ROCm-only branches upstream are left out: this mirror is for NVIDIA GPUs.
//
// Index of the forward kernels, in upstream order:
//   RowwiseMomentsCUDAKernel      fallback path, pass 1: per-row mean/rstd with WelfordOps + BlockReduce
//   LayerNormForwardCUDAKernel    fallback path, pass 2: y = (x - mean) * rstd * gamma + beta
//   vectorized_layer_norm_kernel  fast path: one block per row, compute_stats then normalize, 4-wide loads
// and of the backward kernels:
//   layer_norm_grad_input_kernel             dX, one block (128 threads) per row, through compute_gI
//   layer_norm_grad_input_kernel_vectorized  the same sums with 4-wide loads, when every buffer is aligned
//   GammaBetaBackwardCUDAKernelTemplate      dgamma/dbeta: column sums over M, tiles chosen by M and N
#include "c10_shim.cuh"
#include "DeviceUtils.cuh"
#include "SharedReduceOps.h"
#include "block_reduce.cuh"
#include "thread_constants.h"
#include "trace.cuh"  // REIMPL_TRACE: empty unless built with -DREIMPL_TRACING

namespace at::native {

namespace {

// --8<-- [start:kWarpSize]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L36-L41
// docs: upstream/layer_norm_kernel.md#kWarpSize
constexpr unsigned int kWarpSize = C10_WARP_SIZE;
// --8<-- [end:kWarpSize]

// --8<-- [start:vec_size]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L42-L42
// docs: upstream/layer_norm_kernel.md#vec_size
// Fixed at 4 for every dtype: a per-dtype width would change the order of the Welford updates,
// and with it the bits, between float and the 16-bit types.
constexpr int vec_size = 4;
// --8<-- [end:vec_size]

// --8<-- [start:aligned_vector]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L45-L48
// docs: upstream/layer_norm_kernel.md#aligned_vector
// The alignment makes one load/store instruction move all vec_size elements (16 B for float).
template <typename scalar_t, int vec_size>
struct alignas(sizeof(scalar_t) * vec_size) aligned_vector {
  scalar_t val[vec_size];
};
// --8<-- [end:aligned_vector]

// --8<-- [start:RowwiseMomentsCUDAKernel]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L58-L98
// docs: upstream/layer_norm_kernel.md#RowwiseMomentsCUDAKernel
// One block (512 threads) per row i. Each thread folds a strided slice of the row into a
// WelfordData, then BlockReduce merges the 512 partial states (warp shuffles, then one warp).
template <typename T, typename T_ACC, bool rms_norm>
__global__ void RowwiseMomentsCUDAKernel(
    int64_t N,
    T_ACC eps,
    const T* X,
    T_ACC* mean,
    T_ACC* rstd) {
  using WelfordType = WelfordData<T_ACC, int64_t>;
  using WelfordOp = WelfordOps<T_ACC, T_ACC, int64_t, thrust::pair<T_ACC, T_ACC>>;

  // One WelfordType per warp, as raw storage because WelfordType has a constructor.
  __shared__
      typename std::aligned_storage<sizeof(WelfordType), alignof(WelfordType)>::type
          val_shared[C10_WARP_SIZE];
  WelfordType* val_shared_ptr = reinterpret_cast<WelfordType*>(val_shared);

  const int64_t i = blockIdx.x;
  WelfordOp welford_op = {/*correction=*/0, /*take_sqrt=*/false};
  WelfordType val(0, 0, 0, 0);

  for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
    const int64_t index = i * N + j;
    val = welford_op.reduce(val, static_cast<T_ACC>(X[index]), index);
    REIMPL_TRACE(reduce, (j - threadIdx.x) / blockDim.x, index, val.mean, val.m2, val.n, val.nf);
  }
  val = cuda_utils::BlockReduce(
      val,
      welford_op,
      /*identity_element=*/WelfordType(0, 0, 0, 0),
      val_shared_ptr);

  if (threadIdx.x == 0) {
    T_ACC m1;
    T_ACC m2;
    thrust::tie(m2, m1) = welford_op.project(val);  // (variance, mean)
    if constexpr (!rms_norm) {
      mean[i] = m1;
      rstd[i] = c10::cuda::compat::rsqrt(m2 + eps);
      REIMPL_TRACE(moments, 0, -1, m1, rstd[i]);
    } else {
      // mean of squares recovered as var + mean^2 (Welford ran on x, not x^2)
      rstd[i] = c10::cuda::compat::rsqrt(m2 + m1 * m1 + eps);
      REIMPL_TRACE(moments, 0, -1, m1, rstd[i]);
    }
  }
}
// --8<-- [end:RowwiseMomentsCUDAKernel]

// --8<-- [start:LayerNormForwardCUDAKernel]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L100-L124
// docs: upstream/layer_norm_kernel.md#LayerNormForwardCUDAKernel
// One block (256 threads) per row, one element per thread per step; absent gamma/beta read as 1/0.
template <typename T, typename T_ACC, bool rms_norm>
__global__ void LayerNormForwardCUDAKernel(
    int64_t N,
    const T* X,
    const T_ACC* mean,
    const T_ACC* rstd,
    const T* gamma,
    const T* beta,
    T* Y) {
  const int64_t i = blockIdx.x;
  for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
    const int64_t index = i * N + j;
    const T_ACC gamma_v =
        gamma == nullptr ? T_ACC(1) : static_cast<T_ACC>(gamma[j]);
    if constexpr (!rms_norm) {
      const T_ACC beta_v =
          beta == nullptr ? T_ACC(0) : static_cast<T_ACC>(beta[j]);
      Y[index] = (static_cast<T_ACC>(X[index]) - static_cast<T_ACC>(mean[i])) *
              static_cast<T_ACC>(rstd[i]) * gamma_v +
          beta_v;
    } else {
      Y[index] = (static_cast<T_ACC>(X[index])) * static_cast<T_ACC>(rstd[i]) * gamma_v;
    }
    REIMPL_TRACE(fwd_output, j / blockDim.x, j, static_cast<T_ACC>(Y[index]));
  }
}
// --8<-- [end:LayerNormForwardCUDAKernel]

// --8<-- [start:WelfordDataLN]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L126-L132
// docs: upstream/layer_norm_kernel.md#WelfordDataLN
// The fast path's Welford state: all float, the count too (exact only up to 2^24, hence the
// N <= 2^24 condition for this path).
struct WelfordDataLN {
  float mean;
  float sigma2;
  float count;
  C10_HOST_DEVICE WelfordDataLN() : mean(0.f), sigma2(0.f), count(0.f) {}
  C10_HOST_DEVICE WelfordDataLN(float mean, float sigma2, float count)
      : mean(mean), sigma2(sigma2), count(count) {}
};
// --8<-- [end:WelfordDataLN]

// --8<-- [start:cuWelfordOnlineSum]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L134-L152
// docs: upstream/layer_norm_kernel.md#cuWelfordOnlineSum
// One element into the running state. LayerNorm: Welford's update, with the division by the new
// count replaced by a multiply with its (correctly rounded) reciprocal. RMSNorm: sum of squares.
template <typename U, bool rms_norm>
__device__ WelfordDataLN cuWelfordOnlineSum(
    const U val,
    const WelfordDataLN& curr_sum) {
  if constexpr (!rms_norm) {
    U delta = val - curr_sum.mean;
    U new_count = curr_sum.count + 1.f;
    U new_mean = curr_sum.mean + delta * (1.f / new_count);  // reciprocal-multiply, not a division
    return {new_mean, curr_sum.sigma2 + delta * (val - new_mean), new_count};
  } else {
    return {0.f, curr_sum.sigma2 + val * val, 0};
  }
}
// --8<-- [end:cuWelfordOnlineSum]

// --8<-- [start:cuWelfordCombine]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L154-L183
// docs: upstream/layer_norm_kernel.md#cuWelfordCombine
// Merge two states (Chan et al.). The weights nA, nB come from one reciprocal of the total count.
// An empty pair (count 0, e.g. lanes that read nothing) merges to zeros instead of 0/0.
template <bool rms_norm>
__device__ WelfordDataLN cuWelfordCombine(
    const WelfordDataLN dataB,
    const WelfordDataLN dataA) {
  if constexpr (!rms_norm) {
    using U = decltype(dataB.count);
    U delta = dataB.mean - dataA.mean;
    U count = dataA.count + dataB.count;
    U mean, sigma2;
    if (count > decltype(dataB.count){0}) {
      auto coef = 1.f / count;  // IEEE reciprocal (no fast math), then multiplies
      auto nA = dataA.count * coef;
      auto nB = dataB.count * coef;
      mean = nA * dataA.mean + nB * dataB.mean;
      sigma2 = dataA.sigma2 + dataB.sigma2 + delta * delta * dataA.count * nB;
    } else {
      mean = U(0);
      sigma2 = U(0);
    }
    return {mean, sigma2, count};
  } else {
    return {0.f, dataB.sigma2 + dataA.sigma2, 0};
  }
}
// --8<-- [end:cuWelfordCombine]

// --8<-- [start:compute_stats]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L185-L245
// docs: upstream/layer_norm_kernel.md#compute_stats
// Statistics of one row for the fast path, on a (32, blockDim.y) block:
//  1. each thread folds its strided 4-wide vectors into a WelfordDataLN;
//  2. five shuffle-down rounds merge each warp into its lane 0;
//  3. blockDim.y > 1: lane 0s merge pairwise through shared memory, halving each round;
//  4. the result (mean, sigma2 / N) is broadcast to every thread.
// `buf` holds blockDim.y/2 (mean, sigma2) pairs then blockDim.y/2 counts: 1.5 * blockDim.y floats.
template <typename T, bool rms_norm = false>
__device__ WelfordDataLN compute_stats(
    const T* __restrict__ X,
    const int N,
    float* buf) {
  // X is this block's row
  using vec_t = aligned_vector<T, vec_size>;
  using acc_t = acc_type<T, true>;
  const vec_t* X_vec = reinterpret_cast<const vec_t*>(X);
  const int numx = blockDim.x * blockDim.y;
  const int thrx = threadIdx.x + threadIdx.y * blockDim.x;
  const int n_vec_to_read = N / vec_size;
  WelfordDataLN wd(0.f, 0.f, 0.f);
  // the host took this path only if N % vec_size == 0: no tail loop
  for (int i = thrx; i < n_vec_to_read; i += numx) {
    vec_t data = X_vec[i];
#pragma unroll
    for (int ii = 0; ii < vec_size; ii++) {
      wd = cuWelfordOnlineSum<acc_t, rms_norm>(static_cast<acc_t>(data.val[ii]), wd);
      REIMPL_TRACE(online, (i - thrx) / numx * vec_size + ii, i * vec_size + ii, wd.mean, wd.sigma2, wd.count);
    }
  }
  // within each warp: lane l takes lane l+offset's state, offsets 16, 8, 4, 2, 1
  for (int offset = (C10_WARP_SIZE >> 1); offset > 0; offset >>= 1) {
    WelfordDataLN wdB{WARP_SHFL_DOWN(wd.mean, offset), WARP_SHFL_DOWN(wd.sigma2, offset),
                      WARP_SHFL_DOWN(wd.count, offset)};
    wd = cuWelfordCombine<rms_norm>(wd, wdB);
    REIMPL_TRACE(shfl_down, reimpl_trace::round_of(C10_WARP_SIZE >> 1, offset),
                 WARP_SHFL_DOWN(thrx, offset), wd.mean, wd.sigma2, wd.count);
  }
  // lane 0 of each warp now holds its warp's state; merge across warps
  if (blockDim.y > 1) {
    float* meansigmabuf = buf;
    float* countbuf = buf + blockDim.y;
    for (int offset = blockDim.y / 2; offset > 0; offset /= 2) {
      // warps [offset, 2*offset) publish their state
      if (threadIdx.x == 0 && threadIdx.y >= offset && threadIdx.y < 2 * offset) {
        const int wrt_y = threadIdx.y - offset;
        meansigmabuf[2 * wrt_y] = wd.mean;
        meansigmabuf[2 * wrt_y + 1] = wd.sigma2;
        countbuf[wrt_y] = wd.count;
        REIMPL_TRACE(smem_write, reimpl_trace::round_of(blockDim.y / 2, offset), wrt_y,
                     wd.mean, wd.sigma2, wd.count);
      }
      __syncthreads();
      // warps [0, offset) fold in their partner's state
      if (threadIdx.x == 0 && threadIdx.y < offset) {
        WelfordDataLN wdB{meansigmabuf[2 * threadIdx.y],
                          meansigmabuf[2 * threadIdx.y + 1],
                          countbuf[threadIdx.y]};
        wd = cuWelfordCombine<rms_norm>(wd, wdB);
        REIMPL_TRACE(smem_combine, reimpl_trace::round_of(blockDim.y / 2, offset), threadIdx.y,
                     wd.mean, wd.sigma2, wd.count);
      }
      __syncthreads();
    }
    if (threadIdx.x == 0 && threadIdx.y == 0) {
      meansigmabuf[0] = wd.mean;
      meansigmabuf[1] = wd.sigma2 / float(N);
    }
    __syncthreads();
    return WelfordDataLN{meansigmabuf[0], meansigmabuf[1], 0.f};

  } else {
    return WelfordDataLN{WARP_SHFL(wd.mean, 0), WARP_SHFL(wd.sigma2, 0) / float(N), 0.f};
  }
}
// --8<-- [end:compute_stats]

// --8<-- [start:vectorized_layer_norm_kernel_impl]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L248-L325
// docs: upstream/layer_norm_kernel.md#vectorized_layer_norm_kernel_impl
// The fast path's body for float, half and bfloat16: statistics of row blockIdx.x, then a second
// read of the row (from L2/L1, not registers) to normalize it, four elements per step.
template <typename T, typename T_ACC, bool rms_norm = false,
          typename std::enable_if_t<!std::is_same_v<T, double>, int> = 0>
__device__ __inline__ void vectorized_layer_norm_kernel_impl(
    const int N,
    T_ACC eps,
    const T* __restrict__ X,
    const T* gamma,
    const T* beta,
    T_ACC* mean,
    T_ACC* rstd,
    T* Y) {
  // floats, not WelfordDataLN structs: a thread writing 3 adjacent floats would conflict on banks
  extern __shared__ float s_data[];
  auto i1 = blockIdx.x;
  const T* block_row = X + i1 * N;
  WelfordDataLN wd = compute_stats<T, rms_norm>(block_row, N, s_data);
  REIMPL_TRACE(stats, 0, -1, wd.mean, wd.sigma2);

  using vec_t = aligned_vector<T, vec_size>;
  const vec_t* X_vec = reinterpret_cast<const vec_t*>(block_row);
  const vec_t* gamma_vec = (gamma != nullptr) ? reinterpret_cast<const vec_t*>(gamma) : nullptr;
  const vec_t* beta_vec = (beta != nullptr) ? reinterpret_cast<const vec_t*>(beta) : nullptr;
  vec_t* Y_vec = reinterpret_cast<vec_t*>(Y + i1 * N);

  const int numx = blockDim.x * blockDim.y;
  const int thrx = threadIdx.x + threadIdx.y * blockDim.x;
  const int n_vec_to_read = N / vec_size;

  T_ACC rstd_val = c10::cuda::compat::rsqrt(wd.sigma2 + eps);
  REIMPL_TRACE(rstd, 0, -1, rstd_val);

  // no tail: N % vec_size == 0 on this path
  for (int i = thrx; i < n_vec_to_read; i += numx) {
    vec_t data = X_vec[i];
    vec_t out;

    // arithmetic in T_ACC; the store to out.val rounds to T
    if (gamma_vec != nullptr && beta_vec != nullptr) {
#pragma unroll
      for (int ii = 0; ii < vec_size; ii++) {
        if constexpr (!rms_norm) {
          out.val[ii] = static_cast<T_ACC>(gamma_vec[i].val[ii]) *
                  (rstd_val * (static_cast<T_ACC>(data.val[ii]) - wd.mean)) +
              static_cast<T_ACC>(beta_vec[i].val[ii]);
        } else {
          out.val[ii] = static_cast<T_ACC>(gamma_vec[i].val[ii]) *
              (rstd_val * static_cast<T_ACC>(data.val[ii]));
        }
      }
    } else if (gamma_vec != nullptr) {
#pragma unroll
      for (int ii = 0; ii < vec_size; ii++) {
        if constexpr (!rms_norm) {
          out.val[ii] = static_cast<T_ACC>(gamma_vec[i].val[ii]) *
              (rstd_val * (static_cast<T_ACC>(data.val[ii]) - wd.mean));
        } else {
          out.val[ii] = static_cast<T_ACC>(gamma_vec[i].val[ii]) *
              (rstd_val * static_cast<T_ACC>(data.val[ii]));
        }
      }
    } else if (beta_vec != nullptr) {
#pragma unroll
      for (int ii = 0; ii < vec_size; ii++) {
        out.val[ii] = (rstd_val * (static_cast<T_ACC>(data.val[ii]) - wd.mean)) +
            static_cast<T_ACC>(beta_vec[i].val[ii]);
      }
    } else {
#pragma unroll
      for (int ii = 0; ii < vec_size; ii++) {
        if constexpr (!rms_norm) {
          out.val[ii] = rstd_val * (static_cast<T_ACC>(data.val[ii]) - wd.mean);
        } else {
          out.val[ii] = rstd_val * static_cast<T_ACC>(data.val[ii]);
        }
      }
    }
#ifdef REIMPL_TRACING
    for (int ii = 0; ii < vec_size; ii++) {
      REIMPL_TRACE(output, (i - thrx) / numx * vec_size + ii, i * vec_size + ii,
                   static_cast<T_ACC>(out.val[ii]));
    }
#endif
    Y_vec[i] = out;
  }
  if (thrx == 0) {
    if constexpr (!rms_norm) {
      mean[i1] = wd.mean;
    }
    rstd[i1] = rstd_val;
  }
}
// --8<-- [end:vectorized_layer_norm_kernel_impl]

// --8<-- [start:vectorized_layer_norm_kernel_impl_double]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L327-L339
// docs: upstream/layer_norm_kernel.md#vectorized_layer_norm_kernel_impl_double
// double never takes the fast path (the host checks); this overload only lets the template
// instantiate, and traps if ever launched.
template <typename T, typename T_ACC, bool rms_norm = false,
          typename std::enable_if_t<std::is_same_v<T, double>, int> = 0>
__device__ __inline__ void vectorized_layer_norm_kernel_impl(
    const int /*N*/,
    T_ACC /*eps*/,
    const T* __restrict__ /*X*/,
    const T* /*gamma*/,
    const T* /*beta*/,
    T_ACC* /*mean*/,
    T_ACC* /*rstd*/,
    T* /*Y*/) {
  CUDA_KERNEL_ASSERT(false && "doesn't work with double");
}
// --8<-- [end:vectorized_layer_norm_kernel_impl_double]

// --8<-- [start:vectorized_layer_norm_kernel]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L342-L353
// docs: upstream/layer_norm_kernel.md#vectorized_layer_norm_kernel
// A thin __global__ wrapper: upstream splits kernel and impl so the SFINAE overloads above
// resolve on every compiler.
template <typename T, typename T_ACC, bool rms_norm = false>
__global__ void vectorized_layer_norm_kernel(
    const int N,
    T_ACC eps,
    const T* __restrict__ X,
    const T* gamma,
    const T* beta,
    T_ACC* mean,
    T_ACC* rstd,
    T* Y) {
  vectorized_layer_norm_kernel_impl<T, T_ACC, rms_norm>(N, eps, X, gamma, beta, mean, rstd, Y);
}
// --8<-- [end:vectorized_layer_norm_kernel]

// ============================== backward ==============================

// --8<-- [start:compute_gI]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L356-L439
// docs: upstream/layer_norm_kernel.md#compute_gI
// dX for one row (block i1), unvectorized. With g = gamma * dy and xhat = (x - mean) * rstd:
//   dX = (N*g - sum(g) - xhat * sum(g * xhat)) * rstd / N
// Pass 1 sums stats_x1 = sum(g) and stats_x2 = sum(g * xhat) (4 elements per step, strided by
// blockDim.x * 4), BlockReduceSum combines them, and thread 0 broadcasts through buf[0..1].
// Pass 2 writes dX one element per thread per step. Indices are 32-bit (i1 * N is unsigned int
// arithmetic), as upstream.
template <typename T, typename T_ACC, bool rms_norm>
__device__ __inline__ void compute_gI(
    const T* __restrict__ dY,
    const T* __restrict__ X,
    const T_ACC* __restrict__ mean,
    const T_ACC* __restrict__ rstd,
    const T* __restrict__ gamma,
    T* dX,
    const int N,
    T_ACC* buf) {
  const auto i1 = blockIdx.x;
  T_ACC mean_val = 0;
  if constexpr (!rms_norm) {
    mean_val = mean[i1];
  }
  const T_ACC rstd_val = rstd[i1];
  T_ACC stats_x1{0}, stats_x2{0};
  constexpr int unroll = 4;
  auto l = unroll * threadIdx.x;
  const T* X_i = X + i1 * N;
  const T* dY_i = dY + i1 * N;
  T* dX_i = dX + i1 * N;
  // plain loads, unrolled by 4 (this kernel runs when the buffers are not 4-element aligned)
  for (; l + unroll - 1 < N; l += blockDim.x * unroll) {
#pragma unroll
    for (int k = 0; k < unroll; k++) {
      const auto gamma_val = (gamma != nullptr) ? static_cast<T_ACC>(gamma[l + k]) : T_ACC(1);
      const auto c_h = static_cast<T_ACC>(X_i[l + k]);
      const auto c_loss = static_cast<T_ACC>(dY_i[l + k]);
      if constexpr (!rms_norm) {
        stats_x1 += c_loss * gamma_val;
        stats_x2 += c_loss * gamma_val * (c_h - mean_val) * rstd_val;
      } else {
        stats_x2 += c_loss * gamma_val * (c_h) * rstd_val;
      }
    }
  }
  // the last N % 4 elements, one at a time, by whichever thread's l reached them
  for (; l < N; l++) {
    const auto gamma_val = (gamma != nullptr) ? static_cast<T_ACC>(gamma[l]) : T_ACC(1);
    const auto c_h = static_cast<T_ACC>(X_i[l]);
    const auto c_loss = static_cast<T_ACC>(dY_i[l]);
    if constexpr (!rms_norm) {
      stats_x1 += c_loss * gamma_val;
      stats_x2 += c_loss * gamma_val * (c_h - mean_val) * rstd_val;
    } else {
      stats_x2 += c_loss * gamma_val * (c_h) * rstd_val;
    }
  }
  REIMPL_TRACE(gi_sums, 0, -1, stats_x1, stats_x2);
  if constexpr (!rms_norm) {
    stats_x1 = cuda_utils::BlockReduceSum(stats_x1, buf);
  }
  stats_x2 = cuda_utils::BlockReduceSum(stats_x2, buf);
  // only thread 0 holds the block sums: publish them
  if (threadIdx.x == 0) {
    if constexpr (!rms_norm) {
      buf[0] = stats_x1;
    }
    buf[1] = stats_x2;
  }
  __syncthreads();
  if constexpr (!rms_norm) {
    stats_x1 = buf[0];
  }
  stats_x2 = buf[1];
  REIMPL_TRACE(gi_stats, 0, -1, stats_x1, stats_x2);
  T_ACC fH = N;
  T_ACC term1 = (T_ACC(1) / fH) * rstd_val;

  for (int l = threadIdx.x; l < N; l += blockDim.x) {
    // x and dy stay T here: c10's mixed operators promote them inside each expression
    const auto x = X_i[l];
    const auto dy = dY_i[l];
    const auto gamma_val = (gamma != nullptr) ? static_cast<T_ACC>(gamma[l]) : T_ACC(1);

    T_ACC f_grad_input = fH * gamma_val * dy;
    if constexpr (!rms_norm) {
      f_grad_input -= (x - mean_val) * rstd_val * stats_x2;
      f_grad_input -= stats_x1;
    } else {
      f_grad_input -= (x) * rstd_val * stats_x2;
    }

    f_grad_input *= term1;
    dX_i[l] = f_grad_input;
    REIMPL_TRACE(gi_dx, (l - threadIdx.x) / blockDim.x, l, static_cast<T_ACC>(dX_i[l]));
  }
}
// --8<-- [end:compute_gI]

// --8<-- [start:layer_norm_grad_input_kernel]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L442-L455
// docs: upstream/layer_norm_kernel.md#layer_norm_grad_input_kernel
// One block of num_threads() (128) per row; buf is BlockReduceSum's one float per warp.
template <typename T, typename T_ACC, bool rms_norm>
__global__ void layer_norm_grad_input_kernel(
    const T* __restrict__ dY,
    const T* __restrict__ X,
    const T_ACC* __restrict__ mean,
    const T_ACC* __restrict__ rstd,
    const T* __restrict__ gamma,
    T* dX,
    const int N) {
  alignas(sizeof(double)) extern __shared__ char s_data1[];
  T_ACC* buf = reinterpret_cast<T_ACC*>(&s_data1);

  compute_gI<T, T_ACC, rms_norm>(dY, X, mean, rstd, gamma, dX, N, buf);
}
// --8<-- [end:layer_norm_grad_input_kernel]

// --8<-- [start:layer_norm_grad_input_kernel_vectorized]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L463-L598
// docs: upstream/layer_norm_kernel.md#layer_norm_grad_input_kernel_vectorized
// compute_gI with aligned_vector loads and stores, chosen when dY, X, gamma and dX are all
// 4-element aligned and N % 4 == 0. Each thread visits the same elements in the same order as
// compute_gI's unrolled loop (4 consecutive elements, stride blockDim.x * 4), so the two kernels'
// partial sums, and therefore their bits, agree.
template <typename T, typename T_ACC, bool rms_norm>
__global__ void layer_norm_grad_input_kernel_vectorized(
    const T* __restrict__ dY,
    const T* __restrict__ X,
    const T_ACC* __restrict__ mean,
    const T_ACC* __restrict__ rstd,
    const T* __restrict__ gamma,
    T* dX,
    const int N) {
  alignas(sizeof(double)) extern __shared__ char shared_data[];
  T_ACC* reduce_buf = reinterpret_cast<T_ACC*>(&shared_data);

  const auto bIdx = blockIdx.x;
  T_ACC mean_val = 0;
  if constexpr (!rms_norm) {
    mean_val = mean[bIdx];
  }
  const T_ACC rstd_val = rstd[bIdx];
  const T* X_i = X + bIdx * N;
  const T* dY_i = dY + bIdx * N;
  T* dX_i = dX + bIdx * N;

  using vec_t = aligned_vector<T, vec_size>;
  const vec_t* const X_i_vec_ptr = reinterpret_cast<const vec_t*>(X_i);
  const vec_t* const dY_i_vec_ptr = reinterpret_cast<const vec_t*>(dY_i);
  const vec_t* const gamma_vec_ptr = (gamma != nullptr) ? reinterpret_cast<const vec_t*>(gamma) : nullptr;
  vec_t* const dX_i_vec = reinterpret_cast<vec_t*>(dX_i);

  vec_t X_i_vec_reg, dY_i_vec_reg, gamma_vec_reg, dX_i_vec_reg;
  // without gamma the register keeps these ones
  for (int k = 0; k < vec_size; ++k) {
    gamma_vec_reg.val[k] = T(1);
  }

  T_ACC stats_x1{0}, stats_x2{0};
  unsigned int l = threadIdx.x * vec_size;
  for (; l + vec_size - 1 < N; l += blockDim.x * vec_size) {
    unsigned int vec_idx = l / vec_size;
    if (gamma != nullptr) {
      gamma_vec_reg = gamma_vec_ptr[vec_idx];
    }

    X_i_vec_reg = X_i_vec_ptr[vec_idx];
    dY_i_vec_reg = dY_i_vec_ptr[vec_idx];

    for (int k = 0; k < vec_size; ++k) {
      const auto gamma_val = static_cast<T_ACC>(gamma_vec_reg.val[k]);
      const auto c_h = static_cast<T_ACC>(X_i_vec_reg.val[k]);
      const auto c_loss = static_cast<T_ACC>(dY_i_vec_reg.val[k]);
      if constexpr (!rms_norm) {
        stats_x1 += c_loss * gamma_val;
        stats_x2 += c_loss * gamma_val * (c_h - mean_val) * rstd_val;
      } else {
        stats_x2 += c_loss * gamma_val * (c_h) * rstd_val;
      }
    }
  }

  // never runs: the host picks this kernel only when N % vec_size == 0
  for (; l < N; l++) {
    const auto gamma_val = (gamma != nullptr) ? static_cast<T_ACC>(gamma[l]) : T_ACC(1);
    const auto c_h = static_cast<T_ACC>(X_i[l]);
    const auto c_loss = static_cast<T_ACC>(dY_i[l]);
    if constexpr (!rms_norm) {
      stats_x1 += c_loss * gamma_val;
      stats_x2 += c_loss * gamma_val * (c_h - mean_val) * rstd_val;
    } else {
      stats_x2 += c_loss * gamma_val * (c_h) * rstd_val;
    }
  }
  REIMPL_TRACE(gi_sums, 0, -1, stats_x1, stats_x2);

  if constexpr (!rms_norm) {
    stats_x1 = cuda_utils::BlockReduceSum(stats_x1, reduce_buf);
  }
  stats_x2 = cuda_utils::BlockReduceSum(stats_x2, reduce_buf);
  if (threadIdx.x == 0) {
    if constexpr (!rms_norm) {
      reduce_buf[0] = stats_x1;
    }
    reduce_buf[1] = stats_x2;
  }
  __syncthreads();
  if constexpr (!rms_norm) {
    stats_x1 = reduce_buf[0];
  }
  stats_x2 = reduce_buf[1];
  REIMPL_TRACE(gi_stats, 0, -1, stats_x1, stats_x2);

  T_ACC fH = N;
  T_ACC term1 = (T_ACC(1) / fH) * rstd_val;

  l = threadIdx.x * vec_size;
  for (; l + vec_size - 1 < N; l += blockDim.x * vec_size) {
    unsigned int vec_idx = l / vec_size;
    if (gamma != nullptr) {
      gamma_vec_reg = gamma_vec_ptr[vec_idx];
    }

    X_i_vec_reg = X_i_vec_ptr[vec_idx];
    dY_i_vec_reg = dY_i_vec_ptr[vec_idx];

    for (int k = 0; k < vec_size; ++k) {
      const auto gamma_val = static_cast<T_ACC>(gamma_vec_reg.val[k]);
      const auto x = static_cast<T_ACC>(X_i_vec_reg.val[k]);
      const auto dy = static_cast<T_ACC>(dY_i_vec_reg.val[k]);

      T_ACC f_grad_input = fH * gamma_val * dy;
      if constexpr (!rms_norm) {
        f_grad_input -= (x - mean_val) * rstd_val * stats_x2;
        f_grad_input -= stats_x1;
      } else {
        f_grad_input -= (x) * rstd_val * stats_x2;
      }
      f_grad_input *= term1;
      dX_i_vec_reg.val[k] = f_grad_input;
      REIMPL_TRACE(gi_dx, (vec_idx - threadIdx.x) / blockDim.x * vec_size + k, l + k,
                   static_cast<T_ACC>(dX_i_vec_reg.val[k]));
    }

    dX_i_vec[vec_idx] = dX_i_vec_reg;
  }

  // never runs either (N % vec_size == 0); note the stride, blockDim.x rather than 1
  for (; l < N; l += blockDim.x) {
    const auto x = X_i[l];
    const auto dy = dY_i[l];
    const auto gamma_val = (gamma != nullptr) ? static_cast<T_ACC>(gamma[l]) : T_ACC(1);

    T_ACC f_grad_input = fH * gamma_val * dy;
    if constexpr (!rms_norm) {
      f_grad_input -= (x - mean_val) * rstd_val * stats_x2;
      f_grad_input -= stats_x1;
    } else {
      f_grad_input -= (x) * rstd_val * stats_x2;
    }
    f_grad_input *= term1;
    dX_i[l] = f_grad_input;
  }
}
// --8<-- [end:layer_norm_grad_input_kernel_vectorized]

// (upstream L601-L638, GammaBetaBackwardSimpleCUDAKernel, is launched only by the ROCm branch of
// LayerNormBackwardKernelImplInternal; CUDA builds never instantiate it, so it is not mirrored.)

// --8<-- [start:blockReduceGammaBetaBackwardsHelper]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L640-L708
// docs: upstream/layer_norm_kernel.md#blockReduceGammaBetaBackwardsHelper
// One tile of rows_per_block_y rows starting at M_start: each thread owns column thread_x and
// rows_per_thread_y consecutive rows. Lane r of the warp loads mean/rstd of the warp's r-th row;
// the accumulation loop fetches them with an indexed shuffle instead of a global load per row.
template <typename T, typename T_ACC,
          unsigned int block_dim_x,
          unsigned int block_dim_y,
          unsigned int rows_per_block_y,
          bool check_x,
          bool check_y,
          bool rms_norm>
__device__ __forceinline__ void blockReduceGammaBetaBackwardsHelper(
    int64_t M_start,
    int64_t M,
    int64_t N,
    const T* __restrict__ dY,
    const T* __restrict__ X,
    const T_ACC* __restrict__ mean,
    const T_ACC* __restrict__ rstd,
    T* __restrict__ dg,
    T* __restrict__ db,
    T_ACC& dg_sum,
    T_ACC& db_sum) {
  constexpr int rows_per_thread_y = rows_per_block_y / block_dim_y;
  int64_t thread_x = blockIdx.x * block_dim_x + threadIdx.x;

  int lane_id = (threadIdx.y * blockDim.x + threadIdx.x) & (kWarpSize - 1);
  int64_t mean_index = M_start + threadIdx.y * rows_per_thread_y;
  T_ACC warp_mean = 0, warp_rstd = 0;
  if (lane_id < rows_per_thread_y && mean_index + lane_id < M) {
    if constexpr (!rms_norm) {
      warp_mean = mean[mean_index + lane_id];
    }
    warp_rstd = rstd[mean_index + lane_id];
  }
  // the shuffles below read other lanes' warp_mean / warp_rstd
  WARP_SYNC();

  T_ACC dY_regs[rows_per_thread_y] = {0};
  T_ACC X_regs[rows_per_thread_y] = {0};
#pragma unroll
  for (int i = 0; i < rows_per_thread_y; ++i) {
    int64_t current_y = M_start + threadIdx.y * rows_per_thread_y + i;
    bool active = true;
    if (check_x && thread_x >= N) {
      active = false;
    }
    if (check_y && current_y >= M) {
      active = false;
    }
    if (active) {
      dY_regs[i] = dY[current_y * N + thread_x];
      X_regs[i] = X[current_y * N + thread_x];
    }
  }

  // rows outside the matrix left dY_regs[i] = 0, so they add exact zeros (or NaN if rstd is)
#pragma unroll
  for (int i = 0; i < rows_per_thread_y; ++i) {
    T_ACC rstd_reg = WARP_SHFL(warp_rstd, i, kWarpSize);
    if constexpr (!rms_norm) {
      T_ACC mean_reg = WARP_SHFL(warp_mean, i, kWarpSize);
      dg_sum += dY_regs[i] * (X_regs[i] - mean_reg) * rstd_reg;
      db_sum += dY_regs[i];
    } else {
      dg_sum += dY_regs[i] * (X_regs[i]) * rstd_reg;
    }
  }
}
// --8<-- [end:blockReduceGammaBetaBackwardsHelper]

// --8<-- [start:blockReduceGammaBetaBackwardsWithChecks]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L710-L744
// docs: upstream/layer_norm_kernel.md#blockReduceGammaBetaBackwardsWithChecks
// Grid-stride over tiles in M. Full tiles skip the row bound check; only the last, partial
// tile pays for it.
template <typename T, typename T_ACC,
          unsigned int block_dim_x,
          unsigned int block_dim_y,
          unsigned int rows_per_block_y,
          bool check_x,
          bool check_y,
          bool rms_norm>
__device__ __forceinline__ void blockReduceGammaBetaBackwardsWithChecks(
    int64_t M,
    int64_t N,
    const T* __restrict__ dY,
    const T* __restrict__ X,
    const T_ACC* __restrict__ mean,
    const T_ACC* __restrict__ rstd,
    T* __restrict__ dg,
    T* __restrict__ db,
    T_ACC& dg_sum,
    T_ACC& db_sum) {
  for (int64_t M_start = blockIdx.y * rows_per_block_y;
       M_start < M;
       M_start += rows_per_block_y * gridDim.y) {
    int64_t M_end = M_start + rows_per_block_y - 1;
    if (!check_y || M_end < M) {
      blockReduceGammaBetaBackwardsHelper<T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y, check_x, false, rms_norm>(
          M_start, M, N, dY, X, mean, rstd, dg, db, dg_sum, db_sum);
    } else {
      blockReduceGammaBetaBackwardsHelper<T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y, check_x, true, rms_norm>(
          M_start, M, N, dY, X, mean, rstd, dg, db, dg_sum, db_sum);
    }
    REIMPL_TRACE(gb_sums, (M_start - blockIdx.y * rows_per_block_y) / (rows_per_block_y * gridDim.y),
                 blockIdx.x * block_dim_x + threadIdx.x, dg_sum, db_sum);
  }
}
// --8<-- [end:blockReduceGammaBetaBackwardsWithChecks]

// --8<-- [start:GammaBetaBackwardCUDAKernelTemplate]
// upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L758-L867
// docs: upstream/layer_norm_kernel.md#GammaBetaBackwardCUDAKernelTemplate
// dgamma[j] = sum_i dY[i,j] * (X[i,j] - mean[i]) * rstd[i] and dbeta[j] = sum_i dY[i,j].
// Blocks tile the columns 32 wide (block_dim_x); threadIdx.y splits each tile's rows.
// Template flags: partial_reduction writes one partial sum per thread row (finished by the
// host's .sum(0)); aligned_grid (M % rows_per_block_y == 0 and N % block_dim_x == 0) drops all
// bound checks. Otherwise the block_dim_y partial sums of a column are transposed through
// shared memory (rows padded to block_dim_x + 1 floats against bank conflicts) and added by a
// warp's XOR-shuffle tree.
template <typename T, typename T_ACC,
          unsigned int block_dim_x, unsigned int block_dim_y,
          unsigned int rows_per_block_y,
          bool partial_reduction,
          bool aligned_grid,
          bool rms_norm>
__global__ void __launch_bounds__(block_dim_x * block_dim_y)
GammaBetaBackwardCUDAKernelTemplate(
    int64_t M,
    int64_t N,
    const T* __restrict__ dY,
    const T* __restrict__ X,
    const T_ACC* __restrict__ mean,
    const T_ACC* __restrict__ rstd,
    T* __restrict__ dg,
    T* __restrict__ db) {
  // a warp's lanes hold the mean/rstd of one thread row's rows: they must fit in one warp
  constexpr int rows_per_thread_y = rows_per_block_y / block_dim_y;
  static_assert(rows_per_thread_y <= kWarpSize);

  T_ACC dg_sum = 0;
  T_ACC db_sum = 0;

  if (aligned_grid) {
    blockReduceGammaBetaBackwardsWithChecks
        <T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y, false, false, rms_norm>(
            M, N, dY, X, mean, rstd, dg, db, dg_sum, db_sum);
  } else {
    // rows always need checks here; columns only in the last block of x
    if (blockIdx.x * block_dim_x + block_dim_x - 1 < N) {
      blockReduceGammaBetaBackwardsWithChecks
          <T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y, false, true, rms_norm>(
              M, N, dY, X, mean, rstd, dg, db, dg_sum, db_sum);
    } else {
      blockReduceGammaBetaBackwardsWithChecks
          <T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y, true, true, rms_norm>(
              M, N, dY, X, mean, rstd, dg, db, dg_sum, db_sum);
    }
  }

  int64_t thread_x = ((int64_t)blockIdx.x) * block_dim_x + threadIdx.x;

  // nothing to combine within the block: each thread writes its own sum (row thread_y)
  if (partial_reduction || (blockDim.y == 1 && gridDim.y == 1)) {
    if (aligned_grid || thread_x < N) {
      int64_t thread_y = ((int64_t)blockIdx.y) * blockDim.y + threadIdx.y;
      if (dg) {
        dg[thread_y * N + thread_x] = dg_sum;
      }
      if (db && !rms_norm) {
        db[thread_y * N + thread_x] = db_sum;
      }
      REIMPL_TRACE(gb_out, 0, thread_y * N + thread_x, static_cast<T_ACC>(static_cast<T>(dg_sum)),
                   static_cast<T_ACC>(static_cast<T>(db_sum)));
    }
  } else {
    static_assert(rows_per_thread_y <= C10_WARP_SIZE);
    alignas(sizeof(double)) extern __shared__ char s_data1[];
    T_ACC* s_data_typed = reinterpret_cast<T_ACC*>(&s_data1);
    T_ACC* s_dg;
    T_ACC* s_db;
    int padded_bx = (block_dim_x + 1);
    // thread (x, y) stores at [y][x]; column i is then read as [lane][i], lanes 0..block_dim_y-1
    s_dg = s_data_typed;
    s_db = s_data_typed + (padded_bx * block_dim_y);
    s_dg[threadIdx.y * padded_bx + threadIdx.x] = dg_sum;
    s_db[threadIdx.y * padded_bx + threadIdx.x] = db_sum;
    REIMPL_TRACE(gb_smem_write, 0, threadIdx.y * padded_bx + threadIdx.x, dg_sum, db_sum);
    __syncthreads();

    // each warp reduces columns warp_id, warp_id + warps, ...: one column per warp at a time
    static_assert(block_dim_x * block_dim_y % C10_WARP_SIZE == 0);
    constexpr int warps_available_to_reduce = block_dim_x * block_dim_y / C10_WARP_SIZE;
    int thread_id = threadIdx.y * block_dim_x + threadIdx.x;
    int warp_id = thread_id / C10_WARP_SIZE;
    int lane_id = thread_id & (C10_WARP_SIZE - 1);
#pragma unroll
    for (int i = warp_id; i < block_dim_x; i += warps_available_to_reduce) {
      // lanes >= block_dim_y hold garbage, but the XOR tree never mixes them into lane 0's group
      T_ACC reg_db, reg_dg;
      if (lane_id < block_dim_y) {
        reg_dg = s_dg[lane_id * padded_bx + i];
        reg_db = s_db[lane_id * padded_bx + i];
        REIMPL_TRACE(gb_smem_read, (i - warp_id) / warps_available_to_reduce, lane_id * padded_bx + i,
                     reg_dg, reg_db);
      }
#pragma unroll
      for (unsigned delta = block_dim_y >> 1; delta >= 1; delta >>= 1) {
        reg_dg += WARP_SHFL_XOR(reg_dg, delta, kWarpSize);
        reg_db += WARP_SHFL_XOR(reg_db, delta, kWarpSize);
#ifdef REIMPL_TRACING
        {
          // every lane shuffles (full mask); only lanes < block_dim_y hold defined sums, and only
          // they are recorded, as in the emulator
          const int partner = WARP_SHFL_XOR(reimpl_trace::thread(), delta, kWarpSize);
          if (lane_id < block_dim_y) {
            REIMPL_TRACE(gb_shfl_xor, (i - warp_id) / warps_available_to_reduce * 8 +
                         reimpl_trace::round_of(block_dim_y >> 1, delta), partner, reg_dg, reg_db);
          }
        }
#endif
      }
      int64_t out_index = ((int64_t)blockIdx.x) * block_dim_x + i;
      if (threadIdx.x == 0 && (aligned_grid || out_index < N)) {
        if (dg) {
          dg[out_index] = reg_dg;
        }
        if (db && !rms_norm) {
          db[out_index] = reg_db;
        }
        REIMPL_TRACE(gb_out, (i - warp_id) / warps_available_to_reduce, out_index,
                     static_cast<T_ACC>(static_cast<T>(reg_dg)), static_cast<T_ACC>(static_cast<T>(reg_db)));
      }
    }
  }
}
// --8<-- [end:GammaBetaBackwardCUDAKernelTemplate]


} // namespace

} // namespace at::native
