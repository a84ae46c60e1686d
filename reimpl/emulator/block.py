"""One thread block as arrays: its indices per thread, and the launch loop that runs the blocks of
a grid one after another (blocks of these kernels never communicate, so order does not matter)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import trace


@dataclass
class Block:
    blockIdx_x: int
    blockDim: tuple[int, int, int]
    threadIdx_x: np.ndarray   # [threads], linear order: x fastest
    threadIdx_y: np.ndarray
    shared: np.ndarray        # dynamic shared memory (`extern __shared__`) as bytes

    @property
    def nthreads(self) -> int:
        return len(self.threadIdx_x)


def make_block(block_idx: int, block_dim, nshared: int) -> Block:
    bx, by, bz = block_dim
    assert bz == 1
    tid = np.arange(bx * by)
    return Block(block_idx, (bx, by, bz), tid % bx, tid // bx, np.zeros(nshared, np.uint8))


def launch(kernel, grid, block_dim, nshared: int, *args) -> None:
    """kernel<<<grid, block_dim, nshared>>>(args): each block in turn (grid is (M, 1, 1) here)."""
    gx, gy, gz = grid
    assert gy == 1 and gz == 1
    for b in range(gx):
        trace.set_block(b)
        kernel(make_block(b, block_dim, nshared), *args)
