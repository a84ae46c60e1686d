"""Batch invariance: does a row's result depend on the rest of the batch?

For inference that must not change with the batch a request lands in, and for reproducing one
sample's numbers, a row's output (and its dX) must have the same bits whatever the batch: alone or
among others, in a batch of any size, at any position, next to any values. A per-row kernel is
invariant by construction unless its path depends on the batch (the pointer of a row's view, the
number of rows). The weight gradients sum over rows; the question there is whether adding rows that
contribute exactly zero (grad_out = 0) changes the sum's bits, which happens when the reduction's
tree depends on M, as torch's GammaBeta tile choice does.

    report = batch_invariance(F.layer_norm, "layer_norm", dtype="bf16", N=4096, backward=True)
    print(report)                      # one line per check
    assert_batch_invariant(my_kernel)  # AssertionError with the report unless every check passes
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .bits import as_bits, equal_mask

_TORCH_DTYPES = ("fp32", "fp16", "bf16")
ZERO_ROW_PADS = (1, 7, 64, 193, 1000, 4096)


@dataclass
class Check:
    name: str
    output: str        # "out", "dX", "dweight", "dbias"
    what: str
    rows: int          # rows (or vectors, for the weight gradients) compared
    differ: int

    @property
    def ok(self) -> bool:
        return self.differ == 0


@dataclass
class BatchReport:
    op: str
    dtype: str
    N: int
    M: int
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def __str__(self) -> str:
        lines = [f"batch invariance, {self.op} {self.dtype} rows of {self.N} (batch of {self.M}): "
                 + ("every check passes" if self.ok else f"{sum(not c.ok for c in self.checks)} checks fail")]
        for c in self.checks:
            lines.append(f"  {'ok  ' if c.ok else 'FAIL'} {c.output:<7} {c.name:<16} {c.differ} of {c.rows} differ: "
                         f"{c.what}")
        return "\n".join(lines)


def _dtype(name):
    import torch
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def _run(fn, op, x, w, b, eps, dy=None):
    """Per-row output bits [rows, N], or with dy the bits of (dX, dweight, dbias)."""
    args = (x, [x.shape[-1]], w, b, eps) if op == "layer_norm" else (x, [x.shape[-1]], w, eps)
    if dy is None:
        import torch
        with torch.no_grad():
            y = fn(*args)
        y = y[0] if isinstance(y, (tuple, list)) else y
        return {"out": as_bits(y)[0].reshape(x.shape[0], -1)}
    x = x.detach().clone().requires_grad_(True)
    w = None if w is None else w.detach().clone().requires_grad_(True)
    b = None if b is None else b.detach().clone().requires_grad_(True)
    args = (x, [x.shape[-1]], w, b, eps) if op == "layer_norm" else (x, [x.shape[-1]], w, eps)
    y = fn(*args)
    y = y[0] if isinstance(y, (tuple, list)) else y
    y.backward(dy)
    out = {"dX": as_bits(x.grad)[0].reshape(x.shape[0], -1)}
    if w is not None:
        out["dweight"] = as_bits(w.grad)[0].reshape(1, -1)
    if b is not None:
        out["dbias"] = as_bits(b.grad)[0].reshape(1, -1)
    return out


def _rows_differ(a, b, name) -> int:
    return int((~equal_mask(a, b, name)).any(axis=1).sum())


def batch_invariance(fn, op: str = "layer_norm", dtype: str = "bf16", N: int = 1024, M: int = 64, *,
                     eps: float = 1e-5, affine: bool = True, backward: bool = False,
                     weight_grads: bool = True, device: str | None = None, seed: int = 0) -> BatchReport:
    """Run every check on `fn` (F.layer_norm's or F.rms_norm's signature) and report them."""
    import torch
    if dtype not in _TORCH_DTYPES:
        raise ValueError(f"dtype must be one of {_TORCH_DTYPES}, not {dtype!r}")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    dt = _dtype(dtype)
    name = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}[dtype]
    g = torch.Generator(device="cpu").manual_seed(seed)
    rnd = lambda *s, scale=1.0: (torch.randn(*s, generator=g) * scale + 0.5).to(dt).to(device)  # noqa: E731
    x, dy = rnd(M, N), rnd(M, N)
    w = rnd(N) if affine else None
    b = rnd(N) if affine and op == "layer_norm" else None
    report = BatchReport(op, dtype, N, M)
    outs = ["dX"] if backward else ["out"]
    full = _run(fn, op, x, w, b, eps, dy if backward else None)
    picks = sorted({0, 1, M // 2, M - 1})

    def rows_of(xx, dd, take, ref_rows, check, what):
        got = _run(fn, op, xx, w, b, eps, dd if backward else None)
        for o in outs:
            report.checks.append(Check(check, o, what, len(ref_rows),
                                       _rows_differ(got[o][take], full[o][ref_rows], name)))

    # alone: each picked row as a batch of one, in a fresh allocation and as a view into x
    for kind in ("alone", "alone_view"):
        differ = {o: 0 for o in outs}
        for r in picks:
            xx = x[r:r + 1].clone() if kind == "alone" else x[r:r + 1]
            dd = dy[r:r + 1].clone() if kind == "alone" else dy[r:r + 1]
            got = _run(fn, op, xx, w, b, eps, dd if backward else None)
            for o in outs:
                differ[o] += _rows_differ(got[o], full[o][[r]], name)
        what = ("each row as a batch of one" + (", as a view into the batch (its pointer moves)"
                                                  if kind == "alone_view" else ""))
        for o in outs:
            report.checks.append(Check(kind, o, what, len(picks), differ[o]))
    # batch size: the first k rows, and the batch inside one four times larger
    for k in sorted({1, 2, 3, 7, 17, M // 2} - {0}):
        if k < M:
            rows_of(x[:k].clone(), dy[:k].clone(), slice(0, k), list(range(k)), f"first_{k}", f"the first {k} rows only")
    rows_of(torch.cat([x, rnd(3 * M, N)]), torch.cat([dy, rnd(3 * M, N)]), slice(0, M), list(range(M)),
            "in_4x_batch", f"the batch inside one of {4 * M} rows")
    # position: the rows rolled by 3
    perm = [(r - 3) % M for r in range(M)]
    rows_of(x[perm], dy[perm], list(range(M)), perm, "rolled", "every row three places further on")
    # neighbours: every other row replaced with large values, and with NaN and inf
    for nb, fill in (("large_neighbours", None), ("nan_neighbours", float("nan"))):
        xx, dd = x.clone(), dy.clone()
        others = [r for r in range(M) if r not in picks]
        xx[others] = rnd(len(others), N, scale=1e4) if fill is None else torch.full_like(xx[others], fill)
        if fill is not None:
            xx[others, ::2] = float("inf")
        rows_of(xx, dd, picks, picks, nb, "the other rows hold " + ("values around 1e4" if fill is None
                                                                     else "NaN and inf"))
    if backward and weight_grads and affine:
        for pad in ZERO_ROW_PADS:
            xx = torch.cat([x, rnd(pad, N)])
            dd = torch.cat([dy, torch.zeros(pad, N, dtype=dt, device=device)])
            got = _run(fn, op, xx, w, b, eps, dd)
            for o in ("dweight", "dbias"):
                if o in got:
                    report.checks.append(Check(f"zero_rows_{pad}", o, f"{pad} more rows with grad_out = 0 "
                                               f"(M = {M + pad})", 1, _rows_differ(got[o], full[o], name)))
    return report


def assert_batch_invariant(fn, op: str = "layer_norm", **kw) -> BatchReport:
    """AssertionError with the report unless every check of `batch_invariance` passes."""
    report = batch_invariance(fn, op, **kw)
    if not report.ok:
        raise AssertionError(str(report))
    return report
