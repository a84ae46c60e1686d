"""The ladder's CUDA rungs (reimpl/ladder/cuda/ladder.cu) and their one launcher signature:

    rung.run(x, weight, bias, eps) -> (y, mean, rstd)

on torch CUDA tensors: x of any shape whose last dim is N (made contiguous, viewed as M x N);
weight and bias N-vectors or None; fp32, fp16 or bf16 storage with fp32 statistics; mean is None
for RMSNorm rungs. Kernels launch on torch's current stream through the same runtime as the mirror.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..device import runtime
from ..device.compile import CudaSource
from ..device.kernel_types import CType, KernelTemplate, float_

# CUDA's own 16-bit types (the ladder does not use c10's)
half = CType("__half", 2, None)
bfloat16 = CType("__nv_bfloat16", 2, None)

_PARAMS = ("ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "int64", "int64", "T_ACC")
_TEMPLATE_NAMES = ("ln_naive_two_pass", "ln_warp_sums", "ln_warp_welford", "ln_block_welford",
                   "ln_block_cached", "ln_block_vec", "ln_apex")
STORAGE = {"float32": float_, "float16": half, "bfloat16": bfloat16}
# shared memory a kernel gets without opting in, static and dynamic together; the cached rungs
# also hold one Welford state per warp (384 bytes) statically
SMEM_DEFAULT_LIMIT = 48 * 1024
SMEM_STATIC = 32 * 12
ROW_CACHE_LIMIT = SMEM_DEFAULT_LIMIT - SMEM_STATIC
BLOCK = 256  # threads of the one-block-per-row rungs


def _instantiations() -> list:
    out = []
    for T in STORAGE.values():
        for name, tmpl in TEMPLATES.items():
            out += [tmpl[T, float_, rms] for rms in (False, True)] if name == "ln_warp_sums" else [tmpl[T, float_]]
    return out


SOURCE = CudaSource(Path(__file__).parent / "cuda", "ladder.cu", lambda: _instantiations())
TEMPLATES = {name: KernelTemplate(name, _PARAMS, SOURCE, "ladder") for name in _TEMPLATE_NAMES}


@dataclass(frozen=True)
class Rung:
    """One rung: its name, the one sentence on how it differs from the rung below, and how it launches
    (template arguments beyond (T, T_ACC), and grid/block/shared memory for M rows of N elements of
    `itemsize` bytes); `fallback` is the rung used where this one's condition does not hold."""
    name: str
    differs: str
    template: str
    extra: tuple = ()
    config: Callable[[int, int, int], tuple] = None
    applies: Callable[[int, int, bool], bool] = lambda N, itemsize, aligned: True
    fallback: str | None = None
    rms_norm: bool = False


def _per_thread(M, N, itemsize):
    return ((M + 127) // 128,), (128,), 0


def _per_warp(M, N, itemsize):
    return ((M + 3) // 4,), (128,), 0  # four rows (warps) per block


def _per_block(M, N, itemsize):
    return (M,), (BLOCK,), 0


def _per_block_cached(M, N, itemsize):
    return (M,), (BLOCK,), N * itemsize


def _apex(M, N, itemsize):
    return (1, min(M, 65535)), (32, 4), 0


RUNGS = {r.name: r for r in (
    Rung("naive", "the plain loop a textbook writes: one thread per row, a mean pass, a variance pass",
         "ln_naive_two_pass", config=_per_thread),
    Rung("warp_sums", "one warp per row with coalesced loads; one pass gathers sum and sum of squares",
         "ln_warp_sums", (False,), _per_warp),
    Rung("warp_welford", "as warp_sums, but each lane runs Welford's update and lanes merge with Chan's formula",
         "ln_warp_welford", config=_per_warp),
    Rung("block_welford", "one block per row; warps merge through a shared-memory tree",
         "ln_block_welford", config=_per_block),
    Rung("block_cached", "as block_welford, but the row stays in shared memory: one global read",
         "ln_block_cached", config=_per_block_cached,
         applies=lambda N, itemsize, aligned: N * itemsize <= ROW_CACHE_LIMIT, fallback="block_welford"),
    Rung("block_vec", "as block_cached, with 128-bit loads and stores",
         "ln_block_vec", config=_per_block_cached,
         applies=lambda N, itemsize, aligned: aligned and N * itemsize <= ROW_CACHE_LIMIT
         and (N * itemsize) % 16 == 0, fallback="block_cached"),
    Rung("apex", "apex's shape: (32, 4) blocks striding over rows, 4-element chunks, then apply",
         "ln_apex", config=_apex),
    Rung("rms_warp_sumsq", "RMSNorm's rung: one warp per row, one pass of sum of squares",
         "ln_warp_sums", (True,), _per_warp, rms_norm=True),
)}


def kernel_for(rung: Rung, T: CType):
    return TEMPLATES[rung.template][(T, float_, *rung.extra)]


def choose(rung: Rung, N: int, itemsize: int, aligned: bool) -> Rung:
    """The rung that actually runs: `rung`, or its fallbacks in turn where its condition fails."""
    while not rung.applies(N, itemsize, aligned):
        rung = RUNGS[rung.fallback]
    return rung


def run(name: str, x, weight=None, bias=None, eps: float = 1e-5):
    """Run rung `name` on torch CUDA tensors: (y, mean, rstd) with y like x, mean and rstd of x's
    leading shape (float32); mean is None for an RMSNorm rung."""
    import torch
    rung = RUNGS[name]
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"ladder rung {name}: x must be float32, float16 or bfloat16, not {x.dtype}")
    N = x.shape[-1]
    for arg, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.shape != (N,) or t.dtype != x.dtype or t.device != x.device):
            raise ValueError(f"ladder rung {name}: {arg} must be a {x.dtype} vector of {N} on {x.device}")
    if rung.rms_norm and bias is not None:
        raise ValueError(f"ladder rung {name}: RMSNorm takes no bias")
    X = x.contiguous()
    M = X.numel() // N if N else 0
    Y = torch.empty_like(X)
    mean = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
    rstd = torch.empty_like(mean)
    T = STORAGE[str(x.dtype).removeprefix("torch.")]
    ptrs = [t.data_ptr() if t is not None else 0 for t in (X, weight, bias)]
    aligned = all(p % 16 == 0 for p in ptrs)
    chosen = choose(rung, N, T.itemsize, aligned)
    if M and N:
        grid, block, smem = chosen.config(M, N, T.itemsize)
        rt = runtime.get()
        rt.launch(kernel_for(chosen, T), grid, block, smem, rt.getCurrentCUDAStream(), *ptrs, Y.data_ptr(),
                  mean.data_ptr(), rstd.data_ptr(), M, N, float(eps))
    return Y.view(x.shape), (None if rung.rms_norm else mean), rstd
