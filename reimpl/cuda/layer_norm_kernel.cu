// Mirror of aten/src/ATen/native/cuda/layer_norm_kernel.cu at torch 2.11.0
// (git 70d99e998b4955e0049d13a98d77ae1b14db1f45): the device half. The host half (dispatch,
// launch configuration) is Python, in reimpl/layer_norm_kernel.py, in the same order.
// Each symbol below carries the upstream line range it mirrors and its docs anchor.
// ROCm-only branches upstream are left out: this mirror is for NVIDIA GPUs.
//
// Index of the forward kernels, in upstream order:
//   RowwiseMomentsCUDAKernel      fallback path, pass 1: per-row mean/rstd with WelfordOps + BlockReduce
//   LayerNormForwardCUDAKernel    fallback path, pass 2: y = (x - mean) * rstd * gamma + beta
//   vectorized_layer_norm_kernel  fast path: one block per row, compute_stats then normalize, 4-wide loads
#include "c10_shim.cuh"
#include "DeviceUtils.cuh"
#include "SharedReduceOps.h"
#include "block_reduce.cuh"
#include "thread_constants.h"

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
    } else {
      // mean of squares recovered as var + mean^2 (Welford ran on x, not x^2)
      rstd[i] = c10::cuda::compat::rsqrt(m2 + m1 * m1 + eps);
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
    }
  }
  // within each warp: lane l takes lane l+offset's state, offsets 16, 8, 4, 2, 1
  for (int offset = (C10_WARP_SIZE >> 1); offset > 0; offset >>= 1) {
    WelfordDataLN wdB{WARP_SHFL_DOWN(wd.mean, offset), WARP_SHFL_DOWN(wd.sigma2, offset),
                      WARP_SHFL_DOWN(wd.count, offset)};
    wd = cuWelfordCombine<rms_norm>(wd, wdB);
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
      }
      __syncthreads();
      // warps [0, offset) fold in their partner's state
      if (threadIdx.x == 0 && threadIdx.y < offset) {
        WelfordDataLN wdB{meansigmabuf[2 * threadIdx.y],
                          meansigmabuf[2 * threadIdx.y + 1],
                          countbuf[threadIdx.y]};
        wd = cuWelfordCombine<rms_norm>(wd, wdB);
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

  using vec_t = aligned_vector<T, vec_size>;
  const vec_t* X_vec = reinterpret_cast<const vec_t*>(block_row);
  const vec_t* gamma_vec = (gamma != nullptr) ? reinterpret_cast<const vec_t*>(gamma) : nullptr;
  const vec_t* beta_vec = (beta != nullptr) ? reinterpret_cast<const vec_t*>(beta) : nullptr;
  vec_t* Y_vec = reinterpret_cast<vec_t*>(Y + i1 * N);

  const int numx = blockDim.x * blockDim.y;
  const int thrx = threadIdx.x + threadIdx.y * blockDim.x;
  const int n_vec_to_read = N / vec_size;

  T_ACC rstd_val = c10::cuda::compat::rsqrt(wd.sigma2 + eps);

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

} // namespace

} // namespace at::native
