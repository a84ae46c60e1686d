// The reduce-then-broadcast scaffold shared by the ladder's kernels: a state type S (a float, a
// Welford state, softmax's (m, d)) and its merge go in; every thread of the warp or block gets the
// reduced state back. The state types bring their own `shfl_xor(S, mask)`.
#pragma once

namespace ladder {

constexpr unsigned FULL_MASK = 0xffffffffu;

__device__ __forceinline__ float shfl_xor(float v, int mask) { return __shfl_xor_sync(FULL_MASK, v, mask); }
__device__ __forceinline__ float2 shfl_xor(float2 v, int mask) {
  return make_float2(__shfl_xor_sync(FULL_MASK, v.x, mask), __shfl_xor_sync(FULL_MASK, v.y, mask));
}

// --8<-- [start:reduce_scaffold]
// Butterfly over the warp: afterwards every lane holds the whole warp's state, identical bits. The
// lower lane's state goes first, so both partners of a shuffle compute the same bits even where
// the merge does not commute bit for bit (Chan's, softmax's rescale); a merge that does (a float
// max or sum) says so with `commutes` and skips the choice.
template <typename Merge>
__host__ __device__ constexpr auto merge_commutes(int) -> decltype(Merge::commutes) { return Merge::commutes; }
template <typename Merge>
__host__ __device__ constexpr bool merge_commutes(long) { return false; }

template <typename S, typename Merge>
__device__ __forceinline__ S warp_all_reduce(S s, Merge merge) {
  const int lane = threadIdx.x & 31;
  for (int mask = 16; mask > 0; mask >>= 1) {
    S o = shfl_xor(s, mask);
    if constexpr (merge_commutes<Merge>(0)) {
      s = merge(s, o);
    } else {
      s = (lane & mask) ? merge(o, s) : merge(s, o);
    }
  }
  return s;
}

// Every warp's state through shared memory, merged pairwise (a tree of depth log2(warps)); the
// block's state is returned to every thread. `smem` holds one S per warp; a barrier at the end
// leaves it free for the caller.
template <typename S, typename Merge>
__device__ __forceinline__ S block_tree_reduce(S s, S* smem, Merge merge) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  s = warp_all_reduce(s, merge);
  if (lane == 0) smem[warp] = s;
  __syncthreads();
  for (int half = warps / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) smem[threadIdx.x] = merge(smem[threadIdx.x], smem[threadIdx.x + half]);
    __syncthreads();
  }
  S r = smem[0];
  __syncthreads();
  return r;
}

// The other block shape: each warp publishes its state, then every warp merges all the warps'
// states by a butterfly of its own (the same bits in every warp), so no tree and one barrier.
// `identity` pads the lanes past the last warp. No barrier at the end: a caller that reuses
// `smem` synchronises first.
template <typename S, typename Merge>
__device__ __forceinline__ S block_all_reduce(S s, S identity, S* smem, Merge merge) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  s = warp_all_reduce(s, merge);
  if (lane == 0) smem[warp] = s;
  __syncthreads();
  return warp_all_reduce(lane < warps ? smem[lane] : identity, merge);
}
// --8<-- [end:reduce_scaffold]

// The float merges that commute bit for bit (the one-read kernels' maximum and sums, BatchNorm's sums).
struct Max {
  static constexpr bool commutes = true;
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  static constexpr bool commutes = true;
  __device__ float operator()(float a, float b) const { return a + b; }
};

}  // namespace ladder
