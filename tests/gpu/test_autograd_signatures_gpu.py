"""GPU: the differentiable calls' signature replays (reimpl/autograd.py, `_Signature`). After the first
call with a forward plan key, the forward replays its launch plan and the backward replays the
backward plan chosen by the mask, the incoming gradient's contiguity and each tensor's address
alignment. Every call, first or replayed, gives torch's bits, whatever the gradient's layout and
whichever inputs need a gradient; an input changed in place after the forward is refused as torch
refuses it."""
import pytest
import torch

import reimpl
from reimpl import api, autograd
from reimpl.checks.parity import bit_mismatches

pytestmark = pytest.mark.gpu

M, N = 96, 1024


def _grad(layout: str, dtype, gen):
    """An incoming gradient of shape (M, N) laid out as named."""
    if layout == "contiguous":
        return torch.randn(M, N, device="cuda", generator=gen).to(dtype)
    if layout == "expanded":  # stride 0 along the rows, as .sum() gives
        return torch.randn(1, N, device="cuda", generator=gen).to(dtype).expand(M, N)
    if layout == "transposed":
        return torch.randn(N, M, device="cuda", generator=gen).to(dtype).t()
    flat = torch.randn(M * N + 1, device="cuda", generator=gen).to(dtype)  # one element past 16 bytes
    return flat[1:].view(M, N)


# (gradient layout, which of x, weight, bias need a gradient); the list runs twice, so each case
# is met once by a first call and once by a replay
STEPS = [("contiguous", (True, True, True)), ("contiguous", (True, True, True)),
         ("expanded", (True, True, True)), ("transposed", (True, True, True)), ("offset", (True, True, True)),
         ("contiguous", (True, False, False)), ("contiguous", (False, True, True)),
         ("offset", (False, True, False))]


def _calls(op: str, kernels: str, x, w, b):
    if op == "ln":
        return (reimpl.layer_norm(x, (N,), w, b, kernels=kernels),
                torch.nn.functional.layer_norm(x, (N,), w, b))
    return reimpl.rms_norm(x, (N,), w, 1e-6, kernels=kernels), torch.nn.functional.rms_norm(x, (N,), w, 1e-6)


def _signature(rt, op: str, x, w, b):
    method, tensors = (("native_layer_norm", (x, w, b)) if op == "ln" else ("_fused_rms_norm", (x, w)))
    key, _ = api.signature(method, tensors, ((N,), api._eps_key(1e-5 if op == "ln" else 1e-6)))
    return rt.plans.get((autograd._SIGNATURE, key))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", ["ln", "rms"])
@pytest.mark.parametrize("kernels", ["mirror", "fast"])
def test_repeated_calls_replay_and_give_torchs_bits(kernels, op, dtype):
    gen = torch.Generator(device="cuda").manual_seed(5)
    rt = api.runtime_for(kernels)
    w = torch.randn(N, device="cuda", generator=gen).to(dtype)
    b = torch.randn(N, device="cuda", generator=gen).to(dtype) if op == "ln" else None
    for step, (layout, needs) in enumerate(STEPS * 2):
        x = torch.randn(M, N, device="cuda", generator=gen).to(dtype)
        for t, need in zip((x, w, b), needs):
            if t is not None:
                t.requires_grad_(need)
        wanted = [t for t, need in zip((x, w, b), needs) if t is not None and need]
        if not wanted:
            continue
        ours, theirs = _calls(op, kernels, x, w, b)
        assert bit_mismatches(ours.detach(), theirs.detach()) == 0, f"step {step}: out"
        grad = _grad(layout, dtype, gen)
        got = torch.autograd.grad(ours, wanted, grad)
        want = torch.autograd.grad(theirs, wanted, grad)
        for i, (a, c) in enumerate(zip(got, want)):
            assert bit_mismatches(a, c) == 0, f"step {step} ({layout}, {needs}): gradient {i}"
    sig = _signature(rt, op, x, w, b)
    assert sig is not None and sig.forward is not None, "the forward keeps no replay"
    replays = [fn for fn in sig.backward.values() if fn]
    assert len(replays) >= 3, f"backward replays kept: {len(replays)} of {len(sig.backward)} cases"


def test_replayed_calls_launch_the_plans_kernels():
    """The fast runtime counts its kernels' launches, replays included: a replayed forward and
    backward launch the fast forward and dX kernels once each."""
    rt = api.runtime_for("fast")
    x = torch.randn(M, N, device="cuda", requires_grad=True)
    w = torch.randn(N, device="cuda", requires_grad=True)
    g = torch.randn(M, N, device="cuda")
    for _ in range(3):
        reimpl.layer_norm(x, (N,), w, None, kernels="fast").backward(g)
    fwd, grad = rt.fast_launches, rt.fast_grad_launches
    reimpl.layer_norm(x, (N,), w, None, kernels="fast").backward(g)
    assert (rt.fast_launches - fwd, rt.fast_grad_launches - grad) == (1, 1)


@pytest.mark.parametrize("op", ["ln", "rms"])
@pytest.mark.parametrize("kernels", ["mirror", "fast"])
def test_an_input_changed_in_place_after_the_forward_is_refused(kernels, op):
    """As torch: the forward saves its input, and autograd checks the saved tensor's version."""
    x = torch.randn(M, N, device="cuda", requires_grad=True)
    w = torch.randn(N, device="cuda", requires_grad=True)
    for kernels_or_torch in ("torch", kernels):
        for i in range(3):  # the third call replays
            h = x * 1
            y = (torch.nn.functional.layer_norm(h, (N,), w) if kernels_or_torch == "torch" and op == "ln"
                 else torch.nn.functional.rms_norm(h, (N,), w) if kernels_or_torch == "torch"
                 else reimpl.layer_norm(h, (N,), w, kernels=kernels) if op == "ln"
                 else reimpl.rms_norm(h, (N,), w, kernels=kernels))
            if i == 2:
                h.add_(1)
                with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                    y.sum().backward()
            else:
                y.sum().backward()


@pytest.mark.parametrize("op", ["ln", "rms"])
def test_many_graphs_held_at_once_keep_their_own_statistics(op):
    """200 replayed forwards held at once, their backwards run last first: each gets its own
    forward's statistics and torch's bits."""
    gen = torch.Generator(device="cuda").manual_seed(9)
    w = torch.randn(N, device="cuda", generator=gen, requires_grad=True)
    b = torch.randn(N, device="cuda", generator=gen, requires_grad=True) if op == "ln" else None
    xs = [torch.randn(16, N, device="cuda", generator=gen).requires_grad_(True) for _ in range(200)]
    ours, theirs = zip(*[_calls(op, "fast", x, w, b) for x in xs])
    params = [t for t in (w, b) if t is not None]
    for i in reversed(range(len(xs))):  # the last forward's backward first
        g = torch.randn(16, N, device="cuda", generator=gen)
        got = torch.autograd.grad(ours[i], [xs[i], *params], g)
        want = torch.autograd.grad(theirs[i], [xs[i], *params], g)
        for a, c in zip(got, want):
            assert bit_mismatches(a, c) == 0, f"call {i}"
