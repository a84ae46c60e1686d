"""Torch's LayerNorm/RMSNorm forward with one thing done differently: the family of computations a
user's kernel is judged against (reimpl/testing/diagnose.py).

A user whose kernel does not give torch's bits almost always did one step of torch's computation
another way: compiled with flush-to-zero, without FMA contraction, with `1.f/sqrtf` for `rsqrtf`,
with a two-pass or one-pass variance for Welford, with another merge tree or thread count, on the
fallback kernels' rounding, in float64, with eps in another place, or with the affine step done in
the storage type. Each of those is one switch of `Variant`; `forward_rows(Variant(), ...)` is torch's
vectorized kernel itself, and tests/test_variants_cpu.py holds it to the emulator, bit for bit.

Why a second statement of the vectorized kernel beside emulator/layer_norm_kernel.py: there, every
line mirrors upstream's and the compiler's fusions are fixed in the code; here every operation goes
through `Arith`, so that contraction and flush-to-zero can be switched, and all rows and all 32 x by
threads run at once (the diagnosis runs dozens of variants on a few rows). The fallback path is not
restated: its variant runs the emulator's own fallback kernels.

The planted GPU kernels that prove each switch (reimpl/testing/cuda/planted_layer_norm.cu) are
written to the same statements: one `#if` per switch.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from . import rsqrt as _rsqrt
from .fp import ElementType, fma32, fma64_vec

f32, f64 = np.float32, np.float64
VEC = 4            # vec_size of the vectorized kernel
WARP = 32


@dataclass(frozen=True)
class Variant:
    """One way of computing the forward; the defaults are torch 2.11's vectorized kernel."""
    ftz: bool = False              # -ftz=true: subnormal operands and results of float arithmetic flushed
    fma: bool = True               # -fmad=true: the compiler contracts a*b + c into one FFMA
    rsqrt: str = "rsqrtf"          # "rsqrtf" (MUFU.RSQ) or "div_sqrt": 1.f / sqrtf(var + eps), both IEEE
    stats: str = "welford"         # "welford", "two_pass" (mean, then squares of x - mean), "one_pass" (E[x^2] - mean^2)
    block_y: int = 4               # the block is (32, block_y) threads
    tree: str = "shfl_down"        # "shfl_down" (offsets 16..1), "ascending" (offsets 1..16), "swapped" (own state as A)
    accumulate: str = "float32"    # "float32" or "float64" (every statistic and the affine step in double)
    eps: str = "inside"            # "inside": rsqrt(var + eps); "outside": 1 / (sqrt(var) + eps)
    cast: str = "once"             # "once": affine in float, one rounding; "per_op": each op rounded to T
    path: str = "vectorized"       # "vectorized" or "fallback" (RowwiseMoments + LayerNormForward's rounding)

    @property
    def name(self) -> str:
        changed = [f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                   if getattr(self, f.name) != f.default]
        return ", ".join(changed) or "torch"


TORCH = Variant()

# The single changes the diagnosis tries first, each with what it means in a user's code.
SINGLE = {
    "ftz": (Variant(ftz=True), "compiled with flush-to-zero (CuPy's RawKernel/RawModule add -ftz=true)"),
    "no_fma": (Variant(fma=False), "no FMA contraction (-fmad=false, or a compiler that does not fuse)"),
    "div_sqrt": (Variant(rsqrt="div_sqrt"), "1.f / sqrtf(var + eps) instead of rsqrtf"),
    "two_pass": (Variant(stats="two_pass"), "mean first, then the sum of (x - mean)^2, instead of Welford"),
    "one_pass": (Variant(stats="one_pass"), "sum and sum of squares in one pass, var = E[x^2] - mean^2"),
    "block_y1": (Variant(block_y=1), "32 threads per row (one warp) instead of 128"),
    "block_y8": (Variant(block_y=8), "256 threads per row instead of 128"),
    "tree_ascending": (Variant(tree="ascending"), "shuffle offsets 1, 2, ..., 16 instead of 16, 8, ..., 1"),
    "tree_swapped": (Variant(tree="swapped"), "each merge takes its own state as A and the partner's as B"),
    "float64": (Variant(accumulate="float64"), "statistics and the affine step in double"),
    "eps_outside": (Variant(eps="outside"), "1 / (sqrt(var) + eps): eps added after the square root"),
    "cast_per_op": (Variant(cast="per_op"), "normalized value rounded to the storage type, then * weight "
                                            "and + bias each rounded (torch ops in that dtype)"),
    "fallback": (Variant(path="fallback"), "the fallback kernels' rounding (RowwiseMoments + "
                                           "LayerNormForward) on a row torch sends down the vectorized path"),
}


class Arith:
    """The arithmetic of one variant: IEEE operations in the accumulate type, flush-to-zero on the
    operands and results when `ftz`, and `fma(a, b, c)` for a source-level `a * b + c` that the
    compiler contracts into one FFMA when `contract`."""

    def __init__(self, acc, ftz: bool, contract: bool):
        self.acc = acc
        self.ftz = ftz and acc is f32
        self.contract = contract

    def f(self, a):
        a = np.asarray(a, self.acc)
        if not self.ftz:
            return a
        return np.where(np.abs(a) < np.finfo(f32).tiny, np.copysign(f32(0), a), a).astype(f32)

    def add(self, a, b):
        return self.f(self.f(a) + self.f(b))

    def sub(self, a, b):
        return self.f(self.f(a) - self.f(b))

    def mul(self, a, b):
        return self.f(self.f(a) * self.f(b))

    def div(self, a, b):
        return self.f(self.f(a) / self.f(b))

    def fmaf(self, a, b, c):
        """An explicit fmaf / fma: fused whatever the contraction setting."""
        fused = fma64_vec if self.acc is f64 else fma32
        return self.f(fused(self.f(a), self.f(b), self.f(c)))

    def fma(self, a, b, c):
        return self.fmaf(a, b, c) if self.contract else self.add(self.mul(a, b), c)

    def sqrt(self, a):
        return self.f(np.sqrt(self.f(a)))

    def rsqrt(self, a):
        if self.acc is f64:
            return _rsqrt.rsqrt64(a)
        return self.f(_rsqrt.rsqrtf(self.f(a)))


# ---- the reduction: per-thread folds, the warp tree, the shared-memory rounds -------------------------
def _thread_steps(N: int, numx: int):
    """(element index [numx], active [numx]) in the order each thread folds its elements: vectors
    t, t + numx, ... of four adjacent elements (compute_stats' loop)."""
    nvec = N // VEC
    t = np.arange(numx)
    for k in range(-(-nvec // numx)):
        i = t + k * numx
        for ii in range(VEC):
            yield np.minimum(i, nvec - 1) * VEC + ii, i < nvec


def _welford_combine(ar: Arith, B, A):
    """cuWelfordCombine(dataB, dataA) on (mean, sigma2, count) triples, as written in the source."""
    delta = ar.sub(B[0], A[0])
    count = ar.add(A[2], B[2])
    with np.errstate(divide="ignore", invalid="ignore"):
        coef = ar.div(1, count)
        nA, nB = ar.mul(A[2], coef), ar.mul(B[2], coef)
        mean = ar.fma(nA, A[0], ar.mul(nB, B[0]))                              # nA*A.mean + nB*B.mean
        sigma2 = ar.fma(ar.mul(ar.mul(delta, delta), A[2]), nB, ar.add(A[1], B[1]))
    ok = count > 0
    z = ar.acc(0)
    return np.where(ok, mean, z), np.where(ok, sigma2, z), count


def _sum_combine(ar: Arith, B, A):
    return tuple(ar.add(b, a) for b, a in zip(B, A))


def _tree(ar: Arith, v: Variant, state, combine):
    """Merge the per-thread states [rows, numx] of each field into one per row, as compute_stats does:
    shuffle rounds inside each warp, then lane 0s pairwise through shared memory."""
    by = v.block_y
    s = [a.reshape(a.shape[0], by, WARP) for a in state]
    offsets = [16, 8, 4, 2, 1] if v.tree != "ascending" else [1, 2, 4, 8, 16]
    lane = np.arange(WARP)
    for off in offsets:
        src = np.where(lane + off <= WARP - 1, lane + off, lane)               # WARP_SHFL_DOWN
        other = [a[:, :, src] for a in s]
        s = list(combine(ar, other, s) if v.tree == "swapped" else combine(ar, s, other))
    w = [a[:, :, 0] for a in s]                                               # lane 0 of each warp
    off = by // 2
    while off > 0:
        own = [a[:, :off] for a in w]
        partner = [a[:, off:2 * off] for a in w]
        merged = combine(ar, partner, own) if v.tree == "swapped" else combine(ar, own, partner)
        w = [np.concatenate([m, a[:, off:]], axis=1) for m, a in zip(merged, w)]
        off //= 2
    return [a[:, 0] for a in w]


def _stats(ar: Arith, v: Variant, X, rms: bool):
    """(mean, var) per row, X [rows, N] in the accumulate type."""
    rows, N = X.shape
    numx = WARP * v.block_y
    z = np.zeros((rows, numx), ar.acc)
    n = ar.acc(N)
    if rms or v.stats == "welford":
        mean, sigma2, count = z, z, z
        for e, act in _thread_steps(N, numx):
            x = X[:, e]
            if rms:
                new = (z, ar.fma(x, x, sigma2), z)                            # sigma2 + val*val
            else:
                delta = ar.sub(x, mean)
                new_count = ar.add(count, 1)
                new_mean = ar.fma(delta, ar.div(1, new_count), mean)          # mean + delta*(1/new_count)
                new = (new_mean, ar.fma(delta, ar.sub(x, new_mean), sigma2), new_count)
            mean, sigma2, count = (np.where(act, a, b) for a, b in zip(new, (mean, sigma2, count)))
        if rms:
            mean, sigma2 = np.zeros(rows, ar.acc), _tree(ar, v, (sigma2,), _sum_combine)[0]
        else:
            mean, sigma2, _ = _tree(ar, v, (mean, sigma2, count), _welford_combine)
        return mean, ar.div(sigma2, n)
    # two-pass and one-pass: plain sums over the same thread layout and tree
    s, q = z, z
    for e, act in _thread_steps(N, numx):
        x = X[:, e]
        s = np.where(act, ar.add(s, x), s)
        if v.stats == "one_pass":
            q = np.where(act, ar.fma(x, x, q), q)                             # q += x*x
    s = _tree(ar, v, (s,), _sum_combine)[0]
    mean = ar.div(s, n)
    if v.stats == "one_pass":
        ex2 = ar.div(_tree(ar, v, (q,), _sum_combine)[0], n)
        return mean, np.maximum(ar.fmaf(-mean, mean, ex2), ar.acc(0))        # fmaxf(fmaf(-m, m, ex2), 0)
    for e, act in _thread_steps(N, numx):
        d = ar.sub(X[:, e], mean[:, None])
        q = np.where(act, ar.fma(d, d, q), q)                                 # q += d*d
    return mean, ar.div(_tree(ar, v, (q,), _sum_combine)[0], n)


def _rstd(ar: Arith, v: Variant, var, eps):
    eps = ar.acc(f32(eps))  # a float eps, as torch's kernels (and the planted ones) take it
    if v.eps == "outside":
        return ar.div(1, ar.add(ar.sqrt(var), eps))
    if v.rsqrt == "div_sqrt":
        return ar.div(1, ar.sqrt(ar.add(var, eps)))
    return ar.rsqrt(ar.add(var, eps))


def _affine(ar: Arith, v: Variant, T: ElementType, X, mean, rstd, g, b, rms: bool):
    """The output step of vectorized_layer_norm_kernel_impl, each branch as written there."""
    r, m = rstd[:, None], mean[:, None]
    if v.cast == "per_op":
        def rnd(a):
            return T.load(T.store(np.asarray(a, f32))).astype(ar.acc)
        n = rnd(ar.mul(r, X) if rms else ar.mul(r, ar.sub(X, m)))
        if g is not None:
            n = rnd(ar.mul(g, n))
        if b is not None and not rms:
            n = rnd(ar.add(n, b))
        return n
    if rms:
        return ar.mul(r, X) if g is None else ar.mul(g, ar.mul(r, X))
    c = ar.sub(X, m)
    if g is not None and b is not None:
        return ar.fma(g, ar.mul(r, c), b)
    if g is not None:
        return ar.mul(g, ar.mul(r, c))
    if b is not None:
        out = ar.fma(r, c, b)
        # element 0 of each vector: rstd*(x - mean) is computed before the branch, then added
        out[:, 0::VEC] = ar.add(ar.mul(r, c[:, 0::VEC]), b[:, 0::VEC])
        return out
    return ar.mul(r, c)


def forward_rows(v: Variant, op: str, T: ElementType, x, weight=None, bias=None, eps=1e-5):
    """(y, mean or None, rstd) for rows x [rows, N] (T's storage dtype), weight/bias [N] or None, as
    variant `v` computes them; mean and rstd in float32 (as torch returns them)."""
    rms = op == "rms_norm"
    x = np.atleast_2d(np.asarray(x))
    N = x.shape[1]
    if eps is None:
        eps = np.finfo(f32).eps
    if v.path == "fallback":
        return _fallback(op, T, x, weight, bias, eps)
    if N % VEC:
        raise ValueError(f"the vectorized structure needs N % {VEC} == 0 (N = {N})")
    acc = f64 if v.accumulate == "float64" else f32
    ar = Arith(acc, v.ftz, v.fma)
    X = T.load(x).astype(acc)
    g = None if weight is None else T.load(np.asarray(weight)).astype(acc)[None, :]
    b = None if (bias is None or rms) else T.load(np.asarray(bias)).astype(acc)[None, :]
    with np.errstate(all="ignore"):
        mean, var = _stats(ar, v, X, rms)
        rstd = _rstd(ar, v, var, eps)
        y = _affine(ar, v, T, X, mean, rstd, g, b, rms)
    y = T.store(np.asarray(y).astype(f32))                                   # double: through float
    return y, (None if rms else mean.astype(f32)), rstd.astype(f32)


def _fallback(op, T, x, weight, bias, eps):
    """The fallback kernels on these rows: the emulator, with the input's address moved off 16 bytes
    (the data are the same; the host then picks RowwiseMoments + LayerNormForward)."""
    from .api import fused_rms_norm, native_layer_norm
    N = x.shape[1]
    off = (1, 0, 0)
    if op == "layer_norm":
        y, mean, rstd = native_layer_norm(x, (N,), weight, bias, eps, offsets=off)
        return y, mean.reshape(-1).astype(f32), rstd.reshape(-1).astype(f32)
    y, rstd = fused_rms_norm(x, (N,), weight, eps, offsets=off)
    return y, None, rstd.reshape(-1).astype(f32)


def applicable(v: Variant, op: str, N: int) -> bool:
    """Whether the variant is a change at all for this op and row width."""
    if N % VEC and v.path != "fallback":
        return False
    if op == "rms_norm" and (v.stats != "welford" or v.tree == "swapped"):
        return False  # RMSNorm has no mean (its Welford is a sum of squares) and its merge is a commutative add
    return True


def combined(a: Variant, b: Variant) -> Variant | None:
    """The variant with both changes, or None where they set the same switch."""
    changes = {}
    for var in (a, b):
        for f in fields(var):
            val = getattr(var, f.name)
            if val != f.default:
                if f.name in changes and changes[f.name] != val:
                    return None
                changes[f.name] = val
    if "path" in changes and len(changes) > 1:
        return None  # the fallback variant is torch's own kernels, not a switchable statement
    return replace(TORCH, **changes)
