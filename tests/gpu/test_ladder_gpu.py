"""GPU: every rung of the study ladder (reimpl/ladder/registry.py, CUDA and Triton) keeps the
accuracy its page states (reimpl/ladder/accuracy.py), on every input family, storage type and
shape of reimpl.checks.ladder_errors; and the facts the pages build on hold: the one-pass rung's variance
collapses on offset data where Welford's does not, and Welford's statistics of a constant row are
exact."""
import pytest
import torch

from reimpl.checks.ladder_errors import FAMILIES, all_rungs, measure, measure_backward, shapes
from reimpl.ladder import accuracy, registry

pytestmark = pytest.mark.gpu

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _needs_triton(rung):
    if registry.BY_NAME[rung].cuda is None:
        pytest.importorskip("triton", reason="the Triton rungs need Triton (on the GPU machine: 3.6)")


# the rung's name leads each test id, so an entry's `run` line (-k NAME) selects its tests
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("rung", all_rungs())
def test_rung_within_its_stated_bound(rung, dtype, family):
    _needs_triton(rung)
    name = str(dtype).removeprefix("torch.")
    limit, why = accuracy.bound(rung, name, family)
    worst = max((measure(rung, dtype, family, M, N) for M, N in shapes()), key=lambda r: r["rel_err"])
    assert worst["rel_err"] <= limit, f"{worst} exceeds {limit} ({why})"


def test_one_pass_variance_cancels_on_offset_data():
    """Measured fact: with |mean| = 1e4 and std 1, E[x^2] - mean^2 in float32 loses the variance
    (rstd off by orders of magnitude); Welford's rstd stays within a few percent."""
    one_pass = measure("warp_sums", torch.float32, "offset_1e4", 37, 4096)
    welford = measure("warp_welford", torch.float32, "offset_1e4", 37, 4096)
    assert one_pass["rstd_rel_err"] > 1.0, one_pass
    assert welford["rstd_rel_err"] < 0.1, welford


@pytest.mark.parametrize("rung", [e.name for e in registry.RUNGS if e.bound_family == "welford"])
def test_welford_normalises_a_constant_row_exactly(rung):
    """Every Welford update of a constant row has delta = 0 after the first, so the mean is the value
    itself and y = bias exactly; the two-pass sum is not exact and 1/sqrt(eps) amplifies its error."""
    for M, N in ((37, 12288), (1, 1000)):
        assert measure(rung, torch.float32, "constant", M, N)["max_abs_err"] == 0.0
    assert measure("naive", torch.float32, "constant", 37, 12288)["max_abs_err"] > 0.0


@pytest.mark.parametrize("rung", [e.name for e in registry.RUNGS if e.rms_norm])
def test_rms_rung_against_torch_rms_norm(rung):
    """The RMSNorm rungs (one sum of squares, no cancellation possible) stay within a few ulps of
    torch's, offset rows included."""
    _needs_triton(rung)
    for dtype in DTYPES:
        for family in ("normal", "offset_1e4"):
            r = measure(rung, dtype, family, 37, 4096)
            assert r["max_ulp_to_torch"] <= 8, r


@pytest.mark.parametrize("shape", [(37, 768), (4096, 1000), (3, 12288)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("rung", [e.name for e in registry.BACKWARD_RUNGS])
def test_backward_no_worse_than_torch(rung, dtype, shape):
    """dX, dW (and dB) of every rung with a backward, against float64 autograd: within BACKWARD_FACTOR
    times torch's own error, plus the storage type's rounding."""
    _needs_triton(rung)
    _within_backward_bound(measure_backward(rung, dtype, *shape))


def _within_backward_bound(r):
    store = accuracy.STORAGE_ROUNDING[r["dtype"]]
    for g in ("dx", "dw", "db"):
        if f"{g}_rel_err" in r:
            assert r[f"{g}_rel_err"] <= accuracy.BACKWARD_FACTOR * r[f"{g}_rel_err_torch"] + 2 * store, (g, r)


# widths that land on every layout of the CUDA backward (backward.back_plan): 4 to 32 lanes at 1 to 4
# words, a block, clusters of 2, 4 and 8
BACK_WIDTHS = (8, 64, 128, 256, 512, 520, 768, 1000, 4096, 8192, 12288, 16384, 32768, 65536)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("rung", [e.name for e in registry.BACKWARD_RUNGS if e.cuda is not None])
def test_cuda_backward_every_plan_within_its_bound(rung, dtype):
    """The CUDA backward on every layout it takes, with and without weight and bias, rows few and
    many (the persistent grid walks several rows a holder): within the backward's bound; and the
    same bits twice (the partial sums are added in a fixed order)."""
    from reimpl.ladder import backward
    kinds = set()
    for N in BACK_WIDTHS:
        plan = backward.back_plan(N, dtype.itemsize)
        if plan is None:
            continue
        kinds.add((plan.lanes, plan.vecs, plan.cluster))
        for M in ((5, 2000) if N <= 8192 else (3, 300)):
            _within_backward_bound(measure_backward(rung, dtype, M, N))
        _within_backward_bound(measure_backward(rung, dtype, 37, N, affine=False))
    assert {c for _, _, c in kinds} == {1, 2, 4, 8} and len({lanes for lanes, _, _ in kinds}) == 5, kinds
    x, dy = (torch.randn(4099, 1536, device="cuda", dtype=dtype) for _ in range(2))
    w, b = (torch.randn(1536, device="cuda", dtype=dtype) for _ in range(2))
    rms = registry.BY_NAME[rung].rms_norm
    _, mean, rstd = registry.BY_NAME[rung].launch_fn()(rung, x, w, None if rms else b)
    first, again = (backward.run(rung, dy, x, w, None if rms else b, mean, rstd) for _ in range(2))
    for a, c in zip(first, again):
        assert a is None and c is None or torch.equal(a, c)


@pytest.mark.parametrize("rung", [e.name for e in registry.BACKWARD_RUNGS if e.cuda is not None])
def test_cuda_backward_in_a_graph_and_on_a_side_stream(rung):
    """Captured in a CUDA graph, replays with new values give the eager call's bits; on a side stream
    the launches follow that stream."""
    from reimpl.ladder import backward
    rms = registry.BY_NAME[rung].rms_norm
    x, dy = (torch.randn(1000, 4096, device="cuda") for _ in range(2))
    w, b = torch.randn(4096, device="cuda"), (None if rms else torch.randn(4096, device="cuda"))
    _, mean, rstd = registry.BY_NAME[rung].launch_fn()(rung, x, w, b)
    backward.run(rung, dy, x, w, b, mean, rstd)  # compiled and loaded before the capture
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            out = backward.run(rung, dy, x, w, b, mean, rstd)
        dy.copy_(torch.randn_like(dy))
        g.replay()
        eager = backward.run(rung, dy, x, w, b, mean, rstd)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    for a, c in zip(out, eager):
        assert a is None and c is None or torch.equal(a, c)


HELD_WIDTHS = (8, 64, 256, 768, 1024, 1280, 1536, 2048, 4096, 12288, 16384, 32768, 65536, 131072, 262144)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("rung", [e.name for e in registry.RUNGS if e.cuda is not None and e.cuda.plan])
def test_row_held_every_plan_within_its_bound(rung, dtype):
    """The widths that land on each of the held rung's plans (4 to 32 lanes, a block, clusters of 2 to
    8 blocks), beyond the error table's shapes, on the normal and offset families."""
    from reimpl.ladder import launch
    name = str(dtype).removeprefix("torch.")
    kinds = set()
    for N in HELD_WIDTHS:
        plan = launch.held_plan(N, dtype.itemsize)
        kinds.add((plan.lanes, plan.cluster))
        for family in ("normal", "offset_1e4"):
            limit, why = accuracy.bound(rung, name, family)
            r = measure(rung, dtype, family, 3 if N > 65536 else 37, N)
            assert r["rel_err"] <= limit, (N, plan, r, why)
    assert {c for _, c in kinds} >= {1, 2, 4, 8} and len({lanes for lanes, _ in kinds}) >= 3, kinds


TRITON_WIDTHS = (1, 8, 64, 100, 768, 1024, 4096, 12288, 16384, 32768, 65536)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("rung", [e.name for e in registry.RUNGS if e.cuda is None])
def test_triton_every_plan_within_its_bound(rung, dtype):
    """The widths that land on each kind of the Triton forward's plan (triton_rungs.fwd_plan): many
    rows a program with a last program part past M (37 rows), one row a program in one tile, and rows
    longer than a tile; on the normal and offset families."""
    _needs_triton(rung)
    from reimpl.ladder import triton_rungs
    name = str(dtype).removeprefix("torch.")
    plans = set()
    for N in TRITON_WIDTHS:
        block, rows, _ = triton_rungs.fwd_plan(N, dtype.itemsize)
        plans.add((rows > 1, N > block))
        for family in ("normal", "offset_1e4"):
            limit, why = accuracy.bound(rung, name, family)
            r = measure(rung, dtype, family, 37, N)
            assert r["rel_err"] <= limit, (N, (block, rows), r, why)
    assert plans == {(True, False), (False, False), (False, True)}, plans
