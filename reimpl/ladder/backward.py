"""The backward of the ladder's top CUDA rungs (row_held, rms_row_held): cuda/ln_row_held_backward.cu.

    run(name, dy, x, weight, bias, mean, rstd) -> (dx, dweight, dbias)

dx like x; dweight (dbias) an N-vector of x's dtype where weight (bias) is given, else None; mean
and rstd are the forward's (mean None for RMSNorm). One persistent launch makes dx and a row of
partial weight gradients per block (or per cluster), a second (`column_sums`) adds those rows in a
fixed order. `norm(name, x, weight, bias, eps)` is any rung with a backward (this one or the Triton
rungs') under autograd.

The row is laid out as the forward lays it (launch.RegsPlan), but a thread holds at most
BACK_EPT elements: besides x it keeps g = dy * w, the weight and its running dweight and dbias.
"""
from __future__ import annotations

import functools

from ..device import runtime
from ..device.kernel_types import KernelTemplate, float_
from . import registry
from .launch import (REGS_CLUSTERS, REGS_WARP_BLOCK, REGS_WARP_LANES, REGS_WARP_VECS, STORAGE, RegsPlan,
                     cuda_source, launch, regs_block, storage_type)

# the rungs whose backward is this file's (the registry declares both): name -> RMSNorm or not
SOURCE_FILE = registry.BY_NAME["row_held"].backward_source
RUNGS = {e.name: e.rms_norm for e in registry.BACKWARD_RUNGS if e.backward_source == SOURCE_FILE}
BACK_EPT = 16           # the most elements a thread holds
BACK_MAX_BLOCK = 512    # the kernel's launch bound: up to 128 registers a thread
BACK_RESIDENT_BLOCKS = 2  # blocks an SM is taken to hold where the runtime cannot say (no device)
_PARAMS = ("ptr",) * 8 + ("int64", "int64")
_SUM_PARAMS = ("ptr", "ptr", "int64", "int64")


def back_plan(N: int, itemsize: int) -> RegsPlan | None:
    """The layout of rows of N (16-byte aligned, whole words) for the backward: the fewest lanes of a
    warp whose threads hold the row in at most BACK_EPT elements each, else a block of at most
    BACK_MAX_BLOCK threads at BACK_EPT each, over the smallest portable cluster that holds it; None
    for rows that are not whole words, or longer than 8 blocks hold."""
    vec = 16 // itemsize
    if N <= 0 or N % vec:
        return None
    words, most = N // vec, BACK_EPT // vec
    for lanes in REGS_WARP_LANES:
        if words <= lanes * most:
            vecs = next(v for v in REGS_WARP_VECS if v * lanes >= words)
            return RegsPlan(vec, vecs, lanes, 1, REGS_WARP_BLOCK, itemsize=itemsize)
    for cluster in REGS_CLUSTERS:
        threads = regs_block(N, BACK_EPT, cluster)
        if threads <= BACK_MAX_BLOCK:
            return RegsPlan(vec, most, 0, cluster, threads, itemsize=itemsize)
    return None


def back_table(itemsize: int) -> list[tuple]:
    """Every (vec, vecs, lanes, cluster) back_plan can return for one storage size: a row short enough
    for 4 lanes takes the fewest words that hold it; past that, every thread holds the most."""
    vec = 16 // itemsize
    most = BACK_EPT // vec
    return ([(vec, v, REGS_WARP_LANES[0], 1) for v in REGS_WARP_VECS if v <= most]
            + [(vec, most, lanes, 1) for lanes in REGS_WARP_LANES[1:]]
            + [(vec, most, 0, c) for c in REGS_CLUSTERS])


def _instantiations() -> list:
    out = []
    for T in STORAGE.values():
        out += [BACKWARD[(T, float_, rms, *targs)] for rms in (False, True) for targs in back_table(T.itemsize)]
        out.append(COLUMN_SUMS[(T, float_)])
    return out


SOURCE = cuda_source(SOURCE_FILE, lambda: _instantiations())
BACKWARD = KernelTemplate("ln_row_held_backward", _PARAMS, SOURCE, "ladder")
COLUMN_SUMS = KernelTemplate("column_sums", _SUM_PARAMS, SOURCE, "ladder")


def fold_bytes(plan: RegsPlan) -> int:
    """Dynamic shared memory of a launch: a warp plan's groups fold their dweight and dbias there."""
    return 2 * plan.block * plan.vecs * plan.vec * 4 if plan.lanes else 0


def grid_blocks(plan: RegsPlan, kernel, M: int, sms: int) -> int:
    """The persistent grid: as many blocks as stay resident together (the runtime's occupancy, by
    clusters for cluster plans), no more than the rows need. Blocks that waited for a wave would
    take their full share of rows late, so the grid never passes what is resident."""
    rt = runtime.get()
    if plan.lanes:
        need = -(-M // (plan.block // plan.lanes))
    else:
        need = M * plan.cluster
    if plan.cluster > 1:
        clusters = rt.resident_clusters(kernel, plan.cluster, plan.block, 0) if hasattr(rt, "resident_clusters") else None
        most = (clusters or sms * BACK_RESIDENT_BLOCKS // plan.cluster) * plan.cluster
    else:
        per_sm = rt.resident_blocks(kernel, plan.block, fold_bytes(plan)) if hasattr(rt, "resident_blocks") else None
        most = sms * (per_sm or BACK_RESIDENT_BLOCKS)
    return max(plan.cluster, min(need, most))


def run(name: str, dy, x, weight=None, bias=None, mean=None, rstd=None):
    """dx, dweight, dbias of rung `name`'s forward on torch CUDA tensors (see the module's text)."""
    import torch
    if name not in RUNGS:
        raise ValueError(f"ladder backward: name must be one of {', '.join(RUNGS)}, not {name!r}")
    rms = RUNGS[name]
    who = f"ladder rung {name} backward"
    T = storage_type(x, who)
    N = x.shape[-1]
    if dy.shape != x.shape or dy.dtype != x.dtype or dy.device != x.device:
        raise ValueError(f"{who}: dy must match x ({tuple(x.shape)}, {x.dtype}, {x.device})")
    for arg, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.shape != (N,) or t.dtype != x.dtype or t.device != x.device):
            raise ValueError(f"{who}: {arg} must be a {x.dtype} vector of {N} on {x.device}")
    if rms and bias is not None:
        raise ValueError(f"{who}: RMSNorm takes no bias")
    if rstd is None or (not rms and mean is None):
        raise ValueError(f"{who}: {'rstd' if rms else 'mean and rstd'} from the forward are needed")
    X, DY = x.contiguous(), dy.contiguous()
    M = X.numel() // N if N else 0
    for arg, t in (("rstd", rstd),) + ((() if rms else (("mean", mean),))):
        if t.numel() != M or t.dtype != torch.float32 or t.device != x.device:
            raise ValueError(f"{who}: {arg} must hold the forward's {M} float32 values on {x.device}")
    rstd, mean = rstd.contiguous(), (None if rms else mean.contiguous())
    DX = torch.empty_like(X)
    # column_sums writes every gradient asked for; no rows: zero gradients, as torch's
    grads = (torch.empty if M and N else torch.zeros)((2, N), dtype=x.dtype, device=x.device)
    if M and N:
        plan = back_plan(N, T.itemsize)
        if plan is None or any(t is not None and t.data_ptr() % 16 for t in (X, DY, weight)):
            raise NotImplementedError(f"{who}: rows of whole 16-byte words, 16-byte aligned, of at most "
                                      f"{max(REGS_CLUSTERS) * BACK_MAX_BLOCK * BACK_EPT} elements")
        kernel = BACKWARD[(T, float_, rms, *plan.targs)]
        sms = runtime.get().getCurrentDeviceProperties()["multiProcessorCount"]
        blocks = grid_blocks(plan, kernel, M, sms)
        P = blocks if plan.lanes else blocks // plan.cluster  # rows of partial sums
        wanted = [t is not None for t in (weight, bias)]
        part = torch.empty((2, P, N), dtype=torch.float32, device=x.device)
        launch(kernel, (blocks,), (plan.block,), fold_bytes(plan), DY.data_ptr(), X.data_ptr(),
               0 if rms else mean.data_ptr(), rstd.data_ptr(), weight.data_ptr() if weight is not None else 0,
               DX.data_ptr(), part[0].data_ptr() if wanted[0] else 0, part[1].data_ptr() if wanted[1] else 0,
               M, N)
        if any(wanted):
            # part[0] holds dweight's partial rows, part[1] dbias's; grads' rows are the sums
            launch(COLUMN_SUMS[(T, float_)], ((N + 31) // 32, 2 if wanted[1] else 1), (32, 32), 0,
                   part.data_ptr(), grads.data_ptr(), P, N)
    dw = grads[0] if weight is not None else None
    db = grads[1] if bias is not None else None
    return DX.view(x.shape), dw, db


@functools.cache
def _function():
    import torch

    class RungNorm(torch.autograd.Function):
        """A rung's forward and its backward (the entry's `backward`) under autograd."""

        @staticmethod
        def forward(ctx, x, weight, bias, eps, name):
            e = registry.BY_NAME[name]
            y, mean, rstd = e.launch_fn()(name, x, weight, bias, eps)
            ctx.save_for_backward(x, weight, bias, mean, rstd)
            ctx.name = name
            return y

        @staticmethod
        def backward(ctx, dy):
            x, weight, bias, mean, rstd = ctx.saved_tensors
            dx, dw, db = registry.BY_NAME[ctx.name].backward_fn()(ctx.name, dy, x, weight, bias, mean, rstd)
            return dx, dw, db, None, None

    return RungNorm


def norm(name: str, x, weight=None, bias=None, eps: float = 1e-5):
    """Rung `name` (one with a backward: registry.BACKWARD_RUNGS) as a differentiable function."""
    return _function().apply(x, weight, bias, float(eps), name)
