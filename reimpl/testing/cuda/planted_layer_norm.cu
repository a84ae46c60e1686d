// Torch 2.11's vectorized LayerNorm/RMSNorm forward, restated compactly, with one change planted
// per build: the GPU side of the diagnosis's proof (reimpl/testing/planted.py). With no PLANT_*
// macro set it gives torch's bits (a GPU test holds it to that); each macro below, or a compiler
// option (-ftz=true, -fmad=false), changes exactly one step, the same step that the matching switch
// of reimpl/emulator/variants.py changes. Statements follow variants.py's order.
//
// Assumptions: blockDim = (32, PLANT_BLOCK_Y), one row per block, N % 4 == 0, X, Y, gamma and beta
// 16-byte aligned (the host checks); gamma and beta both given or both absent for LayerNorm.
#include "common.cuh"  // the ladder's storage-type conversions (reimpl/ladder/cuda/)

#ifndef PLANT_BLOCK_Y
#define PLANT_BLOCK_Y 4
#endif
#if PLANT_FLOAT64
typedef double acc_t;  // statistics and the affine step in double; stored through float
#else
typedef float acc_t;
#endif

using ladder::from_f;
using ladder::to_f;

template <typename T, int n> struct __align__(sizeof(T) * n) vec { T val[n]; };

struct State { acc_t mean, sigma2, count; };

// cuWelfordCombine(dataB, dataA), as torch writes it
__device__ __forceinline__ State combine(State B, State A) {
  acc_t delta = B.mean - A.mean;
  acc_t count = A.count + B.count;
  acc_t mean, sigma2;
  if (count > acc_t(0)) {
    acc_t coef = acc_t(1) / count;
    acc_t nA = A.count * coef;
    acc_t nB = B.count * coef;
    mean = nA * A.mean + nB * B.mean;
    sigma2 = A.sigma2 + B.sigma2 + delta * delta * A.count * nB;
  } else {
    mean = acc_t(0);
    sigma2 = acc_t(0);
  }
  return {mean, sigma2, count};
}

// Merge a per-thread value across the block (shuffles in each warp, then lane 0s through shared
// memory); every thread gets the block's result. Sum for the plain sums, combine for Welford.
template <bool welford>
__device__ State block_merge(State s, State* slots) {
  const int tx = threadIdx.x, ty = threadIdx.y;
#if PLANT_TREE_ASCENDING
  for (int off = 1; off < 32; off <<= 1) {
#else
  for (int off = 16; off > 0; off >>= 1) {
#endif
    State o{__shfl_down_sync(0xffffffff, s.mean, off), __shfl_down_sync(0xffffffff, s.sigma2, off),
            __shfl_down_sync(0xffffffff, s.count, off)};
#if PLANT_TREE_SWAPPED
    State B = o, A = s;
#else
    State B = s, A = o;
#endif
    s = welford ? combine(B, A) : State{B.mean + A.mean, B.sigma2 + A.sigma2, acc_t(0)};
  }
  for (int off = PLANT_BLOCK_Y / 2; off > 0; off /= 2) {
    if (tx == 0 && ty >= off && ty < 2 * off) slots[ty - off] = s;
    __syncthreads();
    if (tx == 0 && ty < off) {
#if PLANT_TREE_SWAPPED
      State B = slots[ty], A = s;
#else
      State B = s, A = slots[ty];
#endif
      s = welford ? combine(B, A) : State{B.mean + A.mean, B.sigma2 + A.sigma2, acc_t(0)};
    }
    __syncthreads();
  }
  if (tx == 0 && ty == 0) slots[PLANT_BLOCK_Y] = s;
  __syncthreads();
  State out = slots[PLANT_BLOCK_Y];
  __syncthreads();
  return out;
}

template <typename T, bool rms_norm>
__global__ void planted_layer_norm(const T* __restrict__ X, const T* __restrict__ gamma,
                                   const T* __restrict__ beta, float* mean_out, float* rstd_out,
                                   T* __restrict__ Y, const int N, const float eps_f) {
  using V = vec<T, 4>;
  __shared__ State slots[PLANT_BLOCK_Y + 1];
  const int numx = 32 * PLANT_BLOCK_Y;
  const int thrx = threadIdx.x + threadIdx.y * 32;
  const int nvec = N / 4;
  const V* Xv = reinterpret_cast<const V*>(X + (long long)blockIdx.x * N);
  const acc_t n = acc_t(N);
  const acc_t eps = acc_t(eps_f);
  acc_t mean, var;
#if PLANT_TWO_PASS || PLANT_ONE_PASS
  if (!rms_norm) {
    acc_t s = 0, q = 0;
    for (int i = thrx; i < nvec; i += numx) {
      V d = Xv[i];
#pragma unroll
      for (int ii = 0; ii < 4; ii++) {
        acc_t x = to_f(d.val[ii]);
        s += x;
#if PLANT_ONE_PASS
        q += x * x;
#endif
      }
    }
    State t = block_merge<false>(State{s, q, 0}, slots);
    mean = t.mean / n;
#if PLANT_ONE_PASS
    acc_t ex2 = t.sigma2 / n;
    var = fmax(fma(-mean, mean, ex2), acc_t(0));
#else
    q = 0;
    for (int i = thrx; i < nvec; i += numx) {
      V d = Xv[i];
#pragma unroll
      for (int ii = 0; ii < 4; ii++) {
        acc_t c = acc_t(to_f(d.val[ii])) - mean;
        q += c * c;
      }
    }
    var = block_merge<false>(State{0, q, 0}, slots).sigma2 / n;
#endif
  } else
#endif
  {
    State w{0, 0, 0};
    for (int i = thrx; i < nvec; i += numx) {
      V d = Xv[i];
#pragma unroll
      for (int ii = 0; ii < 4; ii++) {
        acc_t x = to_f(d.val[ii]);
        if (rms_norm) {
          w.sigma2 = w.sigma2 + x * x;
        } else {  // cuWelfordOnlineSum
          acc_t delta = x - w.mean;
          acc_t new_count = w.count + acc_t(1);
          acc_t new_mean = w.mean + delta * (acc_t(1) / new_count);
          w = State{new_mean, w.sigma2 + delta * (x - new_mean), new_count};
        }
      }
    }
    State t = rms_norm ? block_merge<false>(State{0, w.sigma2, 0}, slots) : block_merge<true>(w, slots);
    mean = rms_norm ? acc_t(0) : t.mean;
    var = t.sigma2 / n;
  }
#if PLANT_EPS_OUTSIDE
  const acc_t rstd = acc_t(1) / (sqrt(var) + eps);
#elif PLANT_DIV_SQRT
  const acc_t rstd = acc_t(1) / sqrt(var + eps);
#else
  const acc_t rstd = rsqrt(var + eps);
#endif
  const V* Gv = reinterpret_cast<const V*>(gamma);
  const V* Bv = reinterpret_cast<const V*>(beta);
  V* Yv = reinterpret_cast<V*>(Y + (long long)blockIdx.x * N);
  for (int i = thrx; i < nvec; i += numx) {
    V d = Xv[i];
    V out;
#pragma unroll
    for (int ii = 0; ii < 4; ii++) {
      acc_t x = to_f(d.val[ii]);
#if PLANT_CAST_PER_OP
      T r = from_f<T>(float(rms_norm ? rstd * x : rstd * (x - mean)));
      if (gamma != nullptr) r = from_f<T>(float(acc_t(to_f(Gv[i].val[ii])) * acc_t(to_f(r))));
      if (!rms_norm && beta != nullptr) r = from_f<T>(float(acc_t(to_f(r)) + acc_t(to_f(Bv[i].val[ii]))));
      out.val[ii] = r;
#else
      acc_t y;
      if (rms_norm) {
        y = gamma != nullptr ? acc_t(to_f(Gv[i].val[ii])) * (rstd * x) : rstd * x;
      } else if (gamma != nullptr) {
        y = acc_t(to_f(Gv[i].val[ii])) * (rstd * (x - mean)) + acc_t(to_f(Bv[i].val[ii]));
      } else {
        y = rstd * (x - mean);
      }
      out.val[ii] = from_f<T>(float(y));
#endif
    }
    Yv[i] = out;
  }
  if (thrx == 0) {
    if (!rms_norm) mean_out[blockIdx.x] = float(mean);
    rstd_out[blockIdx.x] = float(rstd);
  }
}
