"""GPU: eight Python threads, each on a CUDA stream of its own, mix the mirror and reimpl.fast,
LayerNorm and RMSNorm, forward and backward (through autograd, and nn modules of both kinds side by
side), starting together with no launch plan made yet, so that first calls (the host mirror in full,
recording a plan) and replays interleave across threads. Every output and gradient is bit-identical
to torch's, computed in the same thread on the same stream."""
import pytest
import torch

import reimpl
from reimpl import fast
from reimpl.checks.parity import bit_mismatches
from reimpl.device import runtime

from ..thread_helpers import run_together

pytestmark = pytest.mark.gpu

THREADS = 8
ROUNDS = 6
# (rows, N, dtype): the vectorized path (fast kernels), the fallback path, a plain grad-input kernel
SHAPES = [(64, 1024, torch.float32), (37, 768, torch.bfloat16), (300, 1000, torch.float16),
          (8, 4096, torch.bfloat16), (129, 512, torch.float32)]


def _ours_and_torch(kind: str, kernels: str, x, w, b, dy):
    """(ours, torch's) lists of [y, dx, dw(, db)] for one differentiable call."""
    out = []
    for impl in ("ours", "torch"):
        xi = x.detach().clone().requires_grad_(True)
        wi = w.detach().clone().requires_grad_(True)
        bi = b.detach().clone().requires_grad_(True)
        N = x.shape[-1]
        if kind == "ln":
            f = (lambda *a: reimpl.layer_norm(*a, kernels=kernels)) if impl == "ours" else \
                torch.nn.functional.layer_norm
            y = f(xi, (N,), wi, bi, 1e-5)
            y.backward(dy)
            out.append([y, xi.grad, wi.grad, bi.grad])
        else:
            f = (lambda *a: reimpl.rms_norm(*a, kernels=kernels)) if impl == "ours" else \
                torch.nn.functional.rms_norm
            y = f(xi, (N,), wi, 1e-5)
            y.backward(dy)
            out.append([y, xi.grad, wi.grad])
    return out


def _modules(N, dtype):
    """A mirror module and a fast one beside it, with torch's twin; same parameters."""
    ref = torch.nn.LayerNorm(N, device="cuda", dtype=dtype)
    with torch.no_grad():
        ref.weight.copy_(torch.randn(N, device="cuda").to(dtype))
        ref.bias.copy_(torch.randn(N, device="cuda").to(dtype))
    mirror = reimpl.nn.LayerNorm(N, device="cuda", dtype=dtype)
    mirror.load_state_dict(ref.state_dict())
    quick = fast.use_fast(reimpl.nn.LayerNorm(N, device="cuda", dtype=dtype))
    quick.load_state_dict(ref.state_dict())
    return ref, mirror, quick


def _work(k: int, start, mismatches: list):
    stream = torch.cuda.Stream()
    gen = torch.Generator(device="cuda").manual_seed(k)
    with torch.cuda.stream(stream):
        start.wait()
        for r in range(ROUNDS):
            M, N, dtype = SHAPES[(k + r) % len(SHAPES)]
            kind = ("ln", "rms")[(k + r) % 2]
            kernels = ("mirror", "fast")[(k // 2 + r) % 2]
            x = torch.randn(M, N, device="cuda", generator=gen).to(dtype)
            w = torch.randn(N, device="cuda", generator=gen).to(dtype)
            b = torch.randn(N, device="cuda", generator=gen).to(dtype)
            dy = torch.randn(M, N, device="cuda", generator=gen).to(dtype)
            ours, theirs = _ours_and_torch(kind, kernels, x, w, b, dy)
            ref, mirror, quick = _modules(N, dtype)
            want = ref(x)
            ours += [mirror(x), quick(x)]
            theirs += [want, want]
            for a, t in zip(ours, theirs):
                mismatches.append((k, r, kind, kernels, bit_mismatches(a.detach(), t.detach())))
        stream.synchronize()


def test_eight_threads_on_their_own_streams_mix_mirror_and_fast():
    runtime.default().plans.clear()
    fast.fast_runtime().plans.clear()
    before = (fast.fast_runtime().fast_launches, fast.fast_runtime().fast_grad_launches)
    mismatches = []
    errors = run_together(lambda k, start: _work(k, start, mismatches), THREADS)
    assert not errors, errors
    # LayerNorm: y, dx, dw, db and the two modules' outputs; RMSNorm has no db
    assert len(mismatches) == sum(6 if (k + r) % 2 == 0 else 5 for k in range(THREADS) for r in range(ROUNDS))
    bad = [m for m in mismatches if m[-1]]
    assert not bad, bad[:10]
    # the fast kernels really ran, forward and dX
    assert fast.fast_runtime().fast_launches > before[0] and fast.fast_runtime().fast_grad_launches > before[1]
