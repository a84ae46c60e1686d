// What the study ladder's LayerNorm rungs share: their contract and the affine step. The rungs go
// from the textbook loop to apex's fused shape, one idea each, one file each, named after the
// kernel it holds; reimpl/ladder/registry.py declares every rung once (its idea, whose idea it is,
// its launch, its error-bound family). They are ours, written to teach, and NOT bit-identical to
// torch (the ladder pages give each rung's measured error); torch's own kernel is the mirror in
// reimpl/mirror/cuda/.
//
//   rung 1  ln_naive_two_pass.cu  one thread per row: a mean loop, a variance loop, a normalise loop
//   rung 2  ln_warp_sums.cu       one warp per row; sum and sum of squares in one pass, shuffle-reduced
//   rung 3  ln_warp_welford.cu    one warp per row; Welford per lane, lanes merged with Chan's formula
//   rung 4  ln_block_welford.cu   one block per row; warps merged through a shared-memory tree
//   rung 5  ln_block_cached.cu    rung 4 with the row kept in shared memory: one global read
//   rung 6  ln_block_vec.cu       rung 5 with 128-bit loads and stores
//   rung 7  ln_apex.cu            apex's shape: (32, 4) blocks striding over rows, chunked Welford,
//                                 then apply (cuWelfordMuSigma2 / cuApplyLayerNorm's structure)
//
// Common contract (the launcher in reimpl/ladder/rungs.py): X is M x N, contiguous; W and B are
// N-vectors or nullptr; Y has X's shape; mean and rstd are M floats. Statistics are float whatever T
// is. rms_norm (ln_warp_sums' template parameter): no mean is subtracted, mean is not written.
#pragma once
#include "common.cuh"

namespace ladder {

// y = xhat * w + b, each factor optional (nullptr: LayerNorm without elementwise affine)
template <typename T>
__device__ __forceinline__ float affine(float xhat, const T* W, const T* B, int64_t j) {
  float y = xhat;
  if (W != nullptr) y = y * to_f(W[j]);
  if (B != nullptr) y = y + to_f(B[j]);
  return y;
}

}  // namespace ladder
