"""GPU: a forward and its backward through autograd, captured once in a CUDA graph, replay torch's
bits for new values written into the captured inputs, with the mirror's kernels and with
reimpl.fast's (whose forward and dX kernels are the ones captured). The captured call replays a
launch plan; the first call of each signature ran before capture, on a side stream, as torch's
CUDA-graph recipe asks."""
import pytest
import torch

import reimpl
from reimpl import fast
from reimpl.checks.parity import bit_mismatches

pytestmark = pytest.mark.gpu


def _step(op, kernels, x, w, b, g):
    N = x.shape[-1]
    if op == "layer_norm":
        y = reimpl.layer_norm(x, (N,), w, b, 1e-5, kernels=kernels)
        return (y, *torch.autograd.grad(y, (x, w, b), g))
    y = reimpl.rms_norm(x, (N,), w, 1e-5, kernels=kernels)
    return (y, *torch.autograd.grad(y, (x, w), g))


def _torch_step(op, x, w, b, g):
    x, w, b = (t.detach().clone().requires_grad_(True) for t in (x, w, b))
    N = x.shape[-1]
    if op == "layer_norm":
        y = torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5)
        return (y, *torch.autograd.grad(y, (x, w, b), g))
    y = torch.nn.functional.rms_norm(x, (N,), w, 1e-5)
    return (y, *torch.autograd.grad(y, (x, w), g))


@pytest.mark.parametrize("kernels", ["mirror", "fast"])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("M,N,dtype", [(256, 1024, torch.bfloat16), (64, 4096, torch.float32),
                                       (300, 768, torch.float16),
                                       (17000, 256, torch.bfloat16), (17000, 64, torch.float16)])  # lane kernel
def test_a_captured_training_step_replays_torchs_bits(kernels, op, M, N, dtype):
    torch.manual_seed(M + N)
    x = torch.randn(M, N, device="cuda", dtype=dtype, requires_grad=True)
    w = torch.randn(N, device="cuda", dtype=dtype, requires_grad=True)
    b = torch.randn(N, device="cuda", dtype=dtype, requires_grad=True)
    g = torch.randn(M, N, device="cuda", dtype=dtype)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            _step(op, kernels, x, w, b, g)
    torch.cuda.current_stream().wait_stream(side)
    rt = fast.fast_runtime()
    before = (rt.fast_launches, rt.fast_grad_launches)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = _step(op, kernels, x, w, b, g)
    if kernels == "fast":  # our forward and dX kernels are what the graph holds
        assert (rt.fast_launches, rt.fast_grad_launches) == (before[0] + 1, before[1] + 1)
    for seed in range(3):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        with torch.no_grad():
            for t in (x, w, b, g):
                t.copy_(torch.randn(t.shape, device="cuda", generator=gen).to(dtype))
        graph.replay()
        torch.cuda.synchronize()
        want = _torch_step(op, x, w, b, g)
        for got_t, want_t in zip(outs, want):
            assert bit_mismatches(got_t, want_t) == 0, (seed, got_t.shape)
