// What the fast forward and grad-input kernels share: a row held as 32-bit words, each element
// converted with T's own conversion when used. None of it rounds anything: copies and exact
// conversions keep every bit.
#pragma once
#include "layer_norm_kernel.cu"

namespace reimpl_fast {

using at::native::aligned_vector;
using at::native::vec_size;

// A row's 4-wide vector kept as 32-bit words (two per vector for 16-bit types). Held as the
// type's own struct, the compiler splits each 16-bit element into a register of its own (4 instead
// of 2 per vector); as words it keeps them packed. Each element still converts through T's own
// conversion to float, from the same 16 bits.
template <typename T>
using words_t = aligned_vector<unsigned int, sizeof(T) == 4 ? 4 : 2>;

// One element of a 32-bit word: the float itself, or a 16-bit type's low (half 0) or high (half 1)
// element, converted with T's own conversion.
template <typename T>
__device__ __forceinline__ float word_element(const unsigned int w, const int half) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(w);
  } else if constexpr (std::is_same_v<T, c10::BFloat16>) {
    // bfloat16 -> float places the 16 bits on top of 16 zero bits (exact; what the SASS of T's own
    // conversion does with shifts): one instruction per element instead of two for the high half
    return __uint_as_float(half ? (w & 0xffff0000u) : (w << 16));
  } else {
    const unsigned short bits = half ? (unsigned short)(w >> 16) : (unsigned short)(w & 0xffffu);
    return static_cast<float>(T(bits, typename T::from_bits_t()));
  }
}

template <typename T>
__device__ __forceinline__ float element(const words_t<T>& v, const int ii) {
  return sizeof(T) == 4 ? word_element<T>(v.val[ii], 0) : word_element<T>(v.val[ii / 2], ii % 2);
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

// 16 bytes (a chunk of a row, or a vector of fp32), or 8 (a vector of four 16-bit elements), from global to shared memory without passing through
// registers (cp.async; the 16-byte form bypasses L1).
template <typename W>
__device__ __forceinline__ void copy_to_shared(W* dst, const W* src) {
  const unsigned int d = static_cast<unsigned int>(__cvta_generic_to_shared(dst));
  if constexpr (sizeof(W) == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src));
  } else {
    static_assert(sizeof(W) == 8, "a vector of four 16-bit elements");
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d), "l"(src));
  }
}

}  // namespace reimpl_fast
