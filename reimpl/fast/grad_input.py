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
REGISTER_VECTORS = (8, 16)  # R: vectors per thread of X and of dY in registers (the block kernel)
SHARED_VECTORS = 16  # RS: and beyond 16 (N <= 16384), the next 16 in shared memory
WARPS_PER_BLOCK = 4
THREADS = 128  # torch's threads per row


def shared_bytes(T, RS: int) -> int:
    """Dynamic shared memory of a block holding RS vectors of X and of dY per thread."""
    return 2 * RS * THREADS * 4 * K.sizeof(T)


def _block_shapes() -> list[tuple[int, int]]:
    """Every (R, RS) the plan can choose for the block kernel; (0, 0) streams."""
    return [(R, 0) for R in REGISTER_VECTORS] + [(REGISTER_VECTORS[-1], SHARED_VECTORS), (0, 0)]


def _affine():
    for T in (K.float_, K.Half, K.BFloat16):
        for rms in (False, True):
            for g in (True, False):
                yield T, rms, g


def _instantiations() -> list:
    out = []
    for T, rms, g in _affine():
        out += [WARP_TEMPLATE[(T, K.float_, rms, g, RW, WARPS_PER_BLOCK)] for RW in WARP_VECTORS]
        out += [TEMPLATE[(T, K.float_, rms, g, R, RS)] for R, RS in _block_shapes()]
    return out


_PARAMS = ("ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "int", "int64")
SOURCE = CudaSource(Path(__file__).parent / "cuda", "fast_grad_input.cu", lambda: _instantiations(),
                    include_dirs=(K.SOURCE.directory,))
TEMPLATE = KernelTemplate("fast_grad_input_kernel", _PARAMS, SOURCE, "reimpl_fast")
WARP_TEMPLATE = KernelTemplate("fast_grad_input_warp_kernel", _PARAMS, SOURCE, "reimpl_fast")


def plan(T, rms: bool, has_gamma: bool, M: int, N: int):
    """(kernel, grid, block, dynamic shared bytes) for dX of M rows of N elements. Rows of up to 2048
    elements go one warp per row, four rows a block; up to 16384, one 128-thread block per row
    holding its share on chip (R vectors of X and dY in registers, beyond 2048 vectors a row the
    next RS in shared memory); beyond, the block streams the row. RW and R + RS are the smallest
    that hold a thread's share, so every thread fills more than half of its slots (the kernels
    check only the rest)."""
    per_thread = -(-(N // 4) // THREADS)
    RW = next((r for r in WARP_VECTORS if r >= per_thread), None)
    if RW is not None:
        return (WARP_TEMPLATE[(T, K.float_, rms, has_gamma, RW, WARPS_PER_BLOCK)],
                (-(-M // WARPS_PER_BLOCK),), (32, WARPS_PER_BLOCK), 0)
    R, RS = next(((R, RS) for R, RS in _block_shapes() if R + RS >= per_thread), (0, 0))
    return TEMPLATE[(T, K.float_, rms, has_gamma, R, RS)], (M,), (THREADS,), shared_bytes(T, RS)
