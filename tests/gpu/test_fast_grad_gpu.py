"""GPU: reimpl.fast's grad-input kernel gives torch's dX bits. The mirror's whole backward parity
matrix (shape grid, partial reduction, paths, masks, values, layouts, the 1000-case random sweep)
runs with the fast runtime in place of the mirror's (dgamma and dbeta stay the mirror's and are
compared too), plus the plan's every kernel shape at and around its edges with every value kind,
and a sweep of more than 100,000 rows aimed at the fast kernel (N a multiple of 4 from 4 to
65536, every dtype, value kind of x and of dy, weight present or not, eps). Each output is compared
with torch's bit for bit (NaN by position). Counts go to the backward GPU summary under bwd_fast_*
groups; `bwd_fast_grad_kernel_cases` counts the cases that really launched the fast dX kernel."""
import random

import pytest
import torch

from reimpl.checks import cases_backward as bwd
from reimpl.checks.cases import DTYPES, VALUE_KINDS
from tests.gpu.fast_runs import run_fast

pytestmark = pytest.mark.gpu

GROUPS = {"shape_grid": bwd.shape_grid, "partial": bwd.partial_cases, "paths": bwd.path_cases,
          "masks": bwd.mask_cases, "values": bwd.value_cases, "layouts": bwd.layout_cases,
          "random": lambda: bwd.random_cases(1000), "plans": lambda: plan_cases()}

# N at each edge of the plan (fast/grad_input.py): the warp kernel below 512, block R = 1, 2, 4,
# 8, 16, the shared-memory split up to 16384, streaming beyond
PLAN_NS = (4, 252, 508, 512, 516, 1020, 1024, 1028, 2044, 2048, 2052, 4092, 4096, 4100, 8188, 8192, 8196, 12288,
           16380, 16384, 16388, 65536)


def plan_cases() -> list[bwd.BackwardCase]:
    """Every block shape and the warp kernel, each dtype, op and weight flag, with the value kinds
    of x and of dy taking turns."""
    out = []
    for dt in ("fp32", "fp16", "bf16"):
        for i, n in enumerate(PLAN_NS):
            for j, (op, w) in enumerate((("layer_norm", True), ("layer_norm", False), ("rms_norm", True),
                                         ("rms_norm", False))):
                k = i * 4 + j
                out.append(bwd.BackwardCase(op, dt, (3 if n > 16384 else 37, n), weight=w, bias=False,
                                            mask=(True, False, False), values=VALUE_KINDS[k % len(VALUE_KINDS)],
                                            dy_values=VALUE_KINDS[(k // 3) % len(VALUE_KINDS)],
                                            eps=(1e-5, 0.0, 1e-2)[k % 3], seed=len(out)))
    return out


def fast_grad_sweep(rows_wanted: int = 100_000, seed: int = 77) -> list[bwd.BackwardCase]:
    """Cases torch sends to its vectorized grad-input kernel: mixed N, dtype, values, weight, eps."""
    rng = random.Random(seed)
    out, rows = [], 0
    while rows < rows_wanted:
        n = 4 * rng.choice((rng.randint(1, 64), rng.randint(1, 1024), rng.randint(1, 4096), rng.randint(1, 16384)))
        m = rng.choice((1, rng.randint(1, 64), rng.randint(64, 2048))) if n <= 16384 else rng.randint(1, 16)
        m = max(1, min(m, 2_000_000 // n))
        op = rng.choice(("layer_norm", "rms_norm"))
        out.append(bwd.BackwardCase(op, rng.choice(("fp32", "fp16", "bf16")), (m, n), weight=rng.random() < 0.8,
                                    bias=False, mask=(True, False, False),
                                    values=rng.choice(VALUE_KINDS + ("normal",) * 3),
                                    dy_values=rng.choice(VALUE_KINDS + ("normal",) * 5),
                                    eps=rng.choice((1e-5, 1e-6, 1e-12, 0.0, 1e-2, 10.0)), seed=len(out)))
        rows += m
    return out


def _run(group: str, cs) -> tuple[list[str], int]:
    return run_fast(f"bwd_fast_{group}", "bwd_fast_grad_kernel_cases", "fast_grad_launches", cs)


@pytest.mark.parametrize("group", list(GROUPS))
def test_fast_runtime_matches_torch_on_the_backward_matrix(group):
    bad, fast_cases = _run(group, GROUPS[group]())
    assert not bad, bad[:10]
    assert fast_cases > 0


@pytest.mark.parametrize("group", ["plans", "shape_grid", "random"])
def test_rows_from_the_last_up_give_torchs_bits(monkeypatch, group):
    """grad_input.ROWS_FROM_LAST: the kernels take their rows from the last up; every row's bits
    stay torch's (the warp kernel's last, partial block of rows now runs first)."""
    from reimpl.fast import fast_runtime, grad_input
    monkeypatch.setattr(grad_input, "ROWS_FROM_LAST", True)
    fast_runtime().plans.clear()
    bad, fast_cases = _run(f"from_last_{group}", GROUPS[group]())
    fast_runtime().plans.clear()
    assert not bad, bad[:10]
    assert fast_cases > 0


def test_fast_grad_kernel_sweep_of_100000_rows():
    cs = fast_grad_sweep()
    assert sum(c.shape[0] for c in cs) >= 100_000
    bad, fast_cases = _run("sweep", cs)
    assert not bad, bad[:10]
    assert fast_cases == len(cs)  # every case is aligned with N % 4 == 0: torch's vectorized kernel


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("n", [256, 1024, 16384])
def test_fast_autograd_runs_the_fast_grad_kernel(dtype, n):
    """Autograd through reimpl.fast.layer_norm / rms_norm: the backward runs under the fast runtime
    (one fast dX launch per backward) and gives torch's gradients."""
    from reimpl import fast
    dt = DTYPES[dtype]
    x, w, b = (torch.randn(*s, device="cuda", dtype=dt) for s in ((64, n), (n,), (n,)))
    dy = torch.randn_like(x)
    for theirs, ours, args in ((torch.nn.functional.layer_norm, fast.layer_norm, (x, w, b)),
                               (torch.nn.functional.rms_norm, fast.rms_norm, (x, w))):
        grads = []
        for fn in (theirs, ours):
            leaves = [t.clone().requires_grad_(True) for t in args]
            before = fast.fast_runtime().fast_grad_launches
            fn(leaves[0], (n,), *leaves[1:]).backward(dy)
            grads.append([t.grad for t in leaves])
        assert fast.fast_runtime().fast_grad_launches == before + 1
        for a, t in zip(*grads):
            iview = torch.int16 if a.element_size() == 2 else torch.int32
            assert torch.equal(a.view(iview), t.view(iview))
