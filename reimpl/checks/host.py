"""Host cost of a call, torch's beside the mirror's and reimpl.fast's, the way users make it.

Five providers, two operations (LayerNorm, RMSNorm), three ways in (the aten op,
torch.nn.functional's call, an nn module) and four passes. The providers: torch's own calls on its
kernels ("torch"); reimpl's calls, modules and ops on the mirror's kernels or the fast ones ("mirror",
"fast"); and torch's own calls again with our kernels installed as aten's ("mirror_in_torch",
"fast_in_torch", reimpl/aten_kernels.py), installed around each of their rounds, outside the clock.
The passes:

    forward            no argument needs a gradient: no graph is built
    forward, grad      the input needs one: the call also records the autograd graph
    backward           torch.autograd.grad on a graph built beforehand (the aten way: the backward op)
    forward+backward   both, as a training step makes them

torch.autograd.grad returns fresh gradients, so no accumulation kernel joins the backward. Host time
is wall time per call of many calls back to back on a shape small enough that the GPU keeps up;
`step_us` is the pipelined time of a forward+backward on a large shape (host or GPU, whichever is
slower), which is what a training step pays.
"""
from __future__ import annotations

import contextlib
import statistics
import time

import torch

KERNELS = ("torch", "mirror", "fast", "mirror_in_torch", "fast_in_torch")
IN_TORCH = "_in_torch"
PASSES = ("forward", "forward, grad", "backward", "forward+backward")
APIS = ("functional", "module", "aten")
SMALL = (8, 1024)


def cells():
    """(op, api, pass) of every host-cost cell: the aten ops are not differentiable in reimpl (its
    functional calls and modules are), so theirs are the forward op and the backward op."""
    for op in ("layer_norm", "rms_norm"):
        for api in APIS:
            for pass_ in (("forward", "backward") if api == "aten" else PASSES):
                yield op, api, pass_


def _inputs(op, M, N, dtype, grad: bool):
    x = torch.randn(M, N, device="cuda", dtype=dtype, requires_grad=grad)
    w = torch.randn(N, device="cuda", dtype=dtype, requires_grad=grad)
    b = torch.randn(N, device="cuda", dtype=dtype, requires_grad=grad) if op == "layer_norm" else None
    return x, w, b


def _torchs_call(kernels: str) -> bool:
    """Whether a provider calls torch's own ops (torch's, or with ours installed below them)."""
    return kernels == "torch" or kernels.endswith(IN_TORCH)


def installed(kernels: str):
    """The context a provider's calls run in: our kernels installed as aten's for the in-torch ones."""
    if kernels.endswith(IN_TORCH):
        from .. import aten_kernels
        return aten_kernels.in_torch(kernels.removesuffix(IN_TORCH))
    return contextlib.nullcontext()


def forward_fn(op: str, api: str, kernels: str, N: int, dtype, w, b):
    """f(x) -> the output tensor, for one provider and way in."""
    import reimpl
    F = torch.nn.functional
    if _torchs_call(kernels):  # what runs below torch's call is installed around the round
        kernels = "torch"
    if api == "module":
        if kernels == "torch":
            m = (torch.nn.LayerNorm(N, device="cuda", dtype=dtype) if op == "layer_norm"
                 else torch.nn.RMSNorm(N, device="cuda", dtype=dtype))
        else:
            m = (reimpl.nn.LayerNorm(N, device="cuda", dtype=dtype) if op == "layer_norm"
                 else reimpl.nn.RMSNorm(N, device="cuda", dtype=dtype))
            m.kernels = kernels
        return m
    if api == "aten":
        if kernels == "torch":
            if op == "layer_norm":
                return lambda x: torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)[0]
            return lambda x: torch.ops.aten._fused_rms_norm(x, [N], w, 1e-5)[0]
        if op == "layer_norm":
            return lambda x: reimpl.native_layer_norm(x, (N,), w, b, 1e-5, kernels=kernels)[0]
        return lambda x: reimpl.fused_rms_norm(x, (N,), w, 1e-5, kernels=kernels)[0]
    if kernels == "torch":
        if op == "layer_norm":
            return lambda x: F.layer_norm(x, (N,), w, b, 1e-5)
        return lambda x: F.rms_norm(x, (N,), w, 1e-5)
    if op == "layer_norm":
        return lambda x: reimpl.layer_norm(x, (N,), w, b, 1e-5, kernels=kernels)
    return lambda x: reimpl.rms_norm(x, (N,), w, 1e-5, kernels=kernels)


def _params(f, x, w, b):
    """What the backward differentiates: the input and the weights the call uses."""
    if isinstance(f, torch.nn.Module):
        return (x, *f.parameters())
    return tuple(t for t in (x, w, b) if t is not None)


def _time_round(run, setup, calls: int, kernels: str = "torch", wait: bool = False) -> float:
    """Microseconds per call of one round of `calls` calls (setup, if any, made before the clock):
    until the last call returns, or with `wait` until the GPU has finished them too."""
    with installed(kernels):
        state = setup() if setup is not None else None
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        run(state)
        if wait:
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def _median_us(run, setup, calls: int, rounds: int) -> float:
    return statistics.median(_time_round(run, setup, calls) for _ in range(rounds))


def _cell(op: str, api: str, kernels: str, pass_: str, M: int, N: int, dtype, calls: int):
    """(run, setup) of one provider's calls in one cell."""
    grad = pass_ != "forward"
    if api == "aten" and pass_ == "backward":
        return _aten_backward(op, kernels, M, N, dtype, calls)
    x, w, b = _inputs(op, M, N, dtype, grad)
    f = forward_fn(op, api, kernels, N, dtype, w, b)
    g = torch.randn(M, N, device="cuda", dtype=dtype)
    params = _params(f, x, w, b)
    if api == "module" and not grad:
        for p in params[1:]:
            p.requires_grad_(False)
    setup = None
    if pass_ in ("forward", "forward, grad"):
        def run(_):
            for _ in range(calls):
                f(x)
    elif pass_ == "backward":
        def setup():
            return [f(x) for _ in range(calls)]

        def run(ys):
            for y in ys:
                torch.autograd.grad(y, params, g)
    else:
        def run(_):
            for _ in range(calls):
                torch.autograd.grad(f(x), params, g)
    with installed(kernels):
        for _ in range(3):  # first calls compile, load and record plans
            run(setup() if setup else None)
    return run, setup


def host_us(op: str, api: str, pass_: str, kernels=KERNELS, M: int = SMALL[0], N: int = SMALL[1],
            dtype=torch.float32, calls: int = 1000, rounds: int = 7) -> dict[str, float]:
    """Median host microseconds per call of one cell for each provider in `kernels`, the providers
    taking turns round by round so that a drift of the machine's speed touches them alike."""
    cells = {k: _cell(op, api, k, pass_, M, N, dtype, calls) for k in kernels}
    times: dict[str, list] = {k: [] for k in kernels}
    for _ in range(rounds):
        for k, (run, setup) in cells.items():
            times[k].append(_time_round(run, setup, calls, k))
    return {k: statistics.median(v) for k, v in times.items()}


def _aten_backward(op, kernels, M, N, dtype, calls):
    """(run, setup) for the backward op alone on torch's saved statistics."""
    import reimpl
    x, w, b = _inputs(op, M, N, dtype, False)
    g = torch.randn(M, N, device="cuda", dtype=dtype)
    aten = torch.ops.aten
    if op == "layer_norm":
        _, mean, rstd = aten.native_layer_norm(x, [N], w, b, 1e-5)
        if _torchs_call(kernels):
            def one():
                aten.native_layer_norm_backward(g, x, [N], mean, rstd, w, b, [True, True, True])
        else:
            def one():
                reimpl.native_layer_norm_backward(g, x, (N,), mean, rstd, w, b, (True, True, True), kernels=kernels)
    else:
        _, rstd = aten._fused_rms_norm(x, [N], w, 1e-5)
        if _torchs_call(kernels):
            def one():
                aten._fused_rms_norm_backward(g, x, [N], rstd, w, [True, True])
        else:
            def one():
                reimpl.fused_rms_norm_backward(g, x, (N,), rstd, w, (True, True), kernels=kernels)

    def run(_):
        for _ in range(calls):
            one()
    with installed(kernels):
        for _ in range(3):
            run(None)
    return run, None


def step_us(op: str, M: int, N: int, dtype, kernels=KERNELS, api: str = "functional", steps: int = 20,
            rounds: int = 7) -> dict[str, float]:
    """Median wall microseconds per forward+backward for each provider: `steps` back to back and one
    synchronize inside the clock (so the slower of the host and the GPU sets the time), the
    providers taking turns round by round."""
    runs = {}
    for k in kernels:
        x, w, b = _inputs(op, M, N, dtype, True)
        f = forward_fn(op, api, k, N, dtype, w, b)
        g = torch.randn(M, N, device="cuda", dtype=dtype)

        def run(_, f=f, x=x, g=g, params=_params(f, x, w, b)):
            for _ in range(steps):
                torch.autograd.grad(f(x), params, g)
        with installed(k):
            for _ in range(2):
                run(None)
        runs[k] = run
    times: dict[str, list] = {k: [] for k in kernels}
    for _ in range(rounds):
        for k, run in runs.items():
            times[k].append(_time_round(run, None, steps, k, wait=True))
    return {k: statistics.median(v) for k, v in times.items()}


def table(calls: int = 400, rounds: int = 7, M: int = SMALL[0], N: int = SMALL[1]) -> str:
    """The host-cost matrix as a Markdown table (`python -m reimpl bench --host`): every cell, the
    five providers taking turns, with each of ours over torch's."""
    from .bench import _stamp_line
    ours = KERNELS[1:]
    lines = [_stamp_line(), "", f"Host time per call in us at {M} x {N} fp32 (median of {rounds} rounds of {calls} calls, the "
             "providers taking turns round by round; '/ torch' columns are each provider over torch).", "",
             "| op | call | pass | " + " | ".join(KERNELS) + " | " + " | ".join(f"{k} / torch" for k in ours) + " |",
             "|---|---|---|" + "--:|" * (len(KERNELS) + len(ours))]
    for op, api, pass_ in cells():
        us = host_us(op, api, pass_, M=M, N=N, calls=calls, rounds=rounds)
        lines.append(f"| {op} | {api} | {pass_} | " + " | ".join(f"{us[k]:.1f}" for k in KERNELS) + " | "
                     + " | ".join(f"{us[k] / us['torch']:.2f}" for k in ours) + " |")
    return "\n".join(lines) + "\n"
