"""What the ladder's CUDA launchers share: the storage types, the check of x's type, one CudaSource
per kernel file, the launch on torch's current stream, and the launch shapes of the rungs (grid,
block, dynamic shared memory for M rows of N elements of `itemsize` bytes)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..device import runtime
from ..device.compile import CudaSource
from ..device.kernel_types import CType, float_

ROOT = Path(__file__).resolve().parents[2]  # the repository: entries name their files from here

# CUDA's own 16-bit types (the ladder does not use c10's)
half = CType("__half", 2, None)
bfloat16 = CType("__nv_bfloat16", 2, None)
STORAGE = {"float32": float_, "float16": half, "bfloat16": bfloat16}

# shared memory a kernel gets without opting in, static and dynamic together; the cached rungs
# also hold one Welford state per warp (384 bytes) statically
SMEM_DEFAULT_LIMIT = 48 * 1024
SMEM_STATIC = 32 * 12
ROW_CACHE_LIMIT = SMEM_DEFAULT_LIMIT - SMEM_STATIC
BLOCK = 256  # threads of the one-block-per-row rungs and softmax kernels


@dataclass(frozen=True)
class Cuda:
    """How a kernel launched by name runs: its `__global__` template, template arguments beyond
    (T, T_ACC), `config(M, N, itemsize) -> (grid, block, dynamic shared bytes)`, the threads that
    reduce one row, and where its condition `applies(N, itemsize, aligned)` fails, the entry it
    falls back to."""
    template: str
    config: Callable[[int, int, int], tuple]
    threads: int
    extra: tuple = ()
    applies: Callable[[int, int, bool], bool] = lambda N, itemsize, aligned: True
    fallback: str | None = None


def per_thread(M, N, itemsize):
    return ((M + 127) // 128,), (128,), 0


def per_warp(M, N, itemsize):
    return ((M + 3) // 4,), (128,), 0  # four rows (warps) per block


def per_block(M, N, itemsize):
    return (M,), (BLOCK,), 0


def per_block_cached(M, N, itemsize):
    return (M,), (BLOCK,), N * itemsize


def apex_grid(M, N, itemsize):
    return (1, min(M, 65535)), (32, 4), 0


def row_fits(N, itemsize, aligned):
    return N * itemsize <= ROW_CACHE_LIMIT


def row_fits_vectors(N, itemsize, aligned):
    return aligned and row_fits(N, itemsize, aligned) and (N * itemsize) % 16 == 0


def cuda_source(source: str, instantiations: Callable[[], list]) -> CudaSource:
    """The CudaSource of one kernel file, `source` named from the repository root."""
    path = ROOT / source
    return CudaSource(path.parent, path.name, instantiations)


def storage_type(x, who: str) -> CType:
    """x's storage type as the kernels spell it; a TypeError naming `who` for anything else."""
    import torch
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"{who}: x must be float32, float16 or bfloat16, not {x.dtype}")
    return STORAGE[str(x.dtype).removeprefix("torch.")]


def launch(kernel, grid, block, smem: int, *args) -> None:
    """Launch on torch's current stream, through the runtime the mirror uses."""
    rt = runtime.get()
    rt.launch(kernel, grid, block, smem, rt.getCurrentCUDAStream(), *args)
