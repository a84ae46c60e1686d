"""The fast grad-input kernels (reimpl/fast/cuda/fast_grad_input.cu) as kernel objects, and their
launch plan. They take torch's `layer_norm_grad_input_kernel_vectorized` arguments, in its order,
plus the row count M; `FastRuntime` (kernel.py) launches them in its place.
"""
from __future__ import annotations

from pathlib import Path

from ..device.compile import CudaSource
from ..device.kernel import KernelTemplate
from .. import kernels as K

WARP_VECTORS = (1, 2, 4)  # RW: vectors per virtual thread in the warp kernel (N <= 2048)
REGISTER_VECTORS = (8, 16, 32)  # R: vectors per thread in the block kernel (N <= 16384); beyond, stream
WARPS_PER_BLOCK = 4
THREADS = 128  # torch's threads per row
HELD_WORDS = 128  # registers a thread may spend on the row: X and dY, or dY alone beyond it


def keeps_x(T, R: int) -> bool:
    """Whether a thread holds X beside dY: R vectors of each are 2 R sizeof(T) words."""
    return 2 * R * K.sizeof(T) <= HELD_WORDS


def _affine():
    for T in (K.float_, K.Half, K.BFloat16):
        for rms in (False, True):
            for g in (True, False):
                yield T, rms, g


def _instantiations() -> list:
    out = []
    for T, rms, g in _affine():
        out += [WARP_TEMPLATE[(T, K.float_, rms, g, RW, WARPS_PER_BLOCK)] for RW in WARP_VECTORS]
        out += [TEMPLATE[(T, K.float_, rms, g, R, keeps_x(T, R))] for R in (0,) + REGISTER_VECTORS]
    return out


_PARAMS = ("ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "int", "int64")
SOURCE = CudaSource(Path(__file__).parent / "cuda", "fast_grad_input.cu", lambda: _instantiations(),
                    include_dirs=(K.SOURCE.directory,))
TEMPLATE = KernelTemplate("fast_grad_input_kernel", _PARAMS, SOURCE, "reimpl_fast")
WARP_TEMPLATE = KernelTemplate("fast_grad_input_warp_kernel", _PARAMS, SOURCE, "reimpl_fast")


def plan(T, rms: bool, has_gamma: bool, M: int, N: int):
    """(kernel, grid, block) for dX of M rows of N elements. Rows of up to 2048 elements go one warp
    per row, four rows a block; up to 16384, one 128-thread block per row holding its share in R
    registers; beyond, the block streams the row. RW and R are the smallest that hold a thread's
    share, so every thread fills more than half of its slots (the kernels check only the rest)."""
    per_thread = -(-(N // 4) // THREADS)
    RW = next((r for r in WARP_VECTORS if r >= per_thread), None)
    if RW is not None:
        return (WARP_TEMPLATE[(T, K.float_, rms, has_gamma, RW, WARPS_PER_BLOCK)],
                (-(-M // WARPS_PER_BLOCK),), (32, WARPS_PER_BLOCK))
    R = next((r for r in REGISTER_VECTORS if r >= per_thread), 0)
    return TEMPLATE[(T, K.float_, rms, has_gamma, R, keeps_x(T, R))], (M,), (THREADS,)
