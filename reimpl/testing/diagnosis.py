"""Why a user's forward differs from torch's: run torch's computation with one step changed
(reimpl/emulator/variants.py) on the rows that differ, and name the change that gives the user's bits.

Needs NumPy only, so the diagnosis also runs on a CPU from saved tensors (`python -m reimpl judge
--from FILE`). The order of the search: every single change; if none reproduces the user's bits, every
pair of them; if still none, the closest variant and the first step of the computation (mean, rstd,
output) at which the user's numbers leave it.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..emulator import variants as V
from ..emulator.fp import BY_NAME
from .bits import as_bits, equal_mask

T_BY_DTYPE = {"float32": BY_NAME["float"], "float16": BY_NAME["c10::Half"], "bfloat16": BY_NAME["c10::BFloat16"]}
MAX_ROWS = 32  # enough rows to tell most variants apart; the variants run on all of them at once


@dataclass
class Rows:
    """The failing rows of one case, as the diagnosis needs them (storage-dtype NumPy arrays)."""
    op: str                      # "layer_norm" or "rms_norm"
    dtype: str                   # "float32", "float16", "bfloat16"
    x: np.ndarray                # [rows, N]
    weight: np.ndarray | None
    bias: np.ndarray | None
    eps: float | None
    out: np.ndarray              # the user's output on these rows
    mean: np.ndarray | None = None   # the user's statistics, float32, where their kernel returns them
    rstd: np.ndarray | None = None
    torch_path: str = "vectorized"   # the path torch's host dispatch takes for this input

    def save(self, path) -> None:
        arrays = {k: v for k, v in dict(x=self.x, weight=self.weight, bias=self.bias, out=self.out,
                                         mean=self.mean, rstd=self.rstd).items() if v is not None}
        meta = np.array([self.op, self.dtype, repr(self.eps), self.torch_path])
        np.savez_compressed(path, meta=meta, **arrays)

    @classmethod
    def load(cls, path) -> "Rows":
        with np.load(path) as z:
            op, dtype, eps, torch_path = (str(s) for s in z["meta"])
            get = lambda k: z[k] if k in z.files else None  # noqa: E731
            return cls(op, dtype, z["x"], get("weight"), get("bias"), None if eps == "None" else float(eps),
                       z["out"], get("mean"), get("rstd"), torch_path)


@dataclass
class Candidate:
    key: str                     # a name from variants.SINGLE, "a + b" for a pair, or "torch"
    meaning: str
    variant: V.Variant
    equal: dict[str, float]      # output -> fraction of its elements with the user's bits
    exact: bool


@dataclass
class Diagnosis:
    rows: int
    baseline: str                              # the computation torch does for these rows
    candidates: list[Candidate] = field(default_factory=list)
    reproduced_by: list[str] = field(default_factory=list)
    closest: str | None = None
    first_divergence: str | None = None        # where the user's numbers leave the closest variant
    note: str = ""

    def table(self) -> str:
        head = f"{'variant':<26} {'out':>7} {'mean':>7} {'rstd':>7}  what it means"
        lines = [head, "-" * len(head)]
        for c in sorted(self.candidates, key=lambda c: -_score(c)):
            cols = [f"{100 * c.equal[k]:6.1f}%" if k in c.equal else "      -" for k in ("out", "mean", "rstd")]
            lines.append(f"{c.key + (' *' if c.exact else ''):<26} {cols[0]} {cols[1]} {cols[2]}  {c.meaning}")
        return "\n".join(lines)

    def verdict(self) -> str:
        if self.note and not self.candidates:
            return self.note
        if self.reproduced_by:
            which = " or ".join(self.reproduced_by)
            more = " (these rows do not tell them apart)" if len(self.reproduced_by) > 1 else ""
            return f"reproduced exactly by: {which}{more}"
        return (f"no variant reproduces your bits; the closest is {self.closest}, and your numbers first leave it "
                f"at {self.first_divergence}")

    def __str__(self) -> str:
        return f"diagnosis on {self.rows} rows (torch: {self.baseline}): {self.verdict()}\n{self.table()}"


def _score(c: Candidate) -> float:
    return sum(c.equal.values()) / len(c.equal) + (1 if c.exact else 0)


def _run(v: V.Variant, rows: Rows):
    T = T_BY_DTYPE[rows.dtype]
    return V.forward_rows(v, rows.op, T, rows.x, rows.weight, rows.bias, rows.eps)


def _equal(rows: Rows, got) -> dict[str, float]:
    y, mean, rstd = got
    out = {"out": float(equal_mask(as_bits(rows.out, rows.dtype)[0], as_bits(y, rows.dtype)[0],
                                   rows.dtype).mean())}
    for k, mine, theirs in (("mean", rows.mean, mean), ("rstd", rows.rstd, rstd)):
        if mine is not None and theirs is not None:
            a = np.asarray(mine, np.float32).reshape(-1)
            out[k] = float(equal_mask(a.view(np.uint32), np.asarray(theirs, np.float32).view(np.uint32),
                                      "float32").mean())
    return out


def _candidate(key, meaning, v, rows) -> Candidate:
    eq = _equal(rows, _run(v, rows))
    return Candidate(key, meaning, v, eq, all(f == 1.0 for f in eq.values()))


def _first_divergence(rows: Rows, closest: V.Variant) -> str:
    """The first step of `closest`'s computation whose value the user's differs from."""
    _, mean, rstd = _run(closest, rows)
    if rows.mean is not None and mean is not None and not np.array_equal(
            np.asarray(rows.mean, np.float32).reshape(-1).view(np.uint32), mean.view(np.uint32)):
        return "the mean (the reduction: its order, its tree, or its formula)"
    if rows.rstd is not None and not np.array_equal(
            np.asarray(rows.rstd, np.float32).reshape(-1).view(np.uint32), rstd.view(np.uint32)):
        return "rstd (the variance, where eps is added, or the reciprocal square root)"
    if rows.mean is None and rows.rstd is None:
        return ("the statistics or the output step; return mean and rstd from your kernel to tell which")
    return "the output step (the affine arithmetic, its fusion, or the cast to the storage type)"


def diagnose(rows: Rows, pairs: bool = True) -> Diagnosis:
    """Name the change of torch's computation that gives the user's bits on these rows."""
    if rows.dtype not in T_BY_DTYPE:
        return Diagnosis(len(rows.x), "-", note=f"no variants are modelled for {rows.dtype}")
    rows = Rows(**{**rows.__dict__, **_first_rows(rows)})
    N = rows.x.shape[1]
    baseline = "vectorized kernel" if rows.torch_path == "vectorized" else "fallback kernels"
    d = Diagnosis(len(rows.x), baseline)
    if N % V.VEC:
        d.note = (f"N = {N} is not a multiple of {V.VEC}: torch runs its fallback kernels, and the variants model "
                  "changes of the vectorized kernel only")
        return d
    torch_v = V.TORCH if rows.torch_path == "vectorized" else V.Variant(path="fallback")
    d.candidates.append(_candidate("torch", f"torch's own computation ({baseline})", torch_v, rows))
    singles = {k: (v, m) for k, (v, m) in V.SINGLE.items() if V.applicable(v, rows.op, N) and v != torch_v}
    if rows.torch_path == "fallback":
        singles = {k: (v, m) for k, (v, m) in singles.items() if k != "fallback"}
        singles["vectorized"] = (V.TORCH, "the vectorized kernel's rounding on a row torch sends to the fallback")
    for key, (v, meaning) in singles.items():
        d.candidates.append(_candidate(key, meaning, v, rows))
    d.reproduced_by = [c.key for c in d.candidates if c.exact]
    if not d.reproduced_by and pairs and rows.torch_path == "vectorized":
        for (ka, (va, _)), (kb, (vb, _)) in itertools.combinations(singles.items(), 2):
            v = V.combined(va, vb)
            if v is not None:
                c = _candidate(f"{ka} + {kb}", "both changes", v, rows)
                if c.exact:
                    d.candidates.append(c)
        d.reproduced_by = [c.key for c in d.candidates if c.exact]
    if not d.reproduced_by:
        best = max(d.candidates, key=_score)
        d.closest = best.key
        d.first_divergence = _first_divergence(rows, best.variant)
    return d


def _first_rows(rows: Rows) -> dict:
    """At most MAX_ROWS rows: the diagnosis is about which computation, not how many rows."""
    k = MAX_ROWS
    cut = lambda a: None if a is None else np.asarray(a).reshape(len(rows.x), -1)[:k]  # noqa: E731
    return dict(x=rows.x[:k], out=rows.out[:k],
                mean=None if rows.mean is None else cut(rows.mean).reshape(-1),
                rstd=None if rows.rstd is None else cut(rows.rstd).reshape(-1))
