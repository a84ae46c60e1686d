"""The ladder's CUDA rungs (one file each, cuda/ln_*.cu; declared in registry.py) and their one
launcher signature:

    rung.run(x, weight, bias, eps) -> (y, mean, rstd)

on torch CUDA tensors: x of any shape whose last dim is N (made contiguous, viewed as M x N);
weight and bias N-vectors or None; fp32, fp16 or bf16 storage with fp32 statistics; mean is None
for RMSNorm rungs. Kernels launch on torch's current stream through the same runtime as the mirror.
"""
from __future__ import annotations

from ..device.kernel_types import KernelTemplate, float_
from . import registry
from .launch import REGS_CLUSTERS, STORAGE, cuda_source, launch, regs_table, storage_type

_PARAMS = ("ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "int64", "int64", "T_ACC")
RUNGS = {e.name: e for e in registry.CUDA_RUNGS}


def _instantiations(source: str) -> list:
    """Every storage type of every rung whose kernel is in `source` (two rungs may share a template),
    and for a rung with a plan every plan shape its rows of 16-byte words can take."""
    out = []
    for T in STORAGE.values():
        for e in RUNGS.values():
            if e.source != source:
                continue
            if e.cuda.plan is None:
                out.append(TEMPLATES[e.cuda.template][(T, float_, *e.cuda.extra)])
            else:
                out += [TEMPLATES[e.cuda.template][(T, float_, *e.cuda.extra, *targs)]
                        for targs in regs_table(T.itemsize, REGS_CLUSTERS) if targs[0] == 16 // T.itemsize]
    return out


# one CudaSource per rung file, and one KernelTemplate per template
SOURCES = {f: cuda_source(f, lambda f=f: _instantiations(f), next(e.cuda.numerics for e in RUNGS.values() if e.source == f))
           for f in dict.fromkeys(e.source for e in RUNGS.values())}
TEMPLATES = {e.cuda.template: KernelTemplate(e.cuda.template, _PARAMS, SOURCES[e.source], "ladder")
             for e in RUNGS.values()}


def kernel_for(rung: registry.Entry, T, N: int = 0):
    """The instantiation rung `rung` launches for rows of N of storage type T."""
    plan = rung.cuda.plan(N, T.itemsize).targs if rung.cuda.plan else ()
    return TEMPLATES[rung.cuda.template][(T, float_, *rung.cuda.extra, *plan)]


def launch_shape(rung: registry.Entry, M: int, N: int, itemsize: int) -> tuple:
    """(grid, block, dynamic shared bytes) of rung `rung` for M rows of N."""
    if rung.cuda.plan:
        return rung.cuda.plan(N, itemsize).launch(M)
    return rung.cuda.config(M, N, itemsize)


def choose(rung: registry.Entry, N: int, itemsize: int, aligned: bool) -> registry.Entry:
    """The rung that actually runs: `rung`, or its fallbacks in turn where its condition fails."""
    while not rung.cuda.applies(N, itemsize, aligned):
        rung = RUNGS[rung.cuda.fallback]
    return rung


def run(name: str, x, weight=None, bias=None, eps: float = 1e-5):
    """Run rung `name` on torch CUDA tensors: (y, mean, rstd) with y like x, mean and rstd of x's
    leading shape (float32); mean is None for an RMSNorm rung."""
    import torch
    rung = RUNGS[name]
    T = storage_type(x, f"ladder rung {name}")
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
    ptrs = [t.data_ptr() if t is not None else 0 for t in (X, weight, bias)]
    aligned = all(p % 16 == 0 for p in ptrs)
    chosen = choose(rung, N, T.itemsize, aligned)
    if M and N:
        grid, block, smem = launch_shape(chosen, M, N, T.itemsize)
        launch(kernel_for(chosen, T, N), grid, block, smem, *ptrs, Y.data_ptr(), mean.data_ptr(), rstd.data_ptr(),
               M, N, float(eps))
    return Y.view(x.shape), (None if rung.rms_norm else mean), rstd
