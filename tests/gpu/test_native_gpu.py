"""GPU: differentiable calls served by the C++ replay (reimpl/device/native.py): after a signature's
first call, the next calls of that signature are made by the C++ module (its `served` count says
so) and give torch's bits, forward and backward, through the modules and the functional API, on
the current and on a side stream, from several threads, inside a captured CUDA graph; what the
Python node refuses it refuses too (a second derivative, an input changed in place); and it stands
aside where Python's path must run: launches being recorded, plans switched off, plans dropped."""
import pytest
import torch

import reimpl
from reimpl import api, autograd
from reimpl.checks.parity import bit_mismatches
from reimpl.device import native

from ..thread_helpers import run_together

pytestmark = pytest.mark.gpu

M, N = 64, 768


@pytest.fixture(scope="module")
def mod():
    m = native.module()
    assert m is not None, f"the C++ replay did not load: {native._state.get('error')}"
    return m


def _pair(op, kernels, x, w, b):
    if op == "ln":
        return (reimpl.layer_norm(x, (N,), w, b, kernels=kernels), torch.nn.functional.layer_norm(x, (N,), w, b))
    return reimpl.rms_norm(x, (N,), w, 1e-6, kernels=kernels), torch.nn.functional.rms_norm(x, (N,), w, 1e-6)


def _inputs(dtype, gen, op):
    x = torch.randn(M, N, device="cuda", generator=gen).to(dtype).requires_grad_()
    w = torch.randn(N, device="cuda", generator=gen).to(dtype).requires_grad_()
    b = torch.randn(N, device="cuda", generator=gen).to(dtype).requires_grad_() if op == "ln" else None
    return x, w, b


def _check(op, kernels, x, w, b, g):
    ours, theirs = _pair(op, kernels, x, w, b)
    assert bit_mismatches(ours.detach(), theirs.detach()) == 0
    wanted = [t for t in (x, w, b) if t is not None]
    for a, c in zip(torch.autograd.grad(ours, wanted, g), torch.autograd.grad(theirs, wanted, g)):
        assert bit_mismatches(a, c) == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("op", ["ln", "rms"])
@pytest.mark.parametrize("kernels", ["mirror", "fast"])
def test_repeated_calls_are_served_in_cpp_with_torchs_bits(mod, kernels, op, dtype):
    gen = torch.Generator(device="cuda").manual_seed(3)
    x, w, b = _inputs(dtype, gen, op)
    g = torch.randn(M, N, device="cuda", generator=gen).to(dtype)
    api.runtime_for(kernels).plans.clear()  # whatever ran before, the next call is the signature's first
    _check(op, kernels, x, w, b, g)  # the signature's first call: Python's path, which adds the entry
    before, before_backward = mod.served(), mod.served_backward()
    for _ in range(3):
        _check(op, kernels, x, w, b, g)
    assert mod.served() - before == 3
    # the first backward through the C++ node keeps its case's plan; the next two replay it
    assert mod.served_backward() - before_backward == 2


@pytest.mark.parametrize("op", ["ln", "rms"])
def test_modules_are_served_too(mod, op):
    gen = torch.Generator(device="cuda").manual_seed(4)
    make = (lambda: torch.nn.LayerNorm(N)) if op == "ln" else (lambda: torch.nn.RMSNorm(N, eps=1e-6))
    theirs = make().cuda()
    ours = (reimpl.nn.LayerNorm(N) if op == "ln" else reimpl.nn.RMSNorm(N, eps=1e-6)).cuda()
    ours.kernels = "fast"
    with torch.no_grad():
        for p, q in zip(theirs.parameters(), ours.parameters()):
            p.normal_(generator=gen)
            q.copy_(p)
    x = torch.randn(M, N, device="cuda", generator=gen, requires_grad=True)
    before = mod.served()
    for _ in range(3):
        a, c = ours(x), theirs(x)
        assert bit_mismatches(a.detach(), c.detach()) == 0
        g = torch.randn_like(a)
        for u, v in zip(torch.autograd.grad(a, [x, *ours.parameters()], g),
                        torch.autograd.grad(c, [x, *theirs.parameters()], g)):
            assert bit_mismatches(u, v) == 0
    assert mod.served() - before >= 2


def test_a_side_stream_and_several_threads(mod):
    gen = torch.Generator(device="cuda").manual_seed(5)
    x, w, b = _inputs(torch.bfloat16, gen, "ln")
    g = torch.randn(M, N, device="cuda", generator=gen).to(torch.bfloat16)
    _check("ln", "fast", x, w, b, g)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        before = mod.served()
        _check("ln", "fast", x, w, b, g)
        assert mod.served() - before == 1
    torch.cuda.current_stream().wait_stream(side)

    def worker(seed, _barrier):
        t_gen = torch.Generator(device="cuda").manual_seed(seed)
        for _ in range(20):
            xs, ws, bs = _inputs(torch.bfloat16, t_gen, "ln")
            _check("ln", "fast", xs, ws, bs, g)
    errors = run_together(worker, 4)
    assert not errors, errors


def test_a_captured_graph_replays_torchs_bits(mod):
    gen = torch.Generator(device="cuda").manual_seed(6)
    x, w, b = _inputs(torch.float32, gen, "ln")
    g = torch.randn(M, N, device="cuda", generator=gen)
    for _ in range(2):  # the entry exists before capture
        reimpl.layer_norm(x, (N,), w, b, kernels="fast").backward(g)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    before = mod.served()
    with torch.cuda.stream(s), torch.cuda.graph(graph):
        y = reimpl.layer_norm(x, (N,), w, b, kernels="fast")
    assert mod.served() - before == 1
    torch.cuda.current_stream().wait_stream(s)
    with torch.no_grad():
        x.copy_(torch.randn(M, N, device="cuda", generator=gen))
    graph.replay()
    assert bit_mismatches(y.detach(), torch.nn.functional.layer_norm(x, (N,), w, b).detach()) == 0


def test_a_second_derivative_and_an_input_changed_in_place_are_refused(mod):
    gen = torch.Generator(device="cuda").manual_seed(7)
    x, w, b = _inputs(torch.float32, gen, "ln")
    for _ in range(2):
        reimpl.layer_norm(x, (N,), w, b, kernels="fast").sum().backward()
    before = mod.served()
    y = reimpl.layer_norm(x, (N,), w, b, kernels="fast")
    (gx,) = torch.autograd.grad(y.square().sum(), [x], create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        gx.sum().backward()
    h = x * 1
    y = reimpl.layer_norm(h, (N,), w, b, kernels="fast")
    assert mod.served() - before == 2
    with torch.no_grad():
        h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_it_stands_aside_where_pythons_path_must_run(mod, monkeypatch):
    gen = torch.Generator(device="cuda").manual_seed(8)
    x, w, b = _inputs(torch.float32, gen, "ln")
    rt = api.runtime_for("fast")
    for _ in range(2):
        reimpl.layer_norm(x, (N,), w, b, kernels="fast")
    before = mod.served()
    with torch.no_grad():  # no graph recorded: Python's path, output only
        reimpl.layer_norm(x, (N,), w, b, kernels="fast")
    monkeypatch.setattr(api, "USE_PLANS", False)
    reimpl.layer_norm(x, (N,), w, b, kernels="fast")
    monkeypatch.setattr(api, "USE_PLANS", True)
    rt.record = []
    try:
        reimpl.layer_norm(x, (N,), w, b, kernels="fast")
        assert rt.record, "the recorded call made no launch"
    finally:
        rt.record = None
    assert mod.served() == before
    size = mod.size()
    rt.plans.clear()
    assert mod.size() < size
    reimpl.layer_norm(x, (N,), w, b, kernels="fast")  # a first call again: Python's path
    assert mod.served() == before
    reimpl.layer_norm(x, (N,), w, b, kernels="fast")
    assert mod.served() == before + 1


@pytest.mark.parametrize("affine", ["weight", "none", "bias"])
@pytest.mark.parametrize("kernels", ["mirror", "fast"])
def test_absent_weights_are_served_too(mod, kernels, affine):
    gen = torch.Generator(device="cuda").manual_seed(9)
    x, w, b = _inputs(torch.bfloat16, gen, "ln")
    w, b = {"weight": (w, None), "none": (None, None), "bias": (None, b)}[affine]
    g = torch.randn(M, N, device="cuda", generator=gen).to(torch.bfloat16)
    _check("ln", kernels, x, w, b, g)
    before = mod.served()
    _check("ln", kernels, x, w, b, g)
    assert mod.served() - before == 1
    if affine == "none":  # and RMSNorm without a weight
        _check("rms", kernels, x, None, None, g)
        before = mod.served()
        _check("rms", kernels, x, None, None, g)
        assert mod.served() - before == 1


def test_a_process_that_used_it_exits_cleanly(tmp_path):
    """The module's entries hold Python objects (the runtime, the signature): they must outlive the
    interpreter rather than be released after it has ended, which crashes the process at exit."""
    import subprocess
    import sys
    from pathlib import Path
    script = tmp_path / "use_native.py"
    script.write_text(
        "import torch, reimpl\n"
        "from reimpl.device import native\n"
        "x = torch.randn(8, 256, device='cuda', requires_grad=True)\n"
        "w = torch.randn(256, device='cuda', requires_grad=True)\n"
        "g = torch.randn(8, 256, device='cuda')\n"
        "for _ in range(3):\n"
        "    reimpl.layer_norm(x, (256,), w, None, kernels='fast').backward(g)\n"
        "assert native.module().served() >= 1 and native.module().served_backward() >= 1\n"
        "print('done')\n")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=root,
                          env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0 and done.stdout.strip() == "done", (done.returncode, done.stderr[-2000:])
