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
    falls back to. With `plan`, the rest of the template arguments and the launch shape are a
    RegsPlan's, chosen by N (the one-read rung)."""
    template: str
    config: Callable[[int, int, int], tuple]
    threads: int | Callable[[int, int], int]  # or threads(N, itemsize), where the plan depends on N
    extra: tuple = ()
    applies: Callable[[int, int, bool], bool] = lambda N, itemsize, aligned: True
    fallback: str | None = None
    plan: Callable[[int, int], "RegsPlan | None"] | None = None  # plan(N, itemsize): template arguments by N
    numerics: tuple[str, ...] | None = None  # NVRTC options in place of the default numerics (CudaSource)

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


def cuda_source(source: str, instantiations: Callable[[], list], numerics: tuple[str, ...] | None = None) -> CudaSource:
    """The CudaSource of one kernel file, `source` named from the repository root (built with
    `numerics` in place of the default numerics options, where given)."""
    path = ROOT / source
    return CudaSource(path.parent, path.name, instantiations, numerics=numerics)


def storage_type(x, who: str) -> CType:
    """x's storage type as the kernels spell it; a TypeError naming `who` for anything else."""
    import torch
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"{who}: x must be float32, float16 or bfloat16, not {x.dtype}")
    return STORAGE[str(x.dtype).removeprefix("torch.")]


def launch(kernel, grid, block, smem: int, *args, cluster: int = 1) -> None:
    """Launch on torch's current stream, through the runtime the mirror uses (asking first, where
    the runtime can, for shared memory past the default 48 KB and for clusters past the portable 8
    blocks of a kernel compiled with `cluster` blocks a cluster)."""
    rt = runtime.get()
    if smem > ROW_CACHE_LIMIT and hasattr(rt, "allow_shared"):
        rt.allow_shared(kernel, smem)
    if cluster > max(REGS_CLUSTERS) and hasattr(rt, "allow_wide_cluster"):
        rt.allow_wide_cluster(kernel)
    rt.launch(kernel, grid, block, smem, rt.getCurrentCUDAStream(), *args)


def launch_cooperative(kernel, grid, block, smem: int, *args) -> None:
    """A cooperative launch on torch's current stream: every block resident at once, so that blocks
    may wait for each other (the caller sizes the grid with the runtime's resident_blocks)."""
    rt = runtime.get()
    rt.launch_cooperative(kernel, grid, block, smem, rt.getCurrentCUDAStream(), *args)


# --8<-- [start:regs_plan]
# The one-read kernels (softmax_online_*, cross_entropy_*) and how a row of N is laid out over them.
# A row is walked as the 16-byte words that hold it (`span` positions: N, or N + vec - 1 where rows
# do not start on a word). Registers: each thread holds `vecs` words of `vec`; short rows go to 4 to
# 32 lanes of a warp (blocks of 128 threads, several rows each), longer ones to a block, and past
# what one block holds, to a cluster of 2 to 16 blocks that merge through distributed shared memory.
# Shared memory, past that: a block of 256 threads stages its share of the row with cp.async, a
# cluster splitting rows whose share would pass 64 KB (three blocks an SM). Every constant below is
# read off results/softmax_plans.json, which times every plan that holds the row at each width.
REGS_WARP_LANES = (4, 8, 16, 32)
REGS_WARP_VECS = (1, 2, 4)          # words a thread at 4 to 32 lanes; 8 more at 32 lanes
REGS_WARP_MOST = {4: 4, 2: 4}       # the fewest lanes whose threads hold at most this many words
REGS_WARP_MOST_32 = {4: 8, 2: 8}    # and at 32 lanes (16-bit rows of 2048 too): past that, a block
REGS_BLOCK_EPT = (16, 32, 64)      # 16 and 32 only for scalars: 64 spills to the stack
REGS_CLUSTERS = (1, 2, 4, 8)        # the portable cluster sizes
WIDE_CLUSTER = 16                   # Hopper's largest, non-portable: the softmax's longest rows
SOFTMAX_CLUSTERS = REGS_CLUSTERS + (WIDE_CLUSTER,)
REGS_MAX_BLOCK = 512                # the largest block of the one-read kernels: up to 128 registers a thread
REGS_WARP_BLOCK = 128
# the (elements per thread, cluster, most threads) regs_plan tries, in order, per storage size: the
# first whose block holds the row in at most that many threads. Few threads a block, so that several
# blocks share an SM and one's loads fly while another reduces: float32 rows at 32 a thread in one
# block of up to 256 or two of up to 192, then 64 a thread in two blocks of up to 160 or four of
# 128, then 32 a thread in eight blocks of up to 256, then 64 in 8 or 16 (80 registers at 16: three
# blocks of 256 an SM); 16-bit rows at 32 a thread in one or two blocks of up to 256, then 64 a thread
# (80 registers) over 2 to 16 blocks of 256. The rest covers every width up to
# the largest cluster's reach, rows with scalar words included (16 or 32 a thread).
_REGS_REST = tuple((ept, c, 512) for c in SOFTMAX_CLUSTERS for ept in (32, 64, 16))
REGS_ORDER = {4: ((32, 1, 256), (32, 2, 192), (64, 2, 160), (64, 4, 128), (32, 8, 256), (64, 8, 256), (64, 16, 256))
              + _REGS_REST,
              2: ((32, 1, 256), (32, 2, 256), (64, 2, 256), (64, 4, 256), (64, 8, 256), (64, 16, 256)) + _REGS_REST}
# rows past what a cluster's registers hold are staged in shared memory, by blocks of 256 threads, or
# 512 where a block stages SMEM_WIDE elements or more; so are float32 rows from STAGED_UNEVEN_FROM on
# that do not end on a 16-byte word (the probe's rows of 50257 and 100277 run faster staged)
STAGED_UNEVEN_FROM = {4: 32769}
SMEM_BLOCK = 256
SMEM_WIDE = 12288
SMEM_SHARE_BYTES = 64 * 1024
SMEM_MAX = 227 * 1024  # an H100 block's shared memory, opted in
ROW_SCRATCH = REGS_MAX_BLOCK // 32 * WIDE_CLUSTER * 8 + 8  # softmax.cu's RowScratch: a state a warp of a cluster


@dataclass(frozen=True)
class RegsPlan:
    vec: int       # elements per load: 16 bytes, or 1 where X's base is not 16-byte aligned
    vecs: int      # words per thread (registers); 0 for a row staged in shared memory
    lanes: int     # threads of a row in a warp (4 to 32), or 0: the whole block
    cluster: int   # blocks per row
    block: int     # threads per block
    share: int = 0  # positions a block stages in shared memory (the *_smem kernels), else 0
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


def span(N: int, vec: int) -> int:
    """Window positions a row of N takes: the words holding it, from the one holding its first
    element (rows of N % vec != 0 start anywhere in a word)."""
    return N if N % vec == 0 else N + vec - 1


def smem_plan(N: int, itemsize: int, cluster: int, block: int | None = None) -> RegsPlan | None:
    """The shared-memory staging of a row over `cluster` blocks of `block` threads (16-byte words;
    by default SMEM_BLOCK, twice that for a share of SMEM_WIDE elements or more)."""
    vec = 16 // itemsize
    share = -(-(-(-span(N, vec) // cluster)) // vec) * vec
    if share * itemsize + ROW_SCRATCH > SMEM_MAX:
        return None
    block = block or (2 * SMEM_BLOCK if share >= SMEM_WIDE else SMEM_BLOCK)
    return RegsPlan(vec, 0, 0, cluster, block, share, itemsize)


def regs_vec(itemsize: int, aligned: bool) -> int:
    return 16 // itemsize if aligned else 1


def regs_table(itemsize: int, clusters: tuple = SOFTMAX_CLUSTERS) -> list[tuple]:
    """Every (vec, vecs, lanes, cluster) instantiated for one storage size: with 16-byte words every
    warp shape; with scalars (misaligned bases) the whole warp only. Block shapes over `clusters`
    (the softmax's; ln_row_held takes the portable ones)."""
    out = []
    for vec in (16 // itemsize, 1):
        lanes_set = REGS_WARP_LANES if vec > 1 else (32,)
        out += [(vec, vecs, lanes, 1) for lanes in lanes_set for vecs in REGS_WARP_VECS]
        out += [(vec, 8, 32, 1)]
        out += [(vec, ept // vec, 0, c) for ept in REGS_BLOCK_EPT if vec > 1 or ept < 64 for c in clusters]
    return out


def regs_plan(N: int, itemsize: int, aligned: bool = True, staged: bool = True, order: dict | None = None,
              most_32: dict | None = None, clusters: tuple = SOFTMAX_CLUSTERS) -> RegsPlan | None:
    """The plan for a row of N (`aligned`: X's base on a 16-byte boundary): the fewest lanes of a
    warp whose threads hold it in at most REGS_WARP_MOST words (at 32 lanes `most_32`,
    REGS_WARP_MOST_32 by default), else the first block shape of `order` (REGS_ORDER by default)
    whose cluster is one of `clusters`, else, past the registers' reach, shared memory for rows of
    16-byte words (not where `staged` is False: a kernel with registers only; also float32 rows off
    the word boundary from STAGED_UNEVEN_FROM on); None past that."""
    vec = regs_vec(itemsize, aligned)
    words = -(-span(N, vec) // vec)
    table = regs_table(itemsize, clusters)
    for lanes in REGS_WARP_LANES:
        vecs = -(-words // lanes)
        most = REGS_WARP_MOST[itemsize] if lanes < 32 else (most_32 or REGS_WARP_MOST_32)[itemsize]
        if vecs <= most:
            vecs = next(v for v in REGS_WARP_VECS + (8,) if v >= vecs)
            if (vec, vecs, lanes, 1) in table:
                return RegsPlan(vec, vecs, lanes, 1, REGS_WARP_BLOCK)
    if staged and vec > 1 and N % vec and N >= STAGED_UNEVEN_FROM.get(itemsize, N + 1):
        return staged_plan(N, itemsize)
    for ept, cluster, most in (order or REGS_ORDER)[itemsize]:
        threads = regs_block(span(N, vec), ept, cluster)
        if threads <= most and (vec, ept // vec, 0, cluster) in table:
            return RegsPlan(vec, ept // vec, 0, cluster, threads)
    return staged_plan(N, itemsize) if staged and vec > 1 else None  # past the registers' reach


def staged_plan(N: int, itemsize: int) -> RegsPlan | None:
    """The smallest cluster whose blocks stage at most SMEM_SHARE_BYTES each, else the largest's
    staging if it fits."""
    for cluster in REGS_CLUSTERS:
        plan = smem_plan(N, itemsize, cluster)
        if plan is not None and (plan.share * itemsize <= SMEM_SHARE_BYTES or cluster == REGS_CLUSTERS[-1]):
            return plan
    return None


def regs_block(positions: int, ept: int, cluster: int) -> int:
    """Threads of a block that holds its share of a row's `positions` at `ept` each (whole warps)."""
    share = -(-positions // cluster)
    return (-(-share // ept) + 31) // 32 * 32
# --8<-- [end:regs_plan]


def regs_config(M, N, itemsize):
    """Cuda.config for the registers kernels, 16-byte aligned rows assumed (the launcher checks)."""
    return regs_plan(N, itemsize).launch(M)


def regs_threads(N, itemsize):
    plan = regs_plan(N, itemsize)
    return plan.threads_per_row() if plan else BLOCK


# ln_row_held's block shapes, in the order held_plan tries them (as REGS_ORDER), and the most words
# a thread of a whole warp holds (as REGS_WARP_MOST_32). Its threads do less per element than the
# softmax's, and a block of fewer threads with more words each spends fewer instructions on
# reductions and indices per element: 32 elements a thread in blocks of up to 512 before a cluster;
# 16-bit rows of up to 2048 stay in one warp, with no block barrier. scripts/gpu/row_held_probe.py
# times the orders.
HELD_ORDER = {4: tuple((ept, c, 512) for ept in (32, 64, 16) for c in REGS_CLUSTERS),
              2: tuple(e for c in REGS_CLUSTERS for e in ((32, c, 512), (16, c, 512), (64, c, 512)))}
HELD_WARP_MOST_32 = {4: 8, 2: 8}


def held_plan(N: int, itemsize: int) -> RegsPlan | None:
    """The registers-only plan of the ladder's one-read rung (ln_row_held) for aligned rows of N."""
    return regs_plan(N, itemsize, True, staged=False, order=HELD_ORDER, most_32=HELD_WARP_MOST_32,
                     clusters=REGS_CLUSTERS)


def held_applies(N, itemsize, aligned):
    return aligned and (N * itemsize) % 16 == 0 and held_plan(N, itemsize) is not None


def held_threads(N, itemsize):
    plan = held_plan(N, itemsize)
    return plan.threads_per_row() if plan else BLOCK
