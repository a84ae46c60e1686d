"""GPU, two devices: calls on the second GPU give torch's bits whichever device is current, forward
and backward, through the aten ops, the functional calls (autograd) and reimpl.fast; the launch plans
and autograd entries of one device never serve the other; tensors on two devices raise torch's
error; work on a side stream of the second device stays in that stream's order."""
import pytest
import torch

import reimpl
from reimpl.checks.parity import bit_mismatches

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.device_count() < 2,
                                 reason="needs two CUDA devices (the lent nvidia-h200-x2 machine)")]

M, N = 64, 1024
KERNELS = ["mirror", "fast"]


def _inputs(device, dtype=torch.float32, seed=0):
    gen = torch.Generator(device=device).manual_seed(seed)
    x, w, b, g = (torch.randn(*s, device=device, generator=gen).to(dtype) for s in ((M, N), (N,), (N,), (M, N)))
    return x, w, b, g


def _both(op, kernels, x, w, b):
    if op == "ln":
        return reimpl.layer_norm(x, (N,), w, b, kernels=kernels), torch.nn.functional.layer_norm(x, (N,), w, b)
    return reimpl.rms_norm(x, (N,), w, 1e-6, kernels=kernels), torch.nn.functional.rms_norm(x, (N,), w, 1e-6)


@pytest.mark.parametrize("current", [0, 1])
@pytest.mark.parametrize("op", ["ln", "rms"])
@pytest.mark.parametrize("kernels", KERNELS)
def test_the_second_device_gives_torchs_bits_whichever_is_current(kernels, op, current):
    with torch.cuda.device(current):
        for step in range(3):  # the first call records, the later ones replay where they may
            x, w, b, g = _inputs("cuda:1", torch.bfloat16, seed=step)
            x.requires_grad_(True), w.requires_grad_(True), b.requires_grad_(True)
            ours, theirs = _both(op, kernels, x, w, b)
            assert ours.device == theirs.device == torch.device("cuda:1")
            assert bit_mismatches(ours.detach(), theirs.detach()) == 0, f"step {step}: out"
            params = (x, w, b) if op == "ln" else (x, w)
            for i, (a, c) in enumerate(zip(torch.autograd.grad(ours, params, g), torch.autograd.grad(theirs, params, g))):
                assert a.device == torch.device("cuda:1") and bit_mismatches(a, c) == 0, f"step {step}: grad {i}"
            assert torch.cuda.current_device() == current


@pytest.mark.parametrize("kernels", KERNELS)
def test_one_signature_on_two_devices_keeps_each_devices_plans(kernels):
    """Same shapes, dtypes and alignment on both devices, calls alternating: each device's plan
    launches there (a plan of the other device would write into the wrong GPU's memory)."""
    for step in range(4):
        for dev in (0, 1):
            with torch.cuda.device(dev):
                x, w, b, g = _inputs(f"cuda:{dev}", seed=10 * step + dev)
                out, mean, rstd = reimpl.native_layer_norm(x, (N,), w, b, 1e-5, kernels=kernels)
                want = torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)
                for a, c in zip((out, mean, rstd), want):
                    assert a.device == c.device and bit_mismatches(a, c) == 0, (step, dev)
                got = reimpl.native_layer_norm_backward(g, x, (N,), mean, rstd, w, b, (True, True, True),
                                                        kernels=kernels)
                want = torch.ops.aten.native_layer_norm_backward(g, x, [N], want[1], want[2], w, b, [True, True, True])
                for a, c in zip(got, want):
                    assert bit_mismatches(a, c) == 0, (step, dev)


@pytest.mark.parametrize("kernels", KERNELS)
def test_tensors_on_two_devices_raise_torchs_error(kernels):
    x, _, b, _ = _inputs("cuda:0")
    _, w, _, _ = _inputs("cuda:1")
    with pytest.raises(RuntimeError) as theirs:
        torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)
    with pytest.raises(RuntimeError) as ours:
        reimpl.native_layer_norm(x, (N,), w, b, 1e-5, kernels=kernels)
    assert str(ours.value).splitlines()[0] == str(theirs.value).splitlines()[0]


@pytest.mark.parametrize("kernels", KERNELS)
def test_a_side_stream_of_the_second_device(kernels):
    x, w, b, _ = _inputs("cuda:1", seed=3)
    want = torch.nn.functional.layer_norm(x, (N,), w, b)
    with torch.cuda.device(1):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(10_000_000)  # the side stream is busy: a launch elsewhere would finish first
            got = reimpl.layer_norm(x, (N,), w, b, kernels=kernels)
        torch.cuda.current_stream().wait_stream(side)
    assert bit_mismatches(got, want) == 0
