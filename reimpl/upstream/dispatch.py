"""What is known of the host dispatch of newer torch releases, which their cubins cannot show.

No release tag newer than the pin is stored, but dated copies of layer_norm_kernel.cu in public forks
are; they were read function by function against the pin and their facts are recorded in
reference/host_dispatch.json: line ranges, what changed, what that does to launches on NVIDIA GPUs,
and which copy stands for which release, with how sure that is. What stands beside them:
- the kernels themselves (reimpl/upstream/releases.py, tests/gpu/test_releases_gpu.py): under our
  2.11 dispatch, every kernel 2.11 would launch exists in each newer release, and gives the
  mirror's bits on the parity groups;
- inputs past 2^32 elements on the GPU (results/large_tensor.json, reimpl/checks/large_tensor.py).

`RELEASES` says, per release, what a user of it gets and how that is known: `measured` (run on the
GPU), `read` (from the copy that stands for it), `inferred` (from identical SASS or from the copies
around it). The doctor and the releases page print it.
"""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOST_JSON = ROOT / "reference" / "host_dispatch.json"
LARGE_JSON = ROOT / "results" / "large_tensor.json"

SOURCES = {
    "pytorch/pytorch#186956": "[ROCm] Fix layer_norm fallback launch limit (closed 2026-06-10): bounds the ROCm "
                              "fallback grid and walks rows in the kernel; states that the CUDA fallback launch "
                              "is unchanged. Matches 2.14.1, whose RowwiseMomentsCUDAKernel and "
                              "LayerNormForwardCUDAKernel take a leading int64 that their sm_90 SASS never reads.",
}

# per release: (the host dispatch, how known), (inputs past 2^32 elements, how known)
RELEASES = {
    "2.11.0": (("the pin: the host mirror is its host code", "read"),
               ("rows that start at element 2^32 or later come out wrong on the vectorized forward and in dX "
                "(their offset wraps in 32 bits)", "measured")),
    "2.12.1": (("as 2.11's: the copy that stands for it (bvillasen/pytorch@1718974f) matches the mirror statement "
                "for statement", "read"),
               ("as 2.11.0: its kernels' SASS is 2.11's, so the same rows wrap", "inferred")),
    "2.13.0": (("the same launches as 2.11 on NVIDIA: it lies between two copies (laifenxiawucha, May-June 2026, "
                "and ahmedtaha100, July 2026) whose NVIDIA launches are 2.11's", "read"),
               ("correct rows: the copies of its period form row offsets in 64 bits, and its cubin's "
                "floating-point sequences changed in exactly those kernels; not run", "inferred")),
    "2.14.1": (("the same launches as 2.11 on NVIDIA but for the huge-M GammaBeta buffers (M > 65536, N <= 2111 on "
                "an H100, with a multi-dimensional normalized_shape or dbeta without dgamma), taken from the copies of "
                "July and September 2026; its fallback forward kernels take one more argument", "read"),
               ("correct rows: its own kernels, run under the host mirror, give every checked row past "
                "2^32 the bits of the row alone", "measured")),
}

# what torch_versions.json repeats per release (short)
DISPATCH_DIFFERENCES = {
    "2.13.0": ["64 GammaBeta instantiations (flag combinations never launched on NVIDIA) are gone: the flag is "
               "chosen at compile time, with 2.11's run-time value (reference/host_dispatch.json)"],
    "2.14.1": ["RowwiseMomentsCUDAKernel and LayerNormForwardCUDAKernel take one more int64 first (unread on "
               "CUDA; the ROCm grid-stride change, pytorch/pytorch#186956)",
               "the huge-M GammaBeta path sizes each scratch buffer by N from its own gradient "
               "(reimpl/mirror/release.py reproduces it)",
               "as in 2.13.0, 64 GammaBeta instantiations are gone"],
}


def host_facts() -> dict | None:
    return json.loads(HOST_JSON.read_text()) if HOST_JSON.is_file() else None


def large_tensor_results() -> dict | None:
    return json.loads(LARGE_JSON.read_text()) if LARGE_JSON.is_file() else None
