"""Build reference/upstream.json: for every upstream symbol we mirror, its file, line range at the
pin, our mirroring file and section, and its docs anchor.

Inputs (ignored cache, see reference/README.md):
  .cache/torch-2.11-headers/   headers copied from the torch 2.11.0+cu130 wheel on the GPU machine
  .cache/upstream-candidates/benediktjohannes/line_ranges.json   line table of the nearest stored
      copy of layer_norm_kernel.cu (the pinned text itself is not in the search index)
Run: python scripts/build_manifest.py
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache"
PIN = "70d99e998b4955e0049d13a98d77ae1b14db1f45"

HEADERS = {  # upstream path -> path inside the wheel's include/
    "aten/src/ATen/cuda/DeviceUtils.cuh": "ATen/cuda/DeviceUtils.cuh",
    "aten/src/ATen/native/cuda/thread_constants.h": "ATen/native/cuda/thread_constants.h",
    "aten/src/ATen/native/SharedReduceOps.h": "ATen/native/SharedReduceOps.h",
    "aten/src/ATen/native/cuda/block_reduce.cuh": "ATen/native/cuda/block_reduce.cuh",
    "aten/src/ATen/native/layer_norm.h": "ATen/native/layer_norm.h",
}
LN = "aten/src/ATen/native/cuda/layer_norm_kernel.cu"

# symbol -> (upstream file, declaration regex or None for the layer_norm_kernel.cu table, our file, docs page)
SYMBOLS = {
    "WARP_SYNC": ("aten/src/ATen/cuda/DeviceUtils.cuh", r"void WARP_SYNC\(", "reimpl/mirror/cuda/DeviceUtils.cuh"),
    "WARP_SHFL_XOR": ("aten/src/ATen/cuda/DeviceUtils.cuh", r"T WARP_SHFL_XOR\(T value", "reimpl/mirror/cuda/DeviceUtils.cuh"),
    "WARP_SHFL": ("aten/src/ATen/cuda/DeviceUtils.cuh", r"T WARP_SHFL\(T value", "reimpl/mirror/cuda/DeviceUtils.cuh"),
    "WARP_SHFL_DOWN": ("aten/src/ATen/cuda/DeviceUtils.cuh", r"T WARP_SHFL_DOWN\(T value", "reimpl/mirror/cuda/DeviceUtils.cuh"),
    "num_threads": ("aten/src/ATen/native/cuda/thread_constants.h", r"constexpr uint32_t num_threads\(\)", "reimpl/mirror/cuda/thread_constants.h"),
    "WelfordData": ("aten/src/ATen/native/SharedReduceOps.h", r"^struct WelfordData \{", "reimpl/mirror/cuda/SharedReduceOps.h"),
    "WelfordOps": ("aten/src/ATen/native/SharedReduceOps.h", r"^struct WelfordOps \{", "reimpl/mirror/cuda/SharedReduceOps.h"),
    "kCUDABlockReduceNumThreads": ("aten/src/ATen/native/cuda/block_reduce.cuh", r"constexpr int kCUDABlockReduceNumThreads", "reimpl/mirror/cuda/block_reduce.cuh"),
    "WarpReduceSum": ("aten/src/ATen/native/cuda/block_reduce.cuh", r"T WarpReduceSum\(T val\)", "reimpl/mirror/cuda/block_reduce.cuh"),
    "Block1D": ("aten/src/ATen/native/cuda/block_reduce.cuh", r"^struct Block1D", "reimpl/mirror/cuda/block_reduce.cuh"),
    "Block2D": ("aten/src/ATen/native/cuda/block_reduce.cuh", r"^struct Block2D", "reimpl/mirror/cuda/block_reduce.cuh"),
    "BlockReduceSum": ("aten/src/ATen/native/cuda/block_reduce.cuh", r"T BlockReduceSum\(T val", "reimpl/mirror/cuda/block_reduce.cuh"),
    "WarpReduce": ("aten/src/ATen/native/cuda/block_reduce.cuh", r"T WarpReduce\(T val", "reimpl/mirror/cuda/block_reduce.cuh"),
    "BlockReduce": ("aten/src/ATen/native/cuda/block_reduce.cuh", r"^BlockReduce\(T val", "reimpl/mirror/cuda/block_reduce.cuh"),
    "_check_layer_norm_inputs": ("aten/src/ATen/native/layer_norm.h", r"_check_layer_norm_inputs\($", "reimpl/mirror/input_checks.py"),
    "_check_rms_norm_inputs_symint": ("aten/src/ATen/native/layer_norm.h", r"void _check_rms_norm_inputs_symint\(", "reimpl/mirror/input_checks.py"),
    "kCUDANumThreads": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "kWarpSize": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "vec_size": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "aligned_vector": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "can_vectorize": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "RowwiseMomentsCUDAKernel": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "LayerNormForwardCUDAKernel": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "WelfordDataLN": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "cuWelfordOnlineSum": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "cuWelfordCombine": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "compute_stats": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "vectorized_layer_norm_kernel_impl": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "vectorized_layer_norm_kernel_impl_double": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "vectorized_layer_norm_kernel": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "compute_gI": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "layer_norm_grad_input_kernel": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "layer_norm_grad_input_kernel_vectorized": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "blockReduceGammaBetaBackwardsHelper": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "blockReduceGammaBetaBackwardsWithChecks": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "GammaBetaBackwardCUDAKernelTemplate": (LN, None, "reimpl/mirror/cuda/layer_norm_kernel.cu"),
    "LaunchAndCheckGammaBetaBackwardKernel": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "ConfigureAndLaunchGammaBetaBackwardKernel": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "LaunchGammaBetaBackwardCUDAKernel": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "launch_vectorized_layer_norm_kernel": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "LayerNormKernelImplInternal": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "LayerNormKernelImpl": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "RmsNormKernelImpl": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "LayerNormBackwardKernelImplInternal": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "LayerNormBackwardKernelImpl": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "RMSNormBackwardKernelImpl": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "layer_norm_cuda": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "layer_norm_backward_cuda": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "_fused_rms_norm_cuda": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
    "_fused_rms_norm_backward_cuda": (LN, None, "reimpl/mirror/layer_norm_kernel.py"),
}
DOCS_PAGE = {
    "aten/src/ATen/cuda/DeviceUtils.cuh": "upstream/DeviceUtils.md",
    "aten/src/ATen/native/cuda/thread_constants.h": "upstream/thread_constants.md",
    "aten/src/ATen/native/SharedReduceOps.h": "upstream/SharedReduceOps.md",
    "aten/src/ATen/native/cuda/block_reduce.cuh": "upstream/block_reduce.md",
    "aten/src/ATen/native/layer_norm.h": "upstream/layer_norm.md",
    LN: "upstream/layer_norm_kernel.md",
}


def unwrap(text: str) -> str:
    """The wheel wraps each header in a TORCH_STABLE_ONLY guard (1 line on top, 3 at the end)."""
    lines = text.splitlines(keepends=True)
    assert lines[0].startswith("#if !defined(TORCH_STABLE_ONLY)") and lines[-1].startswith("#endif"), "unexpected wrapper"
    return "".join(lines[1:-3])


def find_range(lines: list[str], pattern: str) -> tuple[int, int]:
    rx = re.compile(pattern)
    hits = [i for i, l in enumerate(lines) if rx.search(l)]
    assert hits, pattern
    i = hits[-1] if "num_threads" in pattern else hits[0]  # num_threads: the CUDA branch comes second
    start = i
    while start > 0 and (lines[start - 1].lstrip().startswith("template") or lines[start - 1].strip().startswith("C10_ALWAYS_INLINE")
                         or lines[start - 1].strip() in ("__inline__ __device__ T",)):
        start -= 1
    if lines[i].rstrip().endswith(";"):
        return start + 1, i + 1
    depth, seen = 0, False
    for j in range(i, len(lines)):
        depth += lines[j].count("{") - lines[j].count("}")
        seen = seen or "{" in lines[j]
        if seen and depth == 0:
            return start + 1, j + 1
    raise AssertionError(pattern)


def ln_ranges() -> dict[str, list[int]]:
    """Nearest stored copy's table, shifted where three later `if constexpr` rewrites (2 lines each,
    at its lines 815, 863 and 990) are absent from 2.11; checked against torch's own line 1093."""
    raw = json.loads((CACHE / "upstream-candidates/benediktjohannes/line_ranges.json").read_text())

    def at_pin(line: int) -> int:
        return line - 2 * sum(line > edit for edit in (815, 863, 990))

    out = {k: [at_pin(a), at_pin(b)] for k, (a, b) in raw.items()}
    assert out["TORCH_CHECK_M_forward"] == [1093, 1093], out["TORCH_CHECK_M_forward"]
    out["vectorized_layer_norm_kernel_impl_double"] = out.pop("vectorized_layer_norm_kernel_impl<double>")
    return out


def main() -> None:
    files = {}
    header_lines = {}
    for up, inc in HEADERS.items():
        wheel = (CACHE / "torch-2.11-headers" / inc).read_text()
        src = unwrap(wheel)
        header_lines[up] = src.splitlines()
        files[up] = {"sha256_wheel": hashlib.sha256(wheel.encode()).hexdigest(),
                     "sha256": hashlib.sha256(src.encode()).hexdigest(),
                     "source": "torch 2.11.0+cu130 wheel include/" + inc + " (TORCH_STABLE_ONLY guard removed)"}
    files[LN] = {"sha256": None,
                 "source": "not shipped in the wheel and not in the search index at the pin; line ranges "
                           "reconstructed (see ln_ranges in scripts/build_manifest.py), anchored by torch's "
                           "error location layer_norm_kernel.cu:1093 (LayerNormKernelImplInternal's grid check)"}
    files["aten/src/ATen/native/layer_norm.cpp"] = {
        "sha256": None,
        "source": "not shipped in the wheel; its aten::rms_norm (rms_norm_symint) runs _check_rms_norm_inputs_symint "
                  "and chooses between _fused_rms_norm and a composite, which reimpl/functional.py's rms_norm mirrors "
                  "without line ranges"}
    lnr = ln_ranges()
    symbols = {}
    for name, (up, pattern, ours) in SYMBOLS.items():
        lines = find_range(header_lines[up], pattern) if pattern else tuple(lnr[name])
        symbols[name] = {"file": up, "lines": list(lines), "ours": f"{ours}:{name}",
                         "docs": f"{DOCS_PAGE[up]}#{name}"}
    manifest = {"torch": "2.11.0", "commit": PIN,
                "permalink": f"https://github.com/pytorch/pytorch/blob/{PIN}/{{file}}#L{{start}}-L{{end}}",
                "anchors_checked": {"aten/src/ATen/native/cuda/layer_norm_kernel.cu:1093":
                                    "TORCH_CHECK(M <= maxGridSize[0]) in LayerNormKernelImplInternal, "
                                    "from torch 2.11.0+cu130's C++ stack trace on the H100 (2026-11-21)"},
                "files": files, "symbols": symbols}
    (ROOT / "reference" / "upstream.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(symbols)} symbols")


if __name__ == "__main__":
    main()
