// What the study ladder's LayerNorm rungs share: their contract and the affine step. The rungs go
// from the textbook loop to apex's fused shape, one idea each, one file each, named after the
// kernel it holds; reimpl/ladder/registry.py declares every rung once (its idea, whose idea it is,
// its launch, its error-bound family). They are ours, written to teach, and NOT bit-identical to
// torch (the ladder pages give each rung's measured error); torch's own kernel is the mirror in
// reimpl/mirror/cuda/.
//
// The registry lists the rungs in climbing order; this header lists none, so that adding a rung
// touches its own file and its entry only.
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
