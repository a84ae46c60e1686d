"""Where the host time of one forward+backward through autograd goes, at 8 x 1024 fp32: torch's
profiler (CPU events) for torch's norms, the mirror's and reimpl.fast's, and torch's call with
the fast kernels installed as aten's (reimpl.fast.in_torch); wall time inside our
autograd Function's backward (measured in the thread autograd runs it in) against the whole
backward; and the floor, a Python autograd Function that launches nothing.
scripts/gpu/host_bench.py runs it and stores it as its record's `probe`.
Usage (a CUDA machine): python scripts/gpu/host_probe.py OUT.json"""
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

import reimpl  # noqa: E402
from reimpl import api, autograd  # noqa: E402
from reimpl.checks import host  # noqa: E402

M, N = 8, 1024
CALLS, ROUNDS = 1000, 7


def median_us(fn):
    """Host us per call of fn, after 200 warm-up calls (reimpl.checks.host's rounds)."""
    def run(_):
        for _ in range(CALLS):
            fn()
    for _ in range(200):
        fn()
    return host._median_us(run, None, CALLS, ROUNDS)


class Nothing(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g


def probe() -> dict:
    """The pieces of the Python node's forward+backward: the C++ node (reimpl/device/native.py) is set
    aside for the probe, whose hooks time the Python backward."""
    held, autograd._native = autograd._native, False
    try:
        return _probe()
    finally:
        autograd._native = held


def _probe() -> dict:
    x = torch.randn(M, N, device="cuda", requires_grad=True)
    w = torch.randn(N, device="cuda", requires_grad=True)
    b = torch.randn(N, device="cuda", requires_grad=True)
    g = torch.randn(M, N, device="cuda")
    F = torch.nn.functional
    fns = {"torch": lambda x: F.layer_norm(x, (N,), w, b),
           "mirror": lambda x: reimpl.layer_norm(x, (N,), w, b),
           "fast": lambda x: reimpl.layer_norm(x, (N,), w, b, kernels="fast")}
    res = {"method": f"scripts/gpu/host_probe.py: median of {ROUNDS} rounds of {CALLS} calls at {M} x {N} fp32, "
                     "reimpl.layer_norm (LayerNorm), and F.layer_norm for torch and in torch; 'inside' times are "
                     "medians of 2000 single calls timed in autograd's own thread",
           "floor": {"python Function, forward+backward": median_us(lambda: torch.autograd.grad(Nothing.apply(x), x, g)),
                     "x * 2, forward+backward": median_us(lambda: torch.autograd.grad(x * 2, x, g)),
                     "torch.empty(8, 1024)": median_us(lambda: torch.empty((M, N), dtype=torch.float32, device=x.device)),
                     "torch.empty_like(x)": median_us(lambda: torch.empty_like(x))}}
    xd, wd, bd = x.detach(), w.detach(), b.detach()
    for kernels in ("mirror", "fast"):
        rt = api.runtime_for(kernels)
        _, mean, rstd = api._native_layer_norm(xd, (N,), wd, bd, 1e-5, rt=rt)
        res["floor"][f"{kernels}: kernels call, three outputs"] = median_us(
            lambda: api._native_layer_norm(xd, (N,), wd, bd, 1e-5, rt=rt))
        res["floor"][f"{kernels}: kernels call, out only"] = median_us(
            lambda: api._native_layer_norm(xd, (N,), wd, bd, 1e-5, keep=1, rt=rt))
        res["floor"][f"{kernels}: backward kernels call"] = median_us(
            lambda: api.native_layer_norm_backward(g, xd, (N,), mean, rstd, wd, bd, (True, True, True), rt=rt))
    # time inside our backward, in autograd's thread
    inside, body = [], []
    orig_backward = autograd._layer_norm_backward
    orig_api = api._native_layer_norm_backward  # the kernel call torch's node makes, in torch
    orig_run = autograd._Signature.run_backward  # ours: the backward op's plan replay (or api call)

    def timed(fn):
        def call(*a, **k):
            t = time.perf_counter()
            r = fn(*a, **k)
            body.append(time.perf_counter() - t)
            return r
        return call

    def timed_backward(ctx, gy):
        t = time.perf_counter()
        r = orig_backward(ctx, gy)
        inside.append(time.perf_counter() - t)
        return r
    for kernels in ("torch", "mirror", "fast", "fast_in_torch"):
        f = fns.get(kernels, fns["torch"])  # in torch: torch's call, our kernels installed below it
        with host.installed(kernels):
            step = median_us(lambda: torch.autograd.grad(f(x), (x, w, b), g))
            fwd = median_us(lambda: f(x))
            row = {"forward, grad": fwd, "forward+backward": step}
            if kernels != "torch":
                if kernels in ("mirror", "fast"):
                    autograd.LayerNormFunction.backward = staticmethod(timed_backward)  # grad mode is off in it
                    autograd._Signature.run_backward = timed(orig_run)
                else:
                    api._native_layer_norm_backward = timed(orig_api)
                inside.clear(), body.clear()
                for _ in range(2000):
                    torch.autograd.grad(f(x), (x, w, b), g)
                autograd.LayerNormFunction.backward = autograd._once(orig_backward)
                autograd._Signature.run_backward = orig_run
                api._native_layer_norm_backward = orig_api
                if inside:
                    row["inside Function.backward"] = statistics.median(inside) * 1e6
                row["inside api backward call"] = statistics.median(body) * 1e6
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
                for _ in range(200):
                    torch.autograd.grad(f(x), (x, w, b), g)
        row["profile"] = p.key_averages().table(sort_by="cpu_time_total", row_limit=18)
        res[kernels] = row
        print(kernels, {k: v for k, v in row.items() if k != "profile"}, flush=True)
        print(row["profile"], flush=True)
    print(res["floor"])
    # cProfile: the forward kernel call with three outputs on the main thread, and the backward in
    # autograd's thread (the profiler is switched on and off inside that thread)
    import cProfile
    import io
    import pstats

    def table(prof, n=16):
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(n)
        return text.getvalue().split("\n", 3)[-1].strip()
    for kernels in ("mirror", "fast"):
        rt = api.runtime_for(kernels)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(3000):
            api._native_layer_norm(xd, (N,), wd, bd, 1e-5, rt=rt)
        prof.disable()
        res[f"cprofile {kernels} forward three outputs"] = table(prof)
        print(kernels, "forward three outputs\n", res[f"cprofile {kernels} forward three outputs"], flush=True)
        state = {"prof": None, "stop": False}

        def profiled(ctx, gy):
            if state["prof"] is None:
                state["prof"] = cProfile.Profile()
                state["prof"].enable()
            r = orig_backward(ctx, gy)
            if state["stop"]:
                state["prof"].disable()
            return r
        autograd.LayerNormFunction.backward = staticmethod(profiled)
        f = fns[kernels]
        for i in range(3001):
            state["stop"] = i == 3000
            torch.autograd.grad(f(x), (x, w, b), g)
        autograd.LayerNormFunction.backward = autograd._once(orig_backward)
        res[f"cprofile {kernels} backward in autograd's thread"] = table(state["prof"], 24)
        print(kernels, "backward in thread\n", res[f"cprofile {kernels} backward in autograd's thread"], flush=True)
    return res


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(probe(), indent=1) + "\n")
