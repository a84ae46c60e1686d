"""GPU: reimpl.in_torch installs our kernels as aten's CUDA kernels, and torch's own modules and
functional calls then give torch's bits through torch's C++ autograd: outputs and every gradient
(with each output mask), under autocast, for nn modules accumulating .grad, on a side stream, from
several threads, captured in a CUDA graph, and through the double backward (torch's composite). Each
case checks that our entry points really ran (a counter on reimpl.api's plan call) and, after the
block, that torch's own kernels are back. References are computed with nothing installed."""
import contextlib
import threading

import pytest
import torch

import reimpl
from reimpl import api, aten_kernels, fast
from reimpl.checks.parity import bit_mismatches

pytestmark = pytest.mark.gpu

F = torch.nn.functional
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# (M, N): vectorized rows, unaligned widths, a one-wide row, tall-and-narrow (the GammaBeta partial
# path), a wide row, an empty batch
SHAPES = [(64, 1024), (37, 768), (300, 1000), (5, 1), (4096, 64), (3, 12288), (0, 256)]


@pytest.fixture
def calls(monkeypatch):
    """How many times our entry points were called."""
    seen = {"n": 0}
    plan_call = api._plan_call

    def counted(*a, **k):
        seen["n"] += 1
        return plan_call(*a, **k)
    monkeypatch.setattr(api, "_plan_call", counted)
    return seen


def _step(op, x, w, b, dy, needs):
    """torch's functional call and autograd.grad for the inputs `needs` names (x, w, b)."""
    leaves = {"x": x, "w": w, "b": b}
    for name, t in leaves.items():
        if t is not None:
            t.requires_grad_(name in needs)
    N = x.shape[-1]
    y = F.layer_norm(x, (N,), w, b, 1e-5) if op == "layer_norm" else F.rms_norm(x, (N,), w, 1e-5)
    wrt = [leaves[n] for n in needs if leaves[n] is not None]
    return [y.detach(), *torch.autograd.grad(y, wrt, dy)] if wrt else [y]


def _inputs(op, M, N, dtype, affine, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, N, device="cuda", dtype=dtype, generator=gen) * 3 + 1
    w = torch.randn(N, device="cuda", dtype=dtype, generator=gen) if affine else None
    b = torch.randn(N, device="cuda", dtype=dtype, generator=gen) if affine and op == "layer_norm" else None
    dy = torch.randn(M, N, device="cuda", dtype=dtype, generator=gen)
    return x, w, b, dy


def _same(got, want):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, i
        assert bit_mismatches(g, w) == 0, i


@pytest.mark.parametrize("kernels", ["mirror", "fast"])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("M,N", SHAPES)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("needs", ["xwb", "x", "wb", ""])
def test_torchs_functional_calls_run_ours_with_torchs_bits(calls, kernels, op, dtype, M, N, affine, needs):
    args = _inputs(op, M, N, dtype, affine, seed=M * 7 + N)
    want = _step(op, *[None if t is None else t.detach().clone() for t in args], needs)
    with reimpl.in_torch(kernels):
        assert aten_kernels.installed() == kernels
        got = _step(op, *[None if t is None else t.detach().clone() for t in args], needs)
    _same(got, want)
    assert calls["n"] >= 1  # the forward at least ran through our entry points
    ran = calls["n"]
    _step(op, *[None if t is None else t.detach().clone() for t in args], needs)
    assert calls["n"] == ran and aten_kernels.installed() is None  # torch's own kernels are back


@pytest.mark.parametrize("kernels", ["mirror", "fast"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_modules_accumulate_torchs_gradients(calls, kernels, dtype):
    torch.manual_seed(0)
    N = 1024
    mods = [torch.nn.Sequential(torch.nn.LayerNorm(N), torch.nn.Linear(N, N), torch.nn.RMSNorm(N)).cuda().to(dtype)
            for _ in range(2)]
    mods[1].load_state_dict(mods[0].state_dict())
    x = torch.randn(96, N, device="cuda", dtype=dtype)
    for i, m in enumerate(mods):
        ctx = reimpl.in_torch(kernels) if i == 1 else contextlib.nullcontext()
        with ctx:
            for _ in range(2):  # .grad accumulates over two steps
                m(x).float().square().mean().backward()
    assert calls["n"] >= 8
    _same([p.grad for p in mods[1].parameters()], [p.grad for p in mods[0].parameters()])


@pytest.mark.parametrize("kernels", ["mirror", "fast"])
def test_autocast_casts_as_torch_does(calls, kernels):
    x, w, b, dy = _inputs("layer_norm", 128, 2048, torch.bfloat16, True, seed=3)
    lin = torch.nn.Linear(2048, 2048, device="cuda")
    outs = []
    for install in (False, True):
        xi = x.detach().clone().requires_grad_(True)
        with reimpl.in_torch(kernels) if install else contextlib.nullcontext():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = F.layer_norm(lin(xi), (2048,), w.float(), b.float())
                z = F.rms_norm(lin(y), (2048,), None, 1e-6)
            outs.append([y.detach(), z.detach(), *torch.autograd.grad(z, xi, dy)])
    assert calls["n"] >= 2
    _same(outs[1], outs[0])


@pytest.mark.parametrize("kernels", ["mirror", "fast"])
def test_side_stream_and_threads(calls, kernels):
    cases = [(op, *shape, dtype) for op in ("layer_norm", "rms_norm") for shape in SHAPES[:4]
             for dtype in DTYPES]
    inputs = [_inputs(op, M, N, dtype, True, seed=i) for i, (op, M, N, dtype) in enumerate(cases)]
    want = [_step(op, *args, "xwb") for (op, *_), args in zip(cases, inputs)]
    torch.cuda.synchronize()
    got = [None] * len(cases)
    errors = []
    start = threading.Barrier(4)

    def worker(k):
        try:
            stream = torch.cuda.Stream()
            start.wait()
            with torch.cuda.stream(stream):
                for i in range(k, len(cases), 4):
                    got[i] = _step(cases[i][0], *[None if t is None else t.detach().clone() for t in inputs[i]],
                                   "xwb")
            stream.synchronize()
        except Exception as e:  # noqa: BLE001 -- reported below, in the test's thread
            errors.append(e)
    with reimpl.in_torch(kernels):
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    assert calls["n"] >= 2 * len(cases)
    for g, w in zip(got, want):
        _same(g, w)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_a_captured_step_replays_torchs_bits(op):
    M, N, dtype = 256, 1024, torch.bfloat16
    x, w, b, dy = _inputs(op, M, N, dtype, True, seed=11)
    rt = fast.fast_runtime()
    with reimpl.fast.in_torch():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                _step(op, x, w, b, dy, "xwb")
        torch.cuda.current_stream().wait_stream(side)
        before = (rt.fast_launches, rt.fast_grad_launches)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = _step(op, x, w, b, dy, "xwb")
        assert (rt.fast_launches, rt.fast_grad_launches) == (before[0] + 1, before[1] + 1)
    for seed in range(3):  # replayed after the block: the graph holds our kernels, not the registration
        gen = torch.Generator(device="cuda").manual_seed(seed)
        with torch.no_grad():
            for t in (x, w, b, dy):
                if t is not None:
                    t.copy_(torch.randn(t.shape, device="cuda", generator=gen).to(dtype))
        graph.replay()
        torch.cuda.synchronize()
        want = _step(op, *[None if t is None else t.detach().clone() for t in (x, w, b, dy)], "xwb")
        _same(outs, want)


@pytest.mark.parametrize("kernels", ["mirror", "fast"])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_double_backward_is_torchs(calls, kernels, op):
    x, w, b, dy = _inputs(op, 32, 512, torch.float32, True, seed=5)
    outs = []
    for install in (False, True):
        xi, wi = x.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
        with reimpl.in_torch(kernels) if install else contextlib.nullcontext():
            y = F.layer_norm(xi, (512,), wi, b) if op == "layer_norm" else F.rms_norm(xi, (512,), wi)
            gx, = torch.autograd.grad(y, xi, dy, create_graph=True)
            outs.append([gx.detach(), *torch.autograd.grad(gx.square().sum(), (xi, wi))])
    assert calls["n"] >= 1
    _same(outs[1], outs[0])


@pytest.mark.parametrize("kernels", ["mirror", "fast"])
def test_bad_input_raises_torchs_error(calls, kernels):
    x = torch.randn(4, 8, device="cuda")
    w = torch.randn(7, device="cuda")

    def message():
        with pytest.raises(RuntimeError) as e:
            F.layer_norm(x, (8,), w)
        return str(e.value).split("\n")[0]
    want = message()
    with reimpl.in_torch(kernels):
        got = message()
    assert got == want
