"""Judge a user's LayerNorm/RMSNorm against torch's bits over a case matrix.

The user's function takes F.layer_norm's arguments `(x, normalized_shape, weight, bias, eps)`, or
F.rms_norm's `(x, normalized_shape, weight, eps)`, and returns the output, or a tuple whose first
item is the output and whose others are mean and rstd (LayerNorm) or rstd (RMSNorm). On a CUDA
device the reference is torch's own op on the same tensors; on the CPU it is the emulator, which
gives torch's H100 bits (reimpl/emulator), so a NumPy or CPU prototype can be judged without a GPU.

With `backward=True` the function must be differentiable: the output is back-propagated with the
case's grad_out and the gradients of x, weight and bias are compared with torch's autograd ones.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..checks import cases as C
from ..checks import cases_backward as CB
from .bits import Difference, compare, storage
from .diagnosis import Diagnosis, Rows, diagnose

OPS = ("layer_norm", "rms_norm")
DEFAULT_DTYPES = ("fp32", "fp16", "bf16")
_DTYPE_NAME = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64"}


def default_cases(op: str, dtypes=DEFAULT_DTYPES, backward: bool = False) -> list:
    """The repository's case matrix for one op: both paths and every affine combination, value kinds
    (offset, tiny, huge, subnormal, zeros, inf, nan), eps down to 0, multi-dimensional and transposed
    inputs, misaligned pointers."""
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, not {op!r}")
    if backward:
        groups = CB.path_cases() + CB.value_cases() + CB.layout_cases()
        keep = [c for c in groups if c.op == op and c.dtype in dtypes and all(
            m for m, has in zip(c.output_mask, (True, c.weight, c.bias)) if has)]
    else:
        groups = C.path_cases() + C.value_cases() + C.eps_cases() + C.layout_cases()
        keep = [c for c in groups if c.op == op and c.dtype in dtypes]
    seen, out = set(), []
    for c in keep:
        if c.id not in seen:
            seen.add(c.id)
            out.append(c)
    return out


@dataclass
class CaseResult:
    case: object
    differences: list[Difference]
    diagnosis: Diagnosis | None = None
    error: str | None = None
    rows: Rows | None = None   # the failing rows the diagnosis ran on (`python -m reimpl judge --save`)

    @property
    def ok(self) -> bool:
        return self.error is None and all(d.ok for d in self.differences)

    def __str__(self) -> str:
        head = f"{self.case.id}: " + ("equal to torch's bits" if self.ok else "DIFFERS")
        if self.error:
            return f"{head}\n  your function raised: {self.error}"
        body = [str(d) for d in self.differences if not d.ok]
        if self.diagnosis is not None:
            body.append(str(self.diagnosis))
        return "\n".join([head, *("  " + line for b in body for line in b.splitlines())])


@dataclass
class Verdict:
    op: str
    device: str
    backward: bool
    results: list[CaseResult] = field(default_factory=list)

    @property
    def failed(self) -> list[CaseResult]:
        return [r for r in self.results if not r.ok]

    @property
    def ok(self) -> bool:
        return not self.failed

    def summary(self) -> str:
        what = "backward (dX, dweight, dbias)" if self.backward else "forward"
        ref = "torch's op on this GPU" if self.device.startswith("cuda") else "the emulator (torch's H100 bits)"
        return (f"{self.op} {what}: {len(self.results) - len(self.failed)} of {len(self.results)} cases give "
                f"torch's bits (reference: {ref})")

    def __str__(self) -> str:
        lines = [self.summary()]
        for r in self.failed[:5]:
            lines.append(str(r))
        if len(self.failed) > 5:
            lines.append(f"... and {len(self.failed) - 5} more failing cases: "
                         + ", ".join(r.case.id for r in self.failed[5:15]))
        return "\n".join(lines)


def _call_forward(fn, op, case, x, w, b):
    ns = list(case.normalized_shape)
    got = fn(x, ns, w, b, case.eps) if op == "layer_norm" else fn(x, ns, w, case.eps)
    return tuple(got) if isinstance(got, (tuple, list)) else (got,)


def _reference_forward(case, x, w, b):
    """torch's outputs for the case: torch's op on a CUDA device, the emulator on the CPU."""
    if x.device.type == "cuda":
        return tuple(case.run_torch(x, w, b))
    from ..emulator.api import run_case
    return tuple(run_case(case, x, w, b))


def _torch_path(case) -> str:
    from ..checks.plan import host_launches
    names = [l.kernel for l in host_launches(case)]
    return "vectorized" if any("vectorized_layer_norm_kernel" in n for n in names) else "fallback"


def _stat_matches(name, mine, ref) -> Difference:
    ref_np = storage(ref)
    mine_np = storage(mine)
    if mine_np is not None and mine_np.size == ref_np.size:
        mine_np = mine_np.reshape(ref_np.shape).astype(ref_np.dtype, copy=False)
    return compare(name, mine_np, ref_np)


def judge_forward_case(fn, op: str, case, device: str, diagnose_rows: bool = True) -> CaseResult:
    x, w, b = case.make_inputs(device)
    try:
        got = _call_forward(fn, op, case, x, w, b)
    except Exception as e:  # the user's kernel failing on a case is a finding, not a crash of the judge
        return CaseResult(case, [], error=f"{type(e).__name__}: {e}")
    ref = _reference_forward(case, x, w, b)
    dt = _DTYPE_NAME[case.dtype]
    n = int(np.prod(case.normalized_shape))
    diffs = [compare("out", storage(got[0]), storage(ref[0]), dt, row_size=n)]
    stats = {}
    for name, mine, theirs in zip(case.output_names[1:], got[1:], ref[1:]):
        diffs.append(_stat_matches(name, mine, theirs))
        stats[name] = storage(mine)
    result = CaseResult(case, diffs)
    if not result.ok and diagnose_rows and dt != "float64":
        result.rows = _failing_rows(op, case, x, w, b, got[0], stats, diffs)
        result.diagnosis = diagnose(result.rows)
    return result


def _failing_rows(op, case, x, w, b, out, stats, diffs: list[Difference]) -> Rows:
    """The rows where the output or a statistic differs (statistics hold one value per row)."""
    dt = _DTYPE_NAME[case.dtype]
    n = int(np.prod(case.normalized_shape))
    rows = sorted({r for d in diffs for r in d.rows})  # a statistic's rows are its elements
    rows = rows or list(range(min(8, x.numel() // max(n, 1))))
    xs = storage(x).reshape(-1, n)[rows]
    ys = storage(out).reshape(-1, n)[rows]
    flat = lambda a: None if a is None else storage(a).reshape(-1)  # noqa: E731
    pick = lambda a: None if a is None or a.size != len(storage(x).reshape(-1, n)) else a[rows]  # noqa: E731
    return Rows(op, dt, xs, flat(w), flat(b) if op == "layer_norm" else None, case.eps, ys,
                pick(flat(stats.get("mean"))), pick(flat(stats.get("rstd"))), _torch_path(case))


def _grads(fn, op, case, dy, x, w, b):
    x = x.detach().clone().requires_grad_(True)
    w = None if w is None else w.detach().clone().requires_grad_(True)
    b = None if b is None else b.detach().clone().requires_grad_(True)
    y = _call_forward(fn, op, case, x, w, b)[0]
    y.backward(dy)
    return [t.grad for t in (x, w, b) if t is not None]


def _reference_backward(case, dy, x, w, b):
    if x.device.type == "cuda":
        import torch.nn.functional as F
        ln = (lambda x_, ns, w_, b_, eps: F.layer_norm(x_, ns, w_, b_, eps)) if case.op == "layer_norm" else \
            (lambda x_, ns, w_, eps: F.rms_norm(x_, ns, w_, eps))
        return _grads(ln, case.op, case, dy, x, w, b)
    from ..emulator.api import backward_args, run_backward_case
    dy_, x_, mean, rstd, w_, b_ = backward_args(case, (dy, x, w, b))
    return [g for g in run_backward_case(case, dy_, x_, mean, rstd, w_, b_) if g is not None]


def judge_backward_case(fn, op: str, case, device: str) -> CaseResult:
    dy, x, _, _, w, b = case.make_args(device)
    try:
        got = _grads(fn, op, case, dy, x, w, b)
    except Exception as e:
        return CaseResult(case, [], error=f"{type(e).__name__}: {e}")
    ref = _reference_backward(case, dy, x, w, b)
    dt = _DTYPE_NAME[case.dtype]
    names = [n for n, has in zip(case.output_names, (True, w is not None, b is not None)) if has]
    return CaseResult(case, [compare(n, storage(g), storage(r), dt)
                             for n, g, r in zip(names, got, ref)])


def judge(fn, op: str = "layer_norm", cases=None, *, dtypes=DEFAULT_DTYPES, device: str | None = None,
          backward: bool = False, diagnose_rows: bool = True) -> Verdict:
    """Run `fn` on every case and compare with torch; a Verdict whether it passes or not."""
    import torch
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, not {op!r}")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    cases = default_cases(op, dtypes, backward) if cases is None else list(cases)
    verdict = Verdict(op, device, backward)
    for case in cases:
        if backward:
            verdict.results.append(judge_backward_case(fn, op, _as_backward(case), device))
        else:
            verdict.results.append(judge_forward_case(fn, op, case, device, diagnose_rows))
    return verdict


def _as_backward(case):
    if isinstance(case, CB.BackwardCase):
        return case
    d = case.as_dict()
    d["mask"] = tuple(itertools.islice((True, case.weight, case.bias and case.op == "layer_norm"), 3))
    return CB.BackwardCase.from_dict(d)


def assert_matches_torch(fn, op: str = "layer_norm", cases=None, **kw) -> Verdict:
    """Raise AssertionError with the full report (differences, then the diagnosis) unless `fn` gives
    torch's bits on every case; return the Verdict otherwise. Keywords as `judge`'s."""
    if cases is not None and not isinstance(cases, (list, tuple)):
        cases = [cases]  # one case, as the pytest plugin's fixture hands it
    verdict = judge(fn, op, cases, **kw)
    if not verdict.ok:
        raise AssertionError(str(verdict))
    return verdict
