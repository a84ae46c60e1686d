// Mirror of the Welford pieces of aten/src/ATen/native/SharedReduceOps.h (torch 2.11.0):
// WelfordData and WelfordOps, which RowwiseMomentsCUDAKernel reduces with.
#pragma once
#include "c10_shim.cuh"
#include "DeviceUtils.cuh"

namespace at::native {

// --8<-- [start:WelfordData]
// upstream: aten/src/ATen/native/SharedReduceOps.h#L79-L94
// docs: upstream/SharedReduceOps.md#WelfordData
// n counts in an integer (exact); nf is the same count as a float for combine(), where an int
// could overflow.
template <typename scalar_t, typename index_t>
struct WelfordData {
  scalar_t mean;
  scalar_t m2;
  index_t n;
  scalar_t nf;

  C10_HOST_DEVICE WelfordData() : mean(0), m2(0), n(0), nf(0) {}

  C10_HOST_DEVICE WelfordData(scalar_t mean, scalar_t m2, index_t n, scalar_t nf)
      : mean(mean), m2(m2), n(n), nf(nf) {}
};
// --8<-- [end:WelfordData]

// --8<-- [start:WelfordOps]
// upstream: aten/src/ATen/native/SharedReduceOps.h#L97-L161
// docs: upstream/SharedReduceOps.md#WelfordOps
template <typename scalar_t, typename acc_scalar_t, typename index_t, typename res_t>
struct WelfordOps {
  acc_scalar_t correction;
  bool take_sqrt;
 public:
  using acc_t = WelfordData<acc_scalar_t, index_t>;
  // One element in: a true division by the new count (unlike cuWelfordOnlineSum's reciprocal).
  inline C10_DEVICE acc_t reduce(acc_t acc, scalar_t data, index_t /*idx*/) const {
    index_t new_n = acc.n + 1;
    acc_scalar_t new_nf = static_cast<acc_scalar_t>(new_n);
    acc_scalar_t delta = data - acc.mean;
    acc_scalar_t new_mean = acc.mean + delta / new_nf;
    acc_scalar_t new_delta = data - new_mean;
    return {
      new_mean,
      acc.m2 + delta * new_delta,
      new_n,
      new_nf,
    };
  }
  // Chan et al.'s pairwise merge; an empty side returns the other unchanged.
  inline C10_DEVICE acc_t combine(acc_t a, acc_t b) const {
    if (a.nf == 0) {
      return b;
    }
    if (b.nf == 0) {
      return a;
    }
    acc_scalar_t delta = b.mean - a.mean;
    acc_scalar_t new_count = a.nf + b.nf;
    acc_scalar_t nb_over_n = b.nf / new_count;
    return {
      a.mean + delta * nb_over_n,
      a.m2 + b.m2 + delta * delta * a.nf * nb_over_n,
      // n no longer fits the merged count in general; upstream marks it -1.
      -1,
      new_count
    };
  }
  // (variance, mean): variance divides by nf - correction (correction is 0 for LayerNorm).
  inline C10_DEVICE res_t project(acc_t acc) const __ubsan_ignore_float_divide_by_zero__ {
    const auto mean = static_cast<scalar_t>(acc.mean);
    const auto divisor = acc.nf > correction ? acc.nf - correction : 0;
    const auto var = acc.m2 / divisor;
    res_t results(take_sqrt ? ::sqrt(var) : var, mean);
    return results;
  }

  static C10_DEVICE acc_t translate_idx(acc_t acc, int64_t /*base_idx*/) {
    return acc;
  }

  inline __device__ acc_t warp_shfl_down(acc_t acc, int offset) const {
    return {
      WARP_SHFL_DOWN(acc.mean, offset),
      WARP_SHFL_DOWN(acc.m2, offset),
      WARP_SHFL_DOWN(acc.n, offset),
      WARP_SHFL_DOWN(acc.nf, offset)
    };
  }
  C10_HOST_DEVICE WelfordOps(acc_scalar_t correction, bool take_sqrt)
      : correction(correction), take_sqrt(take_sqrt) {}
};
// --8<-- [end:WelfordOps]

} // namespace at::native
