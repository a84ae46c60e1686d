"""The fast grad-input kernels (reimpl/fast/cuda/fast_grad_input.cu) as kernel objects, and their
launch plan. They take torch's `layer_norm_grad_input_kernel_vectorized` arguments, in its order,
plus the row count M and `from_last` (ROWS_FROM_LAST); `FastRuntime` (runtime.py) launches them in its
place.
"""
from __future__ import annotations

from pathlib import Path

from ..device.compile import CudaSource
from ..device.kernel_types import KernelTemplate
from ..mirror import kernel_table as K

WARP_VECTORS = (1,)  # RW: vectors per virtual thread in the warp kernel (rows of fewer than 512 elements)
REGISTER_VECTORS = (1, 2, 4, 8, 16)  # R: vectors per thread of X and of dY in registers (the block kernel)
WARPS_PER_BLOCK = 4
THREADS = 128  # torch's threads per row
# the kernels' `from_last`: rows from the last up, so that the chains kernel, which starts at the top,
# finds the rows read last in L2 (results/rows_from_last_probe.json)
ROWS_FROM_LAST = True


def split(T) -> tuple[int, int]:
    """(R, RS) for rows of 2049 to 4096 vectors: R vectors of X and dY in registers, the next RS in
    shared memory. Measured on the H100 (results/fast_experiments.json, 8192 x 16384): fp32 (12, 20)
    reached 88% of copy where (16, 16) spilled registers and reached 72%; bf16 (16, 16) 91%, where
    fewer registers left it below 75%."""
    return (12, 20) if K.sizeof(T) == 4 else (16, 16)


def shared_bytes(T, RS: int) -> int:
    """Dynamic shared memory of a block holding RS vectors of X and of dY per thread."""
    return 2 * RS * THREADS * 4 * K.sizeof(T)


def _block_shapes(T) -> list[tuple[int, int]]:
    """Every (R, RS) the plan can choose for the block kernel, smallest first; (0, 0) streams."""
    return [(R, 0) for R in REGISTER_VECTORS] + [split(T), (0, 0)]


def _affine():
    for T in (K.float_, K.Half, K.BFloat16):
        for rms in (False, True):
            for g in (True, False):
                yield T, rms, g


def _instantiations() -> list:
    out = []
    for T, rms, g in _affine():
        out += [WARP_TEMPLATE[(T, K.float_, rms, g, RW, WARPS_PER_BLOCK)] for RW in WARP_VECTORS]
        out += [TEMPLATE[(T, K.float_, rms, g, R, RS)] for R, RS in _block_shapes(T)]
    return out


_PARAMS = ("ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "int", "int64", "int")
SOURCE = CudaSource(Path(__file__).parent / "cuda", "fast_grad_input.cu", lambda: _instantiations(),
                    include_dirs=(K.SOURCE.directory,))
TEMPLATE = KernelTemplate("fast_grad_input_kernel", _PARAMS, SOURCE, "reimpl_fast")
WARP_TEMPLATE = KernelTemplate("fast_grad_input_warp_kernel", _PARAMS, SOURCE, "reimpl_fast")


def plan(T, rms: bool, has_gamma: bool, M: int, N: int):
    """(kernel, grid, block, dynamic shared bytes) for dX of M rows of N elements. Rows that leave
    some of torch's 128 threads without a vector (N < 512) go one warp per row, four rows a block.
    Longer rows take one 128-thread block each, holding the row on chip: R vectors of X and dY per
    thread in registers, and for rows of 2049 to 4096 vectors (N <= 16384) the next RS in shared
    memory; beyond that the block streams the row. R (or R + RS) is the smallest that holds a
    thread's share, so every thread fills at least half of its slots, which the kernels therefore
    read without a bounds check. Measured on the H100 (results/fast_experiments.json): the block
    kernel was as fast or faster from N = 512 up (fp32 4096 x 1024 LayerNorm: 80% of copy against
    the warp kernel's 71%), the warp kernel far ahead below (bf16 32768 x 128: 77% against 39%)."""
    n_vec = N // 4
    if n_vec < THREADS:
        return (WARP_TEMPLATE[(T, K.float_, rms, has_gamma, WARP_VECTORS[0], WARPS_PER_BLOCK)],
                (-(-M // WARPS_PER_BLOCK),), (32, WARPS_PER_BLOCK), 0)
    per_thread = -(-n_vec // THREADS)
    R, RS = next(((R, RS) for R, RS in _block_shapes(T) if R + RS >= per_thread), (0, 0))
    return TEMPLATE[(T, K.float_, rms, has_gamma, R, RS)], (M,), (THREADS,), shared_bytes(T, RS)
