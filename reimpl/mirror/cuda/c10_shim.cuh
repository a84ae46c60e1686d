// c10_shim.cuh -- the few pieces of c10 (and of the C++ standard library) that the mirrored
// files use, written for NVRTC, which compiles without libstdc++ or c10's headers.
// This file has no upstream twin: each definition below stands in for the named c10/std one
// and keeps its device-side semantics (conversions, operator promotion), not its full API.
// docs: numerics.md#c10_shim
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>

// LP64: torch's int64_t is `long`, so kernel signatures (and mangled names) match.
typedef long int64_t;
typedef unsigned long uint64_t;
typedef unsigned int uint32_t;

// --- std: only what the mirrored code names -------------------------------------------------
namespace std {
template <class A, class B> inline constexpr bool is_same_v = false;
template <class A> inline constexpr bool is_same_v<A, A> = true;
template <bool C, class R = void> struct enable_if {};
template <class R> struct enable_if<true, R> { typedef R type; };
template <bool C, class R = void> using enable_if_t = typename enable_if<C, R>::type;
// RowwiseMomentsCUDAKernel keeps raw storage for WelfordData in shared memory.
template <unsigned long Len, unsigned long Align> struct aligned_storage {
  struct type { alignas(Align) unsigned char data[Len]; };
};
} // namespace std

// --- thrust: pair / tie as WelfordOps::project and RowwiseMomentsCUDAKernel use them --------
namespace thrust {
template <class A, class B> struct pair {
  A first; B second;
  __host__ __device__ pair(A a, B b) : first(a), second(b) {}
};
template <class A, class B> struct tie_t {
  A& first; B& second;
  __host__ __device__ tie_t& operator=(const pair<A, B>& p) { first = p.first; second = p.second; return *this; }
};
template <class A, class B> __host__ __device__ tie_t<A, B> tie(A& a, B& b) { return {a, b}; }
} // namespace thrust

#define C10_HOST_DEVICE __host__ __device__
#define C10_DEVICE __device__
#define C10_WARP_SIZE 32
#define __ubsan_ignore_float_divide_by_zero__
// Device asserts trap the kernel as c10's CUDA_KERNEL_ASSERT does (through __assertfail).
#define CUDA_KERNEL_ASSERT(cond) do { if (!(cond)) { __trap(); } } while (0)

namespace c10 {

// c10::Half: 16-bit storage; converts through the CUDA intrinsics c10 uses on the device.
struct alignas(2) Half {
  unsigned short x;
  struct from_bits_t {};
  Half() = default;
  __device__ Half(unsigned short bits, from_bits_t) : x(bits) {}
  __device__ Half(float value) : x(__half_as_ushort(__float2half(value))) {}
  __device__ operator float() const { return __half2float(__ushort_as_half(x)); }
};

// c10::BFloat16: on sm_80+ c10 rounds with __float2bfloat16 (round to nearest even).
struct alignas(2) BFloat16 {
  unsigned short x;
  struct from_bits_t {};
  BFloat16() = default;
  __device__ BFloat16(unsigned short bits, from_bits_t) : x(bits) {}
  __device__ BFloat16(float value) : x(__bfloat16_as_ushort(__float2bfloat16(value))) {}
  __device__ operator float() const { return __bfloat162float(__ushort_as_bfloat16(x)); }
};

// c10's arithmetic on reduced-precision types: Half op Half is done in float and rounded back;
// Half op float (or double, or int) promotes, as in c10/util/Half-inl.h and BFloat16-inl.h.
#define REIMPL_C10_REDUCED_OPS(R)                                                            \
  __device__ inline R operator+(const R& a, const R& b) { return static_cast<float>(a) + static_cast<float>(b); } \
  __device__ inline R operator-(const R& a, const R& b) { return static_cast<float>(a) - static_cast<float>(b); } \
  __device__ inline R operator*(const R& a, const R& b) { return static_cast<float>(a) * static_cast<float>(b); } \
  __device__ inline R operator/(const R& a, const R& b) { return static_cast<float>(a) / static_cast<float>(b); } \
  __device__ inline float operator+(R a, float b) { return static_cast<float>(a) + b; }   \
  __device__ inline float operator-(R a, float b) { return static_cast<float>(a) - b; }   \
  __device__ inline float operator*(R a, float b) { return static_cast<float>(a) * b; }   \
  __device__ inline float operator/(R a, float b) { return static_cast<float>(a) / b; }   \
  __device__ inline float operator+(float a, R b) { return a + static_cast<float>(b); }   \
  __device__ inline float operator-(float a, R b) { return a - static_cast<float>(b); }   \
  __device__ inline float operator*(float a, R b) { return a * static_cast<float>(b); }   \
  __device__ inline float operator/(float a, R b) { return a / static_cast<float>(b); }   \
  __device__ inline float& operator+=(float& a, const R& b) { return a += static_cast<float>(b); } \
  __device__ inline float& operator-=(float& a, const R& b) { return a -= static_cast<float>(b); } \
  __device__ inline float& operator*=(float& a, const R& b) { return a *= static_cast<float>(b); }
REIMPL_C10_REDUCED_OPS(Half)
REIMPL_C10_REDUCED_OPS(BFloat16)
#undef REIMPL_C10_REDUCED_OPS

namespace cuda::compat {
// c10::cuda::compat::rsqrt: the approximate rsqrtf for float, rsqrt for double.
__device__ inline float rsqrt(float x) { return ::rsqrtf(x); }
__device__ inline double rsqrt(double x) { return ::rsqrt(x); }
} // namespace cuda::compat

} // namespace c10

namespace at {
using c10::Half;
using c10::BFloat16;
// acc_type<T, /*is_cuda=*/true>: reduced types and float accumulate in float, double in double.
template <typename T, bool is_cuda> struct AccumulateType { using type = T; };
template <> struct AccumulateType<c10::Half, true> { using type = float; };
template <> struct AccumulateType<c10::BFloat16, true> { using type = float; };
template <typename T, bool is_cuda> using acc_type = typename AccumulateType<T, is_cuda>::type;
} // namespace at
