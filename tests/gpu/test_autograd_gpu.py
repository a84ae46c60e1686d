"""GPU: reimpl.nn.LayerNorm / RMSNorm are drop-in for torch's modules: same parameters and
state_dict, and the same bits in the forward output and in every gradient; gradcheck passes in
fp64; double backward is refused with a clear error."""
import pytest
import torch

import reimpl
from reimpl.checks.parity import bit_mismatches

pytestmark = pytest.mark.gpu

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def _pair(kind, ns, dtype, **kw):
    """torch's module and ours with identical (randomised) parameters."""
    torch_cls, our_cls = ((torch.nn.LayerNorm, reimpl.nn.LayerNorm) if kind == "ln"
                          else (torch.nn.RMSNorm, reimpl.nn.RMSNorm))
    theirs = torch_cls(ns, device="cuda", dtype=dtype, **kw)
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.randn_like(p, dtype=torch.float32).to(dtype))
    ours = our_cls(ns, device="cuda", dtype=dtype, **kw)
    ours.load_state_dict(theirs.state_dict())
    return theirs, ours


def _step(module, x, grad):
    x = x.detach().clone().requires_grad_(True)
    for p in module.parameters():
        p.grad = None
    y = module(x)
    y.backward(grad)
    return [y, x.grad] + [p.grad for p in module.parameters()]


MODULE_CASES = [
    ("ln", (1024,), (64, 1024), {}),
    ("ln", (1000,), (300, 1000), {}),                  # plain grad-input kernel, tile <32,32,256>
    ("ln", (768,), (2, 70000 // 2, 768), {}),           # partial GammaBeta reduction + .sum(0)
    ("ln", (16, 64), (3, 5, 16, 64), {}),               # 2-D normalized_shape
    ("ln", (512,), (7, 512), {"bias": False}),
    ("ln", (512,), (7, 512), {"elementwise_affine": False}),
    ("rms", (1024,), (64, 1024), {}),
    ("rms", (1000,), (300, 1000), {"eps": 1e-6}),
    ("rms", (768,), (70000, 768), {}),
    ("rms", (512,), (7, 512), {"elementwise_affine": False}),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind,ns,shape,kw", MODULE_CASES, ids=lambda v: str(v).replace(" ", ""))
def test_module_forward_and_gradients_bit_identical(kind, ns, shape, kw, dtype):
    theirs, ours = _pair(kind, ns, dtype, **kw)
    g = torch.Generator(device="cuda").manual_seed(11)
    x = torch.randn(shape, device="cuda", generator=g).to(dtype)
    grad = torch.randn(shape, device="cuda", generator=g).to(dtype)
    for name, a, b in zip(["out", "dX", "dweight", "dbias"], _step(ours, x, grad), _step(theirs, x, grad)):
        assert (a is None) == (b is None), name
        if a is not None:
            assert bit_mismatches(a, b) == 0, f"{name} differs"


@pytest.mark.parametrize("kind", ["ln", "rms"])
def test_module_is_drop_in(kind):
    theirs, ours = _pair(kind, (32,), torch.float32)
    assert isinstance(ours, type(theirs))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]


def test_non_contiguous_grad_and_only_weight_grad():
    theirs, ours = _pair("ln", (256,), torch.float32)
    x = torch.randn(40, 256, device="cuda")          # x needs no grad: mask (False, True, True)
    results = []
    for m in (ours, theirs):
        for p in m.parameters():
            p.grad = None
        m(x).sum().backward()                        # grad_out is an expanded (stride 0) tensor
        results.append([p.grad for p in m.parameters()])
    for a, b in zip(*results):
        assert bit_mismatches(a, b) == 0


@pytest.mark.parametrize("kind", ["ln", "rms"])
def test_gradcheck_fp64(kind):
    g = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(5, 3, 12, device="cuda", dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.randn(12, device="cuda", dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(12, device="cuda", dtype=torch.float64, generator=g, requires_grad=True)
    if kind == "ln":
        fn, inputs = (lambda x, w, b: reimpl.layer_norm(x, (12,), w, b)), (x, w, b)
    else:
        fn, inputs = (lambda x, w: reimpl.rms_norm(x, (12,), w)), (x, w)
    assert torch.autograd.gradcheck(fn, inputs)


def test_double_backward_is_refused():
    x = torch.randn(4, 16, device="cuda", dtype=torch.float64, requires_grad=True)
    y = reimpl.layer_norm(x, (16,))
    (gx,) = torch.autograd.grad(y.pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        gx.sum().backward()


def test_no_grad_path_gives_the_same_bits():
    x = torch.randn(8, 1024, device="cuda", requires_grad=True)
    with torch.no_grad():
        a = reimpl.layer_norm(x, (1024,))
    b = reimpl.layer_norm(x, (1024,))
    assert a.grad_fn is None and b.grad_fn is not None
    assert bit_mismatches(a, b.detach()) == 0
