"""The statistics of reimpl.fast's lane kernel (fast_layer_norm_lane_kernel in
reimpl/fast/cuda/fast_layer_norm.cu) on the CPU: one lane per row evaluates torch's tree depth first
(`lane_tree`), where torch plays it as shuffle-down rounds over 32 lanes and two rounds through
shared memory (compute_stats in layer_norm_kernel.py). Both are built from the same primitives,
cuWelfordOnlineSum and cuWelfordCombine; tests/test_lane_tree_cpu.py holds this order to
compute_stats bit for bit, so the GPU kernel's claim that it merges the same operands in the same
order is checked where no GPU is.

Rows are evaluated all at once: each array below holds one value per row, as each lane of the
kernel holds one row's.
"""
from __future__ import annotations

import numpy as np

from .layer_norm_kernel import WelfordDataLN, cuWelfordCombine, cuWelfordOnlineSum

f32 = np.float32
VEC = 4        # torch's vec_size: torch's thread j holds the row's vector j (elements 4j .. 4j + 3)
WARP = 32
THREADS = 128  # torch's block: 4 warps of 32


def _leaf(rms_norm: bool, rows: np.ndarray, j: int) -> WelfordDataLN:
    """Torch's thread j's state: its four updates over vector j, or the empty state past the row."""
    z = np.zeros(rows.shape[0], f32)
    wd = WelfordDataLN(z, z, z)
    if j * VEC >= rows.shape[1]:
        return wd
    for ii in range(VEC):
        wd = cuWelfordOnlineSum(rms_norm, rows[:, j * VEC + ii], wd)
    return wd


def lane_tree(rms_norm: bool, rows: np.ndarray, j: int, offset: int) -> WelfordDataLN:
    """The value torch's thread j holds after its shuffle-down round at `offset` (32: before the
    first round), evaluated depth first as the kernel's lane_tree<..., j, offset> does."""
    if offset == WARP:
        return _leaf(rms_norm, rows, j)
    own = lane_tree(rms_norm, rows, j, offset * 2)
    return cuWelfordCombine(rms_norm, own, lane_tree(rms_norm, rows, j + offset, offset * 2))


def lane_stats(rms_norm: bool, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, sigma2 / N) per row, as the lane kernel computes them: the four warp trees, then the
    two shared-memory rounds (warp 0 with 2, 1 with 3, then 0 with 1), then the IEEE division."""
    rows = np.asarray(rows, f32)
    N = rows.shape[1]
    assert N % VEC == 0 and N // VEC <= THREADS, "one vector per torch thread at most"
    with np.errstate(all="ignore"):
        w = [lane_tree(rms_norm, rows, WARP * k, 1) for k in range(THREADS // WARP)]
        st = cuWelfordCombine(rms_norm, cuWelfordCombine(rms_norm, w[0], w[2]), cuWelfordCombine(rms_norm, w[1], w[3]))
        return st.mean, st.sigma2 / f32(N)
