"""Parity cases run under reimpl.fast's runtime, shared by the forward and dX test files, and the
replay, graph, stream and thread check shared by the backward routes' test files."""
import torch

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
