"""GPU: the row-in-registers softmax on every kind of plan launch.regs_plan makes (sub-warp,
warp, block, clusters of 2, 4 and 8 blocks, 16-byte and scalar loads), and the fused cross-entropy
against a float64 reference within accuracy.cross_entropy_bound. The shapes of the siblings' own
table (test_siblings_gpu.py) reach N = 32768; these reach the cluster plans and the vocabularies."""
import pytest
import torch

from reimpl.checks import siblings_errors as se
from reimpl.ladder import accuracy, cross_entropy, softmax
from reimpl.ladder.launch import regs_plan

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# N chosen to land on each plan kind; odd widths (1001, 50257) start rows inside a 16-byte word; the
# offset input takes the scalar loads
WIDTHS = (8, 100, 768, 1001, 1536, 5120, 12288, 32000, 50257, 65536, 128256, 262144)


def _name(dtype):
    return str(dtype).removeprefix("torch.")


def _within_bound(y, x, dtype):
    theirs = torch.softmax(x, -1)
    assert torch.equal(torch.isnan(y), torch.isnan(theirs))
    N = x.shape[-1]
    limit = softmax.bound("one_read", _name(dtype), N)[0]
    ok = ~torch.isnan(theirs)
    ulps = se.ulps((y.double() - theirs.double())[ok], theirs.double()[ok], _name(dtype))
    assert float(ulps.max()) <= limit, (N, float(ulps.max()), limit)


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
@pytest.mark.parametrize("N", WIDTHS)
def test_online_regs_each_plan_within_bound(N, dtype):
    M = 3 if N > 100000 else 37
    g = torch.Generator(device="cuda").manual_seed(N)
    x = (torch.randn(M, N, device="cuda", generator=g) * 3).to(dtype)
    x[1, N // 2] = float("-inf")
    if N > 1:
        x[2, :] = float("-inf")  # a row of -inf only: NaN, as torch
    _within_bound(softmax.run("one_read", x), x, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_online_regs_misaligned_rows_take_scalar_loads(dtype):
    N = 4096
    base = torch.randn(5 * N + 1, device="cuda").to(dtype)
    x = base[1:].view(5, N)  # contiguous, but its rows start 1 element past a 16-byte boundary
    assert regs_plan(N, x.element_size(), softmax.aligned(x)).vec == 1
    _within_bound(softmax.run("one_read", x), x, dtype)


def test_online_regs_past_the_cluster_falls_back_to_streaming():
    x = torch.randn(2, 10**6, device="cuda")
    assert regs_plan(10**6, 4) is None
    _within_bound(softmax.run("one_read", x), x, torch.float32)


def _reference(x, t, ignore_index, reduction):
    xd = x.double().requires_grad_()
    loss = torch.nn.functional.cross_entropy(xd, t, ignore_index=ignore_index, reduction=reduction)
    (grad,) = torch.autograd.grad(loss, xd)
    return loss.detach(), grad


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
@pytest.mark.parametrize("M,N", [(64, 1000), (37, 32000), (16, 50257), (8, 128256), (3, 262144)])
@pytest.mark.parametrize("reduction", cross_entropy.REDUCTIONS)
def test_cross_entropy_within_bound(M, N, dtype, reduction):
    g = torch.Generator(device="cuda").manual_seed(M + N)
    x = (torch.randn(M, N, device="cuda", generator=g) * 4).to(dtype)
    t = torch.randint(0, N, (M,), device="cuda", generator=g)
    t[1] = -100  # ignored: loss 0, gradient 0, not counted in the mean
    x[2, t[2]] = 30.0  # a confident row: the loss is nearly 0, the cancellation case
    loss, grad = cross_entropy.loss_and_grad(x, t, reduction=reduction)
    ref_loss, ref_grad = _reference(x, t, -100, reduction)
    threads = softmax.row_threads("one_read", _name(dtype), N)
    b, why = accuracy.cross_entropy_bound(threads, N, M, _name(dtype), softmax.row_parts("one_read", _name(dtype), N))
    u = b["u"]
    xmax = float(x.float().abs().max())
    assert abs(float(loss) - float(ref_loss)) <= b["K"] * u * (1 + xmax) + b["rows"] * u * abs(float(ref_loss)), why
    scale = 1.0 / int((t != -100).sum()) if reduction == "mean" else 1.0
    p = torch.softmax(x.double(), -1)
    err = (grad.double() - ref_grad).abs() / scale
    allowed = b["K"] * u * p + u + (b["store"] * ref_grad.abs() + b["tiny"]) / scale
    assert bool((err <= allowed).all()), (float((err - allowed).max()), why)
    assert bool((grad[1] == 0).all())


def test_cross_entropy_autograd_and_bad_input():
    x = torch.randn(8, 1000, device="cuda", requires_grad=True)
    t = torch.randint(0, 1000, (8,), device="cuda")
    loss = cross_entropy.cross_entropy(x, t)
    (g,) = torch.autograd.grad(loss * 3, x)  # an incoming gradient other than 1 scales it
    ref = torch.autograd.grad(torch.nn.functional.cross_entropy(x, t) * 3, x)[0]
    assert float((g - ref).abs().max()) < 1e-6
    with pytest.raises(ValueError, match="target must be 1-D"):
        cross_entropy.loss_and_grad(x.detach(), t[:4])
    with pytest.raises(TypeError, match="target must be int64"):
        cross_entropy.loss_and_grad(x.detach(), t.int())
    with pytest.raises(ValueError, match="reduction must be one of"):
        cross_entropy.loss_and_grad(x.detach(), t, reduction="none")


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_cross_entropy_misaligned_long_rows_take_an_aligned_copy(dtype):
    """Logits off the 16-byte boundary with rows longer than the scalar plans hold: the launcher copies
    them to an aligned buffer, so loss and gradient have the bits of the same logits stored aligned."""
    M, N = 3, 16 * 512 * 32 + 8  # one word past what 16 blocks of 512 threads hold at 32 scalars each
    assert regs_plan(N, torch.empty((), dtype=dtype).element_size(), False) is None
    base = (torch.randn(M * N + 1, device="cuda") * 4).to(dtype)
    x = base[1:].view(M, N)
    assert not softmax.aligned(x)
    t = torch.randint(0, N, (M,), device="cuda")
    loss, grad = cross_entropy.loss_and_grad(x, t)
    loss_a, grad_a = cross_entropy.loss_and_grad(x.clone(), t)
    assert torch.equal(loss.view(torch.int32), loss_a.view(torch.int32))
    assert torch.equal(grad.view(torch.int16 if dtype != torch.float32 else torch.int32),
                       grad_a.view(torch.int16 if dtype != torch.float32 else torch.int32))
    assert grad.data_ptr() != x.data_ptr() and torch.equal(base[1:].view(M, N), x)  # the logits untouched
