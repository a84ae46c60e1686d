"""What is known of the host dispatch of newer torch releases, which their cubins cannot show.

No copy of layer_norm_kernel.cu newer than the pin could be read here (the one stored copy predates
2.11), so no release's host code was compared line by line with 2.11's. What stands instead:
- the kernels themselves (reimpl/upstream/releases.py, tests/gpu/test_releases_gpu.py): under our
  2.11 dispatch, every kernel 2.11 would launch exists in each newer release, and gives the
  mirror's bits on the parity groups;
- one public change to the launch code, named in SOURCES, which explains 2.14's extra argument.
DISPATCH_DIFFERENCES lists, per release, what a user of it should know about its dispatch.
"""
from __future__ import annotations

SOURCES = {
    "pytorch/pytorch#186956": "[ROCm] Fix layer_norm fallback launch limit (closed 2026-06-10): bounds the ROCm "
                              "fallback grid and walks rows in the kernel; states that the CUDA fallback launch "
                              "is unchanged. Matches 2.14.1, whose RowwiseMomentsCUDAKernel and "
                              "LayerNormForwardCUDAKernel take a leading int64 that their sm_90 SASS never reads.",
}

DISPATCH_DIFFERENCES = {
    "2.13.0": ["64 GammaBeta instantiations (flag combinations) are gone; none of them was launched by 2.11's "
               "dispatch on the cases run, but the host code that chooses tiles was not read"],
    "2.14.1": ["RowwiseMomentsCUDAKernel and LayerNormForwardCUDAKernel take one more int64 first (unread on "
               "CUDA; the ROCm grid-stride change, pytorch/pytorch#186956)",
               "as in 2.13.0, 64 GammaBeta instantiations are gone"],
}
