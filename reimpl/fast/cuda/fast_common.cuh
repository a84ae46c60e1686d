// What the fast forward and grad-input kernels share: a row held as 32-bit words, each element
// converted with T's own conversion when used, and the loads that read a row once. None of it
// rounds anything: loads, copies and exact conversions keep every bit.
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

template <typename T>
__device__ __forceinline__ float element(const words_t<T>& v, const int ii) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(v.val[ii]);
  } else if constexpr (std::is_same_v<T, c10::BFloat16>) {
    // bfloat16 -> float places the 16 bits on top of 16 zero bits (exact; what the SASS of T's own
    // conversion does with shifts): one instruction per element instead of two for the high half
    const unsigned int w = v.val[ii / 2];
    return __uint_as_float((ii % 2) ? (w & 0xffff0000u) : (w << 16));
  } else {
    const unsigned int w = v.val[ii / 2];
    const unsigned short bits = (ii % 2) ? (unsigned short)(w >> 16) : (unsigned short)(w & 0xffffu);
    return static_cast<float>(T(bits, typename T::from_bits_t()));
  }
}

// A row word, read once. keep_out_of_l1: the load does not allocate in L1 (ld.global.nc with
// L1::no_allocate), so the weights, which every block of the SM reads again, stay there. It
// matters where a thread holds 32 fp32 vectors: three 64 KB rows per SM stream through an L1 that
// also has to keep 128 KB of gamma and beta (H100: fp32 8192 x 16384 LayerNorm, 88% -> 95% of copy;
// results/fast_experiments.json). Elsewhere it gained nothing, so the plain load stays.
template <bool keep_out_of_l1, typename W>
__device__ __forceinline__ W load_once(const W* p) {
  if constexpr (keep_out_of_l1) {
    W v;
    if constexpr (sizeof(W) == 16) {
      asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
          : "=r"(v.val[0]), "=r"(v.val[1]), "=r"(v.val[2]), "=r"(v.val[3]) : "l"(p));
    } else {
      asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.val[0]), "=r"(v.val[1]) : "l"(p));
    }
    return v;
  } else {
    return *p;
  }
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

}  // namespace reimpl_fast
