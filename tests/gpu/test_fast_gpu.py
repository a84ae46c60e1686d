"""GPU: reimpl.fast gives torch's bits. The mirror's whole forward parity matrix (shape grid,
paths, value kinds, eps, layouts, the 2000-case random sweep) runs with the fast runtime in place
of the mirror's, plus a sweep of more than 100,000 rows aimed at the fast kernel itself (N a
multiple of 4 from 4 to 65536, every dtype, value kind and affine combination, eps from 0 to 10).
Each output is compared with torch's bit for bit (NaN by position). Counts go to the GPU summary
under fast_* groups; `fast_kernel_cases` counts the cases that really launched the fast kernel."""
import random

import pytest
import torch

from reimpl.checks import cases
from reimpl.checks.cases import DTYPES, VALUE_KINDS, Case
from tests.conftest import record
from tests.gpu.fast_runs import run_fast

pytestmark = pytest.mark.gpu

GROUPS = {"shape_grid": cases.shape_grid, "paths": cases.path_cases, "values": cases.value_cases,
          "eps": cases.eps_cases, "layouts": cases.layout_cases, "random": lambda: cases.random_cases(2000),
          "plans": lambda: plan_cases()}


def fast_sweep(rows_wanted: int = 100_000, seed: int = 99) -> list[Case]:
    """Cases the fast kernel takes (N % 4 == 0, aligned), mixed N, dtype, values, affine and eps."""
    rng = random.Random(seed)
    out, rows = [], 0
    while rows < rows_wanted:
        n = 4 * rng.choice((rng.randint(1, 64), rng.randint(1, 1024), rng.randint(1, 4096), rng.randint(1, 16384)))
        m = rng.choice((1, rng.randint(1, 64), rng.randint(64, 2048))) if n <= 16384 else rng.randint(1, 16)
        m = max(1, min(m, 2_000_000 // n))  # keep each case small enough to compare quickly
        op = rng.choice(("layer_norm", "rms_norm"))
        out.append(Case(op, rng.choice(("fp32", "fp16", "bf16")), (m, n), weight=rng.random() < 0.8,
                        bias=rng.random() < 0.7, values=rng.choice(VALUE_KINDS + ("normal",) * 3),
                        eps=rng.choice((1e-5, 1e-6, 1e-12, 0.0, 1e-2, 10.0)), seed=len(out)))
        rows += m
    return out


def plan_cases() -> list[Case]:
    """Every warp-kernel shape the plan chooses, with every value kind and affine combination: rows
    that fill every slot (N = 512, 1024: the `full` instances) and their neighbours, and for 16-bit
    N = 1024 the H100's four-row band (2112 <= M <= 6336 on 132 SMs), its edges, and a row count
    that leaves the last warp short. Over the five large M, each value kind meets each of the five
    (op, weight, bias) combinations once. And every group size of the group kernel (N from 4 to
    128, groups of 1 to 32 lanes, some with empty lanes), with row counts that leave the last warp
    and the last block short, and more than one set of rows a warp. Subnormal rows here once caught
    a mean that underflowed to -0, which torch's merge with an empty thread turns into +0. And the
    stream kernel: rows of 17 to 128 vectors a thread, whole chunks and partial ones (N = 20000:
    39 or 40 vectors, a chunk of 16 and its halves; 16388: thread 0 holds one more), rows held whole
    in shared memory and rows held in part; and, for 16-bit LayerNorm, the register kernel it keeps
    above 24 rows per SM (3400 rows of 16384)."""
    combos = (("layer_norm", True, True), ("layer_norm", True, False), ("layer_norm", False, False),
              ("rms_norm", True, False), ("rms_norm", False, False))
    out = []
    for dtype in ("fp32", "fp16", "bf16"):
        for n in (508, 512, 516, 1020, 1024, 2048):
            for m in (3, 130):
                for values in VALUE_KINDS:
                    for op, weight, bias in combos:
                        out.append(Case(op, dtype, (m, n), weight=weight, bias=bias, values=values, seed=len(out)))
        for k, m in enumerate((2111, 2112, 4099, 6336, 6337)):
            for i, values in enumerate(VALUE_KINDS):
                op, weight, bias = combos[(i + k) % len(combos)]
                out.append(Case(op, dtype, (m, 1024), weight=weight, bias=bias, values=values,
                                eps=(1e-5, 0.0)[i % 2], seed=len(out)))
        for n in (4, 8, 12, 16, 28, 32, 48, 64, 100, 124, 128):
            for m in (1, 37, 1001, 5000):
                for values in VALUE_KINDS:
                    for op, weight, bias in combos:
                        out.append(Case(op, dtype, (m, n), weight=weight, bias=bias, values=values, seed=len(out)))
        for n, ms in ((8196, (3, 40)), (12288, (3, 40)), (16384, (3,)), (16388, (3, 40)), (20000, (3, 40)),
                      (32768, (3,)), (65536, (2,))):
            for m in ms:
                for values in VALUE_KINDS:
                    for op, weight, bias in combos:
                        out.append(Case(op, dtype, (m, n), weight=weight, bias=bias, values=values, seed=len(out)))
        if dtype != "fp32":
            for op, weight, bias in combos[:3]:
                out.append(Case(op, dtype, (3400, 16384), weight=weight, bias=bias, seed=len(out)))
        out += lane_cases(dtype, combos)
    return out


def lane_cases(dtype: str, combos) -> list[Case]:
    """The lane kernel's rows (8 to 64 chunks of 16 bytes: 16-bit N = 64 to 512, fp32 N = 32 to 256),
    with one warp's 32 rows, a block's, and row counts that leave the last warp with 1 or 31 rows,
    every value kind with every (op, weight, bias)."""
    out = []
    for n in ((32, 64, 128, 256) if dtype == "fp32" else (64, 128, 256, 512)):
        for m in (1, 31, 32, 64, 97, 2049):
            for values in VALUE_KINDS:
                for op, weight, bias in combos:
                    out.append(Case(op, dtype, (m, n), weight=weight, bias=bias, values=values,
                                    eps=(1e-5, 0.0, 1e-12)[(m + n) % 3], seed=len(out)))
        if dtype != "fp32":  # 8-byte aligned, as torch's vectorized kernel asks, but not 16: not the lane kernel
            for offsets in ((4, 0, 0), (0, 4, 0), (0, 0, 4)):
                out.append(Case("layer_norm", dtype, (97, n), x_offset=offsets[0], w_offset=offsets[1],
                                b_offset=offsets[2], seed=len(out)))
    return out


def _run(group: str, cs: list[Case]):
    return run_fast(f"fast_{group}", "fast_kernel_cases", "fast_launches", cs)


@pytest.mark.parametrize("group", list(GROUPS))
def test_fast_runtime_matches_torch_on_the_forward_matrix(group):
    bad, fast_cases = _run(group, GROUPS[group]())
    assert not bad, bad[:10]
    assert fast_cases > 0


def test_fast_kernel_sweep_of_100000_rows():
    cs = fast_sweep()
    assert sum(c.shape[0] for c in cs) >= 100_000
    bad, fast_cases = _run("sweep", cs)
    assert not bad, bad[:10]
    # every case here is one torch sends to its vectorized kernel; the fast kernel takes all but
    # LayerNorm with a bias and no weight, which reimpl.fast.forward.takes leaves to the mirror
    assert fast_cases == sum(not (c.op == "layer_norm" and c.bias and not c.weight) for c in cs)


@pytest.mark.parametrize("N", [4, 16, 64, 100, 128])
@pytest.mark.parametrize("scale", [1e19, 2e19, 1e30, 3e38])
def test_group_kernel_keeps_torchs_nan_where_a_mean_squared_overflows(N, scale):
    """Torch merges each thread's state with threads that hold nothing; when the mean's square
    overflows, that merge turns sigma2 into NaN (inf * 0). The group kernel skips the shuffle of
    those merges but keeps that term: rows of huge fp32 values, some overflowing, some not, give
    torch's out, mean and rstd."""
    import reimpl.fast
    from reimpl.checks.parity import bit_mismatches
    gen = torch.Generator(device="cuda").manual_seed(N)
    x = (torch.rand(64, N, device="cuda", generator=gen) + 0.5) * scale
    x[::3] *= -1
    x[1::4, : N // 2] = 1.0  # rows whose mean is far smaller than their largest values
    w, b = torch.randn(N, device="cuda", generator=gen), torch.randn(N, device="cuda", generator=gen)
    want = torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)
    rt = reimpl.fast.fast_runtime()
    before = rt.fast_launches
    got = reimpl.fast.native_layer_norm(x, (N,), w, b, 1e-5)
    assert rt.fast_launches == before + 1
    for g, t in zip(got, want):
        assert bit_mismatches(g, t) == 0


@pytest.fixture
def fresh_plans():
    """The fast runtime's launch plans emptied before and after: a test that changes the plan's
    constants must not leave plans made with them."""
    import reimpl.fast
    rt = reimpl.fast.fast_runtime()
    rt.plans.clear()
    yield rt
    rt.plans.clear()


def test_lane_kernel_at_every_row_count(fresh_plans, monkeypatch):
    """The lane kernel on its rows whatever M (the plan gives it only many rows): one warp's 32 rows,
    a block's, a last warp with 1 or 31 rows, every value kind and (op, weight, bias); and the
    pointers it must not take (8-byte aligned only), which go to the other kernels."""
    from reimpl.fast import forward
    monkeypatch.setattr(forward, "LANE_ROWS_PER_SM", (0, 0))
    before = fresh_plans.launch_counts[1]
    cs = [c for dtype in ("fp32", "fp16", "bf16") for c in lane_cases(dtype, (
        ("layer_norm", True, True), ("layer_norm", True, False), ("layer_norm", False, False),
        ("rms_norm", True, False), ("rms_norm", False, False)))]
    bad, fast_cases = _run("lanes", cs)
    assert not bad, bad[:10]
    assert fast_cases == len(cs) and fresh_plans.launch_counts[1] > before


def test_lane_kernel_keeps_torchs_two_roundings_for_a_tiny_eps(fresh_plans, monkeypatch):
    """Torch rounds sigma2 / N and then sigma2 / N + eps; one FFMA of the two would differ where the
    quotient is subnormal and eps is below about 2^-124. Rows of tiny values, eps down to subnormal."""
    from reimpl.fast import forward
    monkeypatch.setattr(forward, "LANE_ROWS_PER_SM", (0, 0))
    cs = [Case(op, dtype, (97, n), weight=True, bias=op == "layer_norm", values=values, eps=eps, seed=i)
          for i, (op, dtype, n, values, eps) in enumerate(
              (op, dtype, n, values, eps) for op in ("layer_norm", "rms_norm") for dtype in ("fp32", "bf16")
              for n in (64, 128) for values in ("subnormal", "small", "zeros") for eps in (1e-38, 2e-38, 1e-44))]
    bad, fast_cases = _run("lanes_tiny_eps", cs)
    assert not bad, bad[:10]
    assert fast_cases == len(cs)


@pytest.mark.parametrize("blocks", [1, 2, 3, 7, 10 ** 6])
def test_stream_kernel_gives_torchs_bits_whatever_it_keeps_in_shared_memory(blocks, fresh_plans, monkeypatch):
    """The stream kernel reads its stash size S from the launch; every S gives torch's bits. Sizing
    the stash for 1, 2, 3 or 7 blocks per SM keeps the whole row, most of it or a few vectors a
    thread, and 10^6 blocks leaves no room at all (S = 0: both passes read global memory)."""
    import reimpl.fast
    from reimpl.checks.parity import bit_mismatches
    from reimpl.fast import forward as F
    monkeypatch.setattr(F, "STREAM_BLOCKS", blocks)
    before = fresh_plans.fast_launches
    launches = 0
    for dtype, M, N in (("fp32", 5, 65536), ("bf16", 9, 20000), ("fp16", 7, 16388), ("fp32", 300, 12288)):
        gen = torch.Generator(device="cuda").manual_seed(N)
        x = torch.randn(M, N, device="cuda", dtype=DTYPES[dtype], generator=gen) * 3 + 1
        x[1, 5] = float("nan")
        w, b = (torch.randn(N, device="cuda", dtype=DTYPES[dtype], generator=gen) for _ in range(2))
        T = {"fp32": F.K.float_, "bf16": F.K.BFloat16, "fp16": F.K.Half}[dtype]
        assert all(F.plan(T, rms, True, not rms, M, N, 132)[0].template is F.STREAM_TEMPLATE for rms in (False, True))
        for got, want in ((reimpl.fast.native_layer_norm(x, (N,), w, b, 1e-5),
                           torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)),
                          (reimpl.fast.rms_norm(x, (N,), w, 1e-6), torch.nn.functional.rms_norm(x, (N,), w, 1e-6))):
            launches += 1
            for g, t in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                assert bit_mismatches(g, t) == 0, (dtype, M, N)
    assert fresh_plans.fast_launches == before + launches


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_fast_autograd_and_module(dtype):
    """layer_norm / rms_norm through autograd, and nn modules switched with use_fast: torch's forward
    bits and gradients."""
    import reimpl
    from reimpl import fast
    dt = DTYPES[dtype]
    x = torch.randn(64, 768, device="cuda", dtype=dt)
    w = torch.randn(768, device="cuda", dtype=dt)
    b = torch.randn(768, device="cuda", dtype=dt)
    dy = torch.randn_like(x)
    outs = []
    for fn in (lambda x_, w_, b_: torch.nn.functional.layer_norm(x_, (768,), w_, b_),
               lambda x_, w_, b_: fast.layer_norm(x_, (768,), w_, b_)):
        xs, ws, bs = (t.clone().requires_grad_(True) for t in (x, w, b))
        y = fn(xs, ws, bs)
        y.backward(dy)
        outs.append([y.detach(), xs.grad, ws.grad, bs.grad])
    for a, t in zip(*outs):
        assert torch.equal(a.view(torch.int16 if a.element_size() == 2 else torch.int32),
                           t.view(torch.int16 if t.element_size() == 2 else torch.int32))
    m = fast.use_fast(reimpl.nn.RMSNorm(768, device="cuda", dtype=dt))
    ref = torch.nn.RMSNorm(768, device="cuda", dtype=dt)
    before = fast.fast_runtime().fast_launches
    assert torch.equal(m(x), ref(x)) and fast.fast_runtime().fast_launches == before + 1


COUNT_RECIPROCALS = r"""
#include "fast_layer_norm.cu"
extern "C" __global__ void count_reciprocals(float* out, const int n) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c <= n) out[c] = reimpl_fast::count_reciprocal(float(c));
}
"""


def test_count_reciprocal_is_the_ieee_reciprocal_of_every_count():
    """The kernels' shortened reciprocal (no range check, no slow path) equals IEEE 1/c, computed
    here by NumPy on the CPU, for every count c = 1 .. 2^24 a row of torch's vectorized path can
    produce; c = 0 gives NaN, which combine() replaces by torch's zeros."""
    import cupy
    import numpy as np
    from reimpl.device import compile as compile_mod
    from reimpl.fast import forward as FK
    n = 2 ** 24
    module, _, _, _ = compile_mod.load_probe(COUNT_RECIPROCALS, "count_reciprocals.cu",
                                             (FK.SOURCE.directory, *FK.SOURCE.include_dirs))
    out = cupy.empty(n + 1, dtype=cupy.float32)
    module.get_function("count_reciprocals")(((n + 256) // 256,), (256,), (out, np.int32(n)))
    got = cupy.asnumpy(out)
    want = np.float32(1) / np.arange(1, n + 1, dtype=np.float32)
    bad = np.flatnonzero(got[1:].view(np.uint32) != want.view(np.uint32))
    record("fast_count_reciprocal", n, int(bad.size))
    assert bad.size == 0, [(int(c) + 1, float(got[c + 1]), float(want[c])) for c in bad[:5]]
    assert np.isnan(got[0])
