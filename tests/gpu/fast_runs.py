"""Parity cases run under reimpl.fast's runtime, shared by the forward and dX test files, and the
backward routes' shared pieces: their tile and mask cases, and the replay, graph, stream and thread
check."""
import itertools

import torch

from reimpl.checks import cases_backward as bwd
from reimpl.checks.cases import VALUE_KINDS
from reimpl.checks.parity import compare_case
from reimpl.device import runtime
from tests.conftest import record


def run_fast(group: str, counter: str, launches: str, cs) -> tuple[list[str], int]:
    """Compare each case with torch under the fast runtime, recording elements under `group` and,
    once per case that raised the runtime's `launches` count (a fast kernel ran), a `counter` entry.
    Returns (messages of differing outputs, cases that launched a fast kernel)."""
    from reimpl.fast import fast_runtime
    rt = fast_runtime()
    bad, fast_cases = [], 0
    for c in cs:
        before = getattr(rt, launches)
        with runtime.use(rt), torch.no_grad():
            elements, n, msgs = compare_case(c)
        fast_cases += getattr(rt, launches) > before
        record(group, elements, n)
        bad += msgs
    for _ in range(fast_cases):
        record(counter, 0, 0)
    return bad, fast_cases


def tile_cases(Ns, Ms, long_from: int, stride: int) -> list:
    """Backward cases over N in Ns and M in Ms (every `stride`-th M for N above `long_from`), each
    dtype, LayerNorm and RMSNorm in turn, the value kinds of x and dy, and eps taking turns."""
    out = []
    for dt in ("fp32", "fp16", "bf16"):
        for n in Ns:
            for m in (Ms if n <= long_from else Ms[::stride]):
                k = len(out)
                op = ("layer_norm", "rms_norm")[k % 2]
                out.append(bwd.BackwardCase(op, dt, (m, n), weight=True, bias=op == "layer_norm",
                                            values=VALUE_KINDS[k % len(VALUE_KINDS)],
                                            dy_values=VALUE_KINDS[(k // 5) % len(VALUE_KINDS)],
                                            eps=(1e-5, 0.0, 1e-2)[k % 3], seed=k))
    return out


def mask_cases(shapes) -> list:
    """Every output mask, with bias (LayerNorm) and without (dgamma alone), on each (M, N) of `shapes`."""
    out = []
    for dt in ("fp32", "bf16"):
        for m, n in shapes:
            for mask in itertools.product((False, True), repeat=3):
                out.append(bwd.BackwardCase("layer_norm", dt, (m, n), mask=mask, seed=len(out)))
            for mask in itertools.product((False, True), repeat=2):
                out.append(bwd.BackwardCase("rms_norm", dt, (m, n), bias=False, mask=mask + (False,), seed=len(out)))
            out.append(bwd.BackwardCase("layer_norm", dt, (m, n), bias=False, mask=(True, True, False), seed=len(out)))
    return out


def _grads(fn, dy, *args):
    leaves = [t.clone().requires_grad_(True) for t in args]
    fn(leaves[0], (args[0].shape[-1],), *leaves[1:]).backward(dy)
    return [t.grad for t in leaves]


def _same(a, b) -> bool:
    iview = {2: torch.int16, 4: torch.int32}[a.element_size()]
    return torch.equal(a.view(iview), b.view(iview))


def replays_graphs_streams_and_threads(dtype, M: int, N: int, launches: str) -> None:
    """The fast LayerNorm backward of M x N: the same signature three times (the plan's replay asks
    the stream's scratch again), a CUDA graph of the backward replayed on new data, a side stream,
    and four host threads at once, each against torch's gradients; `launches` (a FastRuntime
    counter) and the finish kernel's ran once per call of the three."""
    import threading

    from reimpl import fast
    rt = fast.fast_runtime()
    F = torch.nn.functional
    data = [[torch.randn(*s, device="cuda", dtype=dtype) for s in ((M, N), (N,), (N,), (M, N))] for _ in range(3)]
    before = (getattr(rt, launches), rt.finish_launches)
    for x, w, b, dy in data:
        assert all(map(_same, _grads(fast.layer_norm, dy, x, w, b), _grads(F.layer_norm, dy, x, w, b)))
    assert (getattr(rt, launches) - before[0], rt.finish_launches - before[1]) == (3, 3)

    x, w, b, dy = (t.clone() for t in data[0])
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)
    call = lambda: fast.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b)  # noqa: E731
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()  # warm-up on a side stream, as graph capture wants
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            outs = call()
    torch.cuda.current_stream().wait_stream(side)
    for x2, w2, b2, dy2 in data[1:]:
        x.copy_(x2), w.copy_(w2), b.copy_(b2), dy.copy_(dy2)
        _, m2, r2 = torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)
        mean.copy_(m2), rstd.copy_(r2)
        graph.replay()
        want = torch.ops.aten.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b, [True, True, True])
        assert all(map(_same, outs, want))

    results, errors = {}, []

    def worker(i):
        try:
            x, w, b, dy = data[i % 3]
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                for _ in range(20):
                    got = _grads(fast.layer_norm, dy, x, w, b)
            s.synchronize()
            results[i] = got
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, got in results.items():
        x, w, b, dy = data[i % 3]
        assert all(map(_same, got, _grads(F.layer_norm, dy, x, w, b)))
