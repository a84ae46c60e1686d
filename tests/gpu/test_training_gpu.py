"""GPU: drop-in use in training. Under autocast (fp16, bf16; fp32 and low-precision weights), for the
modules and the functional API, the output and every gradient are torch's bits; aten::rms_norm's
composite (mixed dtypes, channels-last, complex) is torch's, gradients included, with torch's
warning; the torch.library ops pass opcheck; torch.compile(fullgraph=True) and torch.export of a
model built on our modules run with no graph break and give the eager bits; launch plans replay
the full path's bits."""
import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import reimpl
from reimpl.checks.parity import bit_mismatches

pytestmark = pytest.mark.gpu

LOWP = [torch.float16, torch.bfloat16]
SHAPES = [((64, 1024), (1024,)),        # vectorized forward and grad-input kernels
          ((300, 1000), (1000,)),       # the fallback forward, the plain grad-input kernel
          ((3, 5, 16, 64), (16, 64))]   # a 2-D normalized_shape


def _same(a, b, name):
    assert (a is None) == (b is None), name
    if a is not None:
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, b.dtype)
        assert bit_mismatches(a, b) == 0, f"{name} differs"


def _modules(kind, ns, param_dtype, **kw):
    torch_cls, our_cls = ((torch.nn.LayerNorm, reimpl.nn.LayerNorm) if kind == "ln"
                          else (torch.nn.RMSNorm, reimpl.nn.RMSNorm))
    theirs = torch_cls(ns, device="cuda", dtype=param_dtype, **kw)
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.randn(p.shape, device="cuda").to(param_dtype))
    ours = our_cls(ns, device="cuda", dtype=param_dtype, **kw)
    ours.load_state_dict(theirs.state_dict())
    return theirs, ours


def _run(fn, params, x, grad, autocast_dtype):
    """fn(x) under autocast (if any), backward with `grad` outside it: [y, dx, *dparams]."""
    x = x.detach().clone().requires_grad_(True)
    for p in params:
        p.grad = None
    with torch.autocast("cuda", dtype=autocast_dtype, enabled=autocast_dtype is not None):
        y = fn(x)
    y.backward(grad.to(y.dtype))
    return [y, x.grad] + [p.grad for p in params]


@pytest.mark.parametrize("autocast_dtype", LOWP, ids=str)
@pytest.mark.parametrize("weights", ["fp32", "lowp"])
@pytest.mark.parametrize("kind", ["ln", "rms"])
@pytest.mark.parametrize("shape,ns", SHAPES, ids=["vec", "fallback", "2d"])
def test_module_under_autocast(autocast_dtype, weights, kind, shape, ns):
    theirs, ours = _modules(kind, ns, torch.float32 if weights == "fp32" else autocast_dtype)
    g = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(shape, device="cuda", generator=g).to(autocast_dtype)  # an activation of the autocast dtype
    grad = torch.randn(shape, device="cuda", generator=g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's (and our) mixed-dtype RMSNorm warning
        a = _run(ours, list(ours.parameters()), x, grad, autocast_dtype)
        b = _run(theirs, list(theirs.parameters()), x, grad, autocast_dtype)
    for name, u, v in zip(["out", "dx", "dweight", "dbias"], a, b):
        _same(u, v, name)


@pytest.mark.parametrize("autocast_dtype", LOWP, ids=str)
@pytest.mark.parametrize("kind", ["ln", "rms"])
def test_functional_under_autocast(autocast_dtype, kind):
    shape, ns = (37, 768), (768,)
    g = torch.Generator(device="cuda").manual_seed(6)
    x = torch.randn(shape, device="cuda", generator=g).to(autocast_dtype)
    w = torch.randn(ns, device="cuda", generator=g).requires_grad_(True)
    b = torch.randn(ns, device="cuda", generator=g).requires_grad_(True)
    grad = torch.randn(shape, device="cuda", generator=g)
    if kind == "ln":
        ours, theirs = (lambda t: reimpl.layer_norm(t, ns, w, b)), (lambda t: F.layer_norm(t, ns, w, b))
        params = [w, b]
    else:
        ours, theirs = (lambda t: reimpl.rms_norm(t, ns, w)), (lambda t: F.rms_norm(t, ns, w))
        params = [w]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, u, v in zip(["out", "dx", "dw", "db"], _run(ours, params, x, grad, autocast_dtype),
                              _run(theirs, params, x, grad, autocast_dtype)):
            _same(u, v, name)


@pytest.mark.parametrize("autocast_dtype", LOWP, ids=str)
def test_aten_level_under_autocast(autocast_dtype):
    """native_layer_norm has an fp32 autocast rule; _fused_rms_norm has none (a mixed call fails as torch's)."""
    x = torch.randn(16, 256, device="cuda").to(autocast_dtype)
    w, b = torch.randn(256, device="cuda"), torch.randn(256, device="cuda")
    with torch.autocast("cuda", dtype=autocast_dtype):
        for u, v in zip(reimpl.native_layer_norm(x, (256,), w, b, 1e-5),
                        torch.ops.aten.native_layer_norm(x, [256], w, b, 1e-5)):
            _same(u, v, "native_layer_norm")
        with pytest.raises(RuntimeError) as theirs:
            torch.ops.aten._fused_rms_norm(x, [256], w, 1e-5)
        with pytest.raises(RuntimeError) as ours:
            reimpl.fused_rms_norm(x, (256,), w, 1e-5)
    assert str(ours.value) == str(theirs.value)


def test_autocast_leaves_float64_alone():
    """autocast casts no float64 tensor, so fp64 input with an fp32 weight fails as in torch."""
    x = torch.randn(4, 64, device="cuda", dtype=torch.float64)
    w = torch.randn(64, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError) as theirs:
            F.layer_norm(x, (64,), w)
        with pytest.raises(RuntimeError) as ours:
            reimpl.layer_norm(x, (64,), w)
    assert type(ours.value) is not None and str(ours.value) == str(theirs.value)


MIXED = [(torch.bfloat16, torch.float32), (torch.float16, torch.float32), (torch.float32, torch.bfloat16),
         (torch.float32, torch.float16), (torch.float64, torch.float32), (torch.float32, torch.float64),
         (torch.float16, torch.bfloat16)]


@pytest.mark.parametrize("eps", [None, 1e-6])
@pytest.mark.parametrize("x_dtype,w_dtype", MIXED, ids=str)
@pytest.mark.parametrize("shape,ns", SHAPES, ids=["vec", "fallback", "2d"])
def test_rms_norm_composite_for_mixed_dtypes(x_dtype, w_dtype, shape, ns, eps):
    g = torch.Generator(device="cuda").manual_seed(7)
    x = (torch.randn(shape, device="cuda", generator=g) * 2 + 0.3).to(x_dtype)
    w0 = torch.randn(ns, device="cuda", generator=g).to(w_dtype)
    grad = torch.randn(shape, device="cuda", generator=g)
    results = []
    for fn in (reimpl.rms_norm, F.rms_norm):
        w = w0.clone().requires_grad_(True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results.append(_run(lambda t: fn(t, ns, w, eps), [w], x, grad, None))
    for name, u, v in zip(["out", "dx", "dw"], *results):
        _same(u, v, name)


@pytest.mark.parametrize("layout", ["channels_last", "channels_last_3d", "complex64"])
def test_rms_norm_composite_for_layout_and_complex(layout):
    g = torch.Generator(device="cuda").manual_seed(8)
    if layout == "complex64":
        x = torch.randn(6, 40, device="cuda", dtype=torch.complex64, generator=g)
        w, ns = torch.randn(40, device="cuda", dtype=torch.complex64, generator=g), (40,)
    else:
        shape = (2, 8, 4, 64) if layout == "channels_last" else (2, 3, 4, 5, 64)
        fmt = torch.channels_last if layout == "channels_last" else torch.channels_last_3d
        x = torch.randn(shape, device="cuda", generator=g).to(memory_format=fmt)
        w, ns = torch.randn(64, device="cuda", generator=g), (64,)
    ours, theirs = reimpl.rms_norm(x, ns, w), F.rms_norm(x, ns, w)
    _same(ours, theirs, "out")
    assert ours.stride() == theirs.stride()


_WARN_SCRIPT = """
import warnings, torch, torch.nn.functional as F
import reimpl
x = torch.randn(4, 8, device="cuda", dtype=torch.bfloat16); w = torch.randn(8, device="cuda")
with warnings.catch_warnings(record=True) as rec:
    warnings.simplefilter("always")
    (reimpl.rms_norm if {ours} else F.rms_norm)(x, (8,), w)
    (reimpl.rms_norm if {ours} else F.rms_norm)(x, (8,), w)
print(repr([str(r.message).split(" (Triggered internally")[0] for r in rec]))
"""


def test_mixed_dtype_warning_is_torchs_and_comes_once():
    """TORCH_WARN_ONCE fires once per process: each side runs in a fresh one."""
    outs = [subprocess.run([sys.executable, "-c", _WARN_SCRIPT.format(ours=o)], capture_output=True, text=True,
                           env=dict(os.environ), check=True).stdout.strip() for o in (True, False)]
    assert outs[0] == outs[1] and outs[0].count("Mismatch dtype") == 1, outs


def _samples():
    g = torch.Generator(device="cuda").manual_seed(9)
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        for shape, ns in SHAPES[:2] + [((2, 3, 40), (40,))]:
            x = torch.randn(shape, device="cuda", generator=g).to(dtype)
            w = torch.randn(ns, device="cuda", generator=g).to(dtype)
            b = torch.randn(ns, device="cuda", generator=g).to(dtype)
            out.append((x, list(ns), w, b))
    return out


@pytest.mark.parametrize("i", range(6))
def test_opcheck(i):
    x, ns, w, b = _samples()[i]
    req = [t.detach().clone().requires_grad_(True) for t in (x, w, b)]
    torch.library.opcheck(torch.ops.reimpl.native_layer_norm.default, (x, ns, w, b, 1e-5))
    torch.library.opcheck(torch.ops.reimpl.native_layer_norm.default, (req[0], ns, req[1], req[2], 1e-5))
    torch.library.opcheck(torch.ops.reimpl.native_layer_norm.default, (req[0], ns, None, None, 1e-5))
    torch.library.opcheck(torch.ops.reimpl.fused_rms_norm.default, (req[0], ns, req[1], None))
    torch.library.opcheck(torch.ops.reimpl.fused_rms_norm.default, (x, ns, w, 1e-6))
    out, mean, rstd = torch.ops.aten.native_layer_norm(x, ns, w, b, 1e-5)
    dy = torch.randn_like(out)
    for mask in ([True, True, True], [True, False, False], [False, True, True]):
        torch.library.opcheck(torch.ops.reimpl.native_layer_norm_backward.default,
                              (dy, x, ns, mean, rstd, w, b, mask))
    _, rstd = torch.ops.aten._fused_rms_norm(x, ns, w, None)
    for mask in ([True, True], [False, True]):
        torch.library.opcheck(torch.ops.reimpl.fused_rms_norm_backward.default, (dy, x, ns, rstd, w, mask))


def test_registered_ops_give_the_mirrors_bits():
    for x, ns, w, b in _samples():
        for u, v in zip(torch.ops.reimpl.native_layer_norm(x, ns, w, b, 1e-5),
                        torch.ops.aten.native_layer_norm(x, ns, w, b, 1e-5)):
            _same(u, v, "native_layer_norm")
        for u, v in zip(torch.ops.reimpl.fused_rms_norm(x, ns, w, None), torch.ops.aten._fused_rms_norm(x, ns, w, None)):
            _same(u, v, "fused_rms_norm")


class Block(torch.nn.Module):
    """Linear layers around our two modules: the graph holds our ops between cuBLAS matmuls (no
    Linear bias: Inductor may fuse a bias add differently from eager, which is not ours to check)."""

    def __init__(self, d=256):
        super().__init__()
        self.up = torch.nn.Linear(d, 2 * d, bias=False, device="cuda")
        self.ln = reimpl.nn.LayerNorm(2 * d, device="cuda")
        self.down = torch.nn.Linear(2 * d, d, bias=False, device="cuda")
        self.rms = reimpl.nn.RMSNorm(d, device="cuda")

    def forward(self, x):
        return self.rms(self.down(self.ln(self.up(x))))


def _train_step(model, x):
    for p in model.parameters():
        p.grad = None
    y = model(x)
    y.backward(torch.ones_like(y) * 0.5 + y.detach())
    return [y] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("kernels", ["mirror", "fast"])
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_gives_eager_bits(backend, kernels):
    """Compiled, the model gives eager's bits; with the fast kernels (reimpl.fast.use_fast) the
    compiled graph runs them in both passes: the ops carry `kernels` from forward to backward."""
    from reimpl import fast
    torch.manual_seed(0)
    model = Block()
    if kernels == "fast":
        fast.use_fast(model)
    x = torch.randn(64, 256, device="cuda")
    eager = _train_step(model, x)
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    _train_step(compiled, x)  # compiles
    before = (fast.fast_runtime().fast_launches, fast.fast_runtime().fast_grad_launches)
    got = _train_step(compiled, x)
    names = ["y"] + [n for n, _ in model.named_parameters()]
    for name, u, v in zip(names, got, eager):
        _same(u, v, name)
    ran_fast = (fast.fast_runtime().fast_launches > before[0], fast.fast_runtime().fast_grad_launches > before[1])
    assert ran_fast == ((True, True) if kernels == "fast" else (False, False))


def test_compile_under_autocast_gives_eager_bits():
    torch.manual_seed(1)
    model = Block()
    x = torch.randn(64, 256, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        eager = model(x)
        torch._dynamo.reset()
        got = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
    _same(got, eager, "y")


def test_export_runs_and_gives_eager_bits():
    torch.manual_seed(2)
    model = Block()
    x = torch.randn(64, 256, device="cuda")
    with torch.no_grad():
        ep = torch.export.export(model, (x,))
        names = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
        assert any("reimpl.native_layer_norm" in n for n in names), names
        assert any("reimpl.fused_rms_norm" in n for n in names), names
        _same(ep.module()(x), model(x), "y")


def test_plan_replay_gives_the_full_paths_bits_and_launches():
    """The first call of a signature runs the host mirror; later ones replay its plan."""
    from reimpl.device import runtime
    rt = runtime.get()
    x = torch.randn(33, 1000, device="cuda")
    w, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    rt.plans = {}
    rt.record = []
    first = reimpl.native_layer_norm(x, (1000,), w, b, 1e-5)
    n = len(rt.record)
    second = reimpl.native_layer_norm(x, (1000,), w, b, 1e-5)
    launches, rt.record = rt.record, None
    assert n >= 1 and launches[:n] == launches[n:]
    assert any(plan is not None for plan in rt.plans.values())
    for u, v, t in zip(first, second, torch.ops.aten.native_layer_norm(x, [1000], w, b, 1e-5)):
        _same(u, t, "first")
        _same(v, t, "replayed")
        assert u.stride() == v.stride() == t.stride()
    # the functional call drops mean and rstd: its replays write them to a scratch buffer
    for _ in range(3):
        _same(reimpl.layer_norm(x, (1000,), w, b), F.layer_norm(x, (1000,), w, b), "functional")
        _same(reimpl.rms_norm(x, (1000,), w), F.rms_norm(x, (1000,), w), "functional rms")
