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
    threads: int | Callable[[int, int], int]  # or threads(N, itemsize), where the plan depends on N
    extra: tuple = ()
    applies: Callable[[int, int, bool], bool] = lambda N, itemsize, aligned: True
    fallback: str | None = None

    def threads_for(self, N: int, itemsize: int) -> int:
        return self.threads(N, itemsize) if callable(self.threads) else self.threads


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
    """Launch on torch's current stream, through the runtime the mirror uses (asking for shared
    memory past the default 48 KB first, where the runtime can)."""
    rt = runtime.get()
    if smem > ROW_CACHE_LIMIT and hasattr(rt, "allow_shared"):
        rt.allow_shared(kernel, smem)
    rt.launch(kernel, grid, block, smem, rt.getCurrentCUDAStream(), *args)


# --8<-- [start:regs_plan]
# The one-read kernels (softmax_online_*, cross_entropy_*) and how a row of N is laid out over them.
# Registers: each thread holds `ept` elements as `ept / vec` vectors of `vec`; short rows go to 8, 16
# or 32 lanes of a warp (blocks of 128 threads, several rows each), longer ones to a block, and past
# what one block holds, to a cluster of 2, 4 or 8 blocks that merge through distributed shared
# memory. Shared memory: a block of 256 threads stages its share of the row with cp.async, a cluster
# splitting rows whose share would pass 64 KB (three blocks an SM). Every constant below is read off
# results/softmax_plans.json, which times every plan that holds the row at each width.
REGS_WARP_LANES = (8, 16, 32)
REGS_WARP_EPT = {4: (8, 16, 32), 2: (16, 32, 64)}  # at 32 lanes, beyond one vector per lane
REGS_BLOCK_EPT = (16, 32, 64)
REGS_CLUSTERS = (1, 2, 4, 8)
REGS_MAX_BLOCK = 512                # the kernels' __launch_bounds__: up to 128 registers a thread
REGS_WARP_BLOCK = 128
# the (elements per thread, cluster) regs_plan tries, in order, per storage size: the first whose
# block holds the row in at most REGS_MAX_BLOCK threads. 16-bit rows want more elements a thread.
REGS_ORDER = {4: tuple((ept, c) for c in REGS_CLUSTERS for ept in (32, 64, 16)),
              2: tuple((ept, c) for c in REGS_CLUSTERS for ept in (64, 32, 16))}
# from this width on, aligned rows are staged in shared memory instead of registers
SMEM_FROM = {4: 65536, 2: 12288}
SMEM_BLOCK = 256
SMEM_SHARE_BYTES = 64 * 1024
SMEM_MAX = 227 * 1024  # an H100 block's shared memory, opted in


@dataclass(frozen=True)
class RegsPlan:
    vec: int       # elements per load: 16 bytes, or 1 where rows are not 16-byte aligned
    vecs: int      # vectors per thread (registers); 0 for a row staged in shared memory
    lanes: int     # threads of a row in a warp (8, 16, 32), or 0: the whole block
    cluster: int   # blocks per row
    block: int     # threads per block
    share: int = 0  # elements a block stages in shared memory (the *_smem kernels), else 0
    itemsize: int = 0

    @property
    def smem(self) -> bool:
        return self.share > 0

    @property
    def targs(self) -> tuple:
        return (self.vec, self.cluster) if self.smem else (self.vec, self.vecs, self.lanes, self.cluster)

    def threads_per_row(self) -> int:
        return (self.lanes or self.block) * self.cluster

    def launch(self, M: int) -> tuple:
        if self.lanes:
            return ((M * self.lanes + self.block - 1) // self.block,), (self.block,), 0
        return (M * self.cluster,), (self.block,), self.share * self.itemsize


def smem_plan(N: int, itemsize: int, cluster: int, block: int = SMEM_BLOCK) -> RegsPlan | None:
    """The shared-memory staging of a 16-byte-aligned row over `cluster` blocks of `block` threads."""
    vec = 16 // itemsize
    if N % vec:
        return None
    share = -(-(-(-N // cluster)) // vec) * vec
    if share * itemsize + 33 * 8 > SMEM_MAX:
        return None
    return RegsPlan(vec, 0, 0, cluster, block, share, itemsize)


def regs_vec(N: int, itemsize: int, aligned: bool) -> int:
    v = 16 // itemsize
    return v if aligned and N % v == 0 else 1


def regs_table(itemsize: int) -> list[tuple]:
    """Every (vec, vecs, lanes, cluster) instantiated for one storage size."""
    out = []
    for vec in dict.fromkeys((16 // itemsize, 1)):
        out += [(vec, 1, lanes, 1) for lanes in REGS_WARP_LANES]
        out += [(vec, ept // vec, 32, 1) for ept in REGS_WARP_EPT[itemsize] if ept > vec]
        out += [(vec, ept // vec, 0, c) for ept in REGS_BLOCK_EPT for c in REGS_CLUSTERS]
    return out


def regs_plan(N: int, itemsize: int, aligned: bool = True) -> RegsPlan | None:
    """The plan for a row of N: the smallest warp shape that holds it, else shared memory for wide
    aligned rows, else the first block shape of REGS_ORDER; None past the largest cluster's reach."""
    vec = regs_vec(N, itemsize, aligned)
    for v, vecs, lanes, cluster in regs_table(itemsize):
        if v == vec and lanes and lanes * vecs * vec >= N:
            return RegsPlan(vec, vecs, lanes, 1, REGS_WARP_BLOCK)
    if vec > 1 and N >= SMEM_FROM[itemsize]:
        for cluster in REGS_CLUSTERS:
            plan = smem_plan(N, itemsize, cluster)
            if plan is not None and (plan.share * itemsize <= SMEM_SHARE_BYTES or cluster == REGS_CLUSTERS[-1]):
                return plan
    for ept, cluster in REGS_ORDER[itemsize]:
        threads = regs_block(N, ept, cluster)
        if threads <= REGS_MAX_BLOCK:
            return RegsPlan(vec, ept // vec, 0, cluster, threads)
    return None


def regs_block(N: int, ept: int, cluster: int) -> int:
    """Threads of a block that holds its share of a row of N at `ept` elements each (whole warps)."""
    share = -(-N // cluster)
    return (-(-share // ept) + 31) // 32 * 32
# --8<-- [end:regs_plan]


def regs_config(M, N, itemsize):
    """Cuda.config for the registers kernels, 16-byte aligned rows assumed (the launcher checks)."""
    return regs_plan(N, itemsize).launch(M)


def regs_threads(N, itemsize):
    plan = regs_plan(N, itemsize)
    return plan.threads_per_row() if plan else BLOCK
