"""Softmax over the last dim, the ladder's second sibling: CUDA kernels of ours (cuda/softmax.cu)
with one launcher, and NumPy models of the online form's (m, d) merge and of the one-read arithmetic.

    run(name, x) -> y     name in KERNELS; x of any shape, softmax over its last dim (made
                          contiguous, viewed as M x N); fp32, fp16 or bf16 storage, fp32 arithmetic

The kernels: `three_pass` (the safe softmax: max, sum of exp(x - max), write), `online_warp`
(one pass of Milakov and Gimelshein's online normaliser per lane of a warp, lanes merged, then the
write), `online_block` (the same with a block per row: warps merge by shuffles, then through
shared memory) and `one_read` (the row read once, into the registers of 4 to 4096 threads or the
shared memory of up to 8 blocks of a cluster, and written from there; launch.regs_plan picks the
shape from N). They are checked
against torch.softmax on the GPU (tests/gpu/test_siblings_gpu.py).

The NumPy models (`md_push`, `md_merge`, `online_softmax`; `one_read_softmax`) are the kernels'
arithmetic in float32 on the CPU, with the same guards, so the -inf / +inf / NaN rules can be read
and tested without a GPU.
"""
from __future__ import annotations

import numpy as np

from ..device.kernel_types import KernelTemplate, float_
from . import registry
from .accuracy import softmax_bound
from .launch import SOFTMAX_CLUSTERS, STORAGE, cuda_source, launch, regs_plan, regs_table, storage_type

_PARAMS = ("ptr", "ptr", "int64", "int64")
KERNELS = {e.name: e for e in registry.SOFTMAX}  # their template, launch shape and threads per row
REGS = "softmax_online_regs"  # the template whose instantiation depends on N (launch.regs_plan)
SMEM = "softmax_online_smem"  # its twin that stages the row in shared memory (plans with .smem)
# the cross-entropy kernels (reimpl/ladder/cross_entropy.py) live in the same file: X, target, dX,
# loss, grad_scale, M, N, ignore_index (and the staged share)
CE, CE_SMEM = "cross_entropy_regs", "cross_entropy_smem"
_CE_PARAMS = ("ptr",) * 5 + ("int64",) * 3


def _instantiations() -> list:
    out = []
    for T in STORAGE.values():
        for k in KERNELS.values():
            if k.cuda.template != REGS:
                out.append(TEMPLATES[k.cuda.template][T, float_])
        for targs in regs_table(T.itemsize):
            for whole in (False, True) if targs[0] > 1 else (False,):
                out += [TEMPLATES[REGS][(T, float_, *targs, whole)], TEMPLATES[CE][(T, float_, *targs, whole)]]
        for cluster in SOFTMAX_CLUSTERS:
            targs = (T, float_, 16 // T.itemsize, cluster)
            out += [TEMPLATES[SMEM][targs], TEMPLATES[CE_SMEM][targs]]
    return out


def row_kernel(plan, T, softmax_or_ce: str, N: int):
    """The instantiation a plan launches on rows of N: (kernel, extra trailing arguments). Register
    plans of 16-byte words take the WHOLE kernels where every row is whole words (N a multiple of
    the word; the plan's words mean the base is aligned)."""
    if plan.smem:
        name = SMEM if softmax_or_ce == "softmax" else CE_SMEM
        return TEMPLATES[name][(T, float_, *plan.targs)], (plan.share,)
    name = REGS if softmax_or_ce == "softmax" else CE
    return TEMPLATES[name][(T, float_, *plan.targs, plan.vec > 1 and N % plan.vec == 0)], ()


(_FILE,) = {k.source for k in KERNELS.values()}
SOURCE = cuda_source(_FILE, lambda: _instantiations())
TEMPLATES = {k.cuda.template: KernelTemplate(k.cuda.template, _PARAMS, SOURCE, "ladder") for k in KERNELS.values()}
TEMPLATES[CE] = KernelTemplate(CE, _CE_PARAMS, SOURCE, "ladder")
TEMPLATES[SMEM] = KernelTemplate(SMEM, _PARAMS + ("int64",), SOURCE, "ladder")
TEMPLATES[CE_SMEM] = KernelTemplate(CE_SMEM, _CE_PARAMS + ("int64",), SOURCE, "ladder")


def aligned(t) -> bool:
    """`t` starts on a 16-byte boundary, as its fresh output does: the one-read kernels then walk
    both by 16-byte words, whatever the row length (launch.span)."""
    return t.data_ptr() % 16 == 0


def row_threads(name: str, dtype: str, N: int) -> int:
    """The threads that reduce one row of N `dtype` elements with kernel `name` (a 16-byte aligned
    base, as a fresh tensor's): what its error bound counts."""
    return KERNELS[name].cuda.threads_for(N, STORAGE[dtype].itemsize)


def row_parts(name: str, dtype: str, N: int) -> int:
    """The parts of a row whose exps take their own maximum and are rescaled apart: for one_read's
    block plans every warp of every block of the cluster; 1 for its warp plans and the others."""
    plan = regs_plan(N, STORAGE[dtype].itemsize) if KERNELS[name].cuda.template == REGS else None
    return plan.cluster * (1 if plan.lanes else plan.block // 32) if plan else 1


def bound(name: str, dtype: str, N: int) -> tuple[int, str]:
    """accuracy.softmax_bound for kernel `name` on rows of N: its threads and parts a row."""
    return softmax_bound(row_threads(name, dtype, N), dtype, N, row_parts(name, dtype, N))


def run(name: str, x, plan=None):
    """Softmax of torch CUDA tensor `x` over its last dim with kernel `name`; y has x's shape and dtype.
    `plan` (a launch.RegsPlan) overrides regs_plan's choice for one_read, for the benchmark."""
    import torch
    if name not in KERNELS:
        raise ValueError(f"softmax: name must be one of {', '.join(KERNELS)}, not {name!r}")
    T = storage_type(x, f"softmax {name}")
    if x.dim() == 0:
        raise ValueError(f"softmax {name}: x must have at least one dim")
    k = KERNELS[name].cuda
    N = x.shape[-1]
    X = x.contiguous()
    M = X.numel() // N if N else 0
    Y = torch.empty_like(X)
    if k.template == REGS:
        plan = plan or regs_plan(N, T.itemsize, aligned(X))
        if plan is None:  # longer than the largest cluster holds: the streaming kernel
            return run("online_block", x)
    if M and N:
        extra = ()
        if k.template == REGS:
            grid, block, smem = plan.launch(M)
            kernel, extra = row_kernel(plan, T, "softmax", N)
        else:
            grid, block, smem = k.config(M, N, T.itemsize)
            kernel = TEMPLATES[k.template][T, float_]
        launch(kernel, grid, block, smem, X.data_ptr(), Y.data_ptr(), M, N, *extra,
               cluster=plan.cluster if k.template == REGS else 1)
    return Y.view(x.shape)


# --8<-- [start:md_model]
# The NumPy model of the (m, d) merge, float32 throughout, the guards as in cuda/softmax.cu.
f32 = np.float32
EMPTY = (f32(-np.inf), f32(0))


def md_merge(a, b):
    """Two partial states (m, d) -> the state of both: rescale each sum to the larger maximum."""
    if b == EMPTY:
        return a
    if a == EMPTY:
        return b
    m = np.fmax(a[0], b[0])  # fmaxf: a NaN loses to a number
    with np.errstate(invalid="ignore", over="ignore"):
        return m, f32(a[1] * np.exp(a[0] - m) + b[1] * np.exp(b[0] - m))


def md_push(s, x):
    """Fold one element into a state; -inf adds exp(-inf) = 0 to any sum, so it changes nothing."""
    x = f32(x)
    if x == -np.inf:
        return s
    m = np.fmax(s[0], x)
    with np.errstate(invalid="ignore", over="ignore"):
        return m, f32(s[1] * np.exp(s[0] - m) + np.exp(x - m))


def online_softmax(row, parts: int = 1):
    """Softmax of one row: `parts` threads each fold a strided share of the row, their states are
    merged left to right, then every element is normalised with the merged (m, d)."""
    row = np.asarray(row, f32)
    states = []
    for t in range(parts):
        s = EMPTY
        for v in row[t::parts]:
            s = md_push(s, v)
        states.append(s)
    m, d = EMPTY
    for s in states:
        m, d = md_merge((m, d), s)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return (np.exp(row - m) / d).astype(f32)
# --8<-- [end:md_model]


# --8<-- [start:one_read_model]
# The one-read kernels' arithmetic on one row, in float32: `parts` shares of ceil(N / parts) (the
# warps of a block plan, over every block of a cluster; a warp's words are interleaved with the other
# warps', here the shares are contiguous, which changes no step); each share's maximum, its exps
# against that maximum (times 2^bias, as 16-bit storage takes them), their sum; the shares' (m, d)
# merged (the largest maximum, then each sum rescaled to it); each share's exps rescaled once, by
# exp(m_share - m), and divided by the row's d.
LOG2E = f32(1.4426950408889634)


def one_read_softmax(row, parts: int = 1, bias: float = 0.0):
    row = np.asarray(row, f32)
    share = -(-len(row) // parts)
    shares = [row[b * share:(b + 1) * share] for b in range(parts)]
    states, exps, shifts = [], [], []
    with np.errstate(invalid="ignore", over="ignore"):
        for p in shares:
            m = np.fmax.reduce(p, initial=f32(-np.inf))  # fmaxf: a NaN loses to a number
            shift = f32(0) if m == -np.inf else m
            e = np.exp2((p - shift) * LOG2E + f32(bias)).astype(f32)
            exps.append(e), shifts.append(shift), states.append((f32(m), f32(e.sum(dtype=f32))))
        # the merge taken all at once, as the kernels' exchange does: the largest maximum, then each
        # share's sum rescaled to it (a share of no exps adds 0)
        m = np.fmax.reduce([s[0] for s in states], initial=f32(-np.inf))
        d = f32(sum((f32(0) if s[1] == 0 else f32(s[1] * np.exp(f32(s[0] - m))) for s in states), f32(0)))
        out = []
        for e, shift, (_, d_share) in zip(exps, shifts, states):
            # a share whose exps are all 0 adds 0 whatever the scale (exp(-m) may overflow)
            rescale = f32(1) if parts == 1 else f32(0) if d_share == 0 else f32(np.exp(f32(shift - m)))
            with np.errstate(divide="ignore"):
                out.append((e * f32(rescale / d)).astype(f32))
    return np.concatenate(out) if out else row
# --8<-- [end:one_read_model]
