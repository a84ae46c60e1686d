"""Benchmark: GPU time of the mirror against torch, side by side in one run, and host overhead.

GPU time: median of CUDA-event timings over many launches, ours and torch interleaved per round so
both see the same clocks and caches. Host overhead: wall time per call for a small problem
(8 x 1024), where the launch path, not the kernel, sets the pace. Writes a Markdown table.
"""
from __future__ import annotations

import statistics
import time

import torch

SHAPES = ((4096, 1024), (16384, 4096), (32768, 8192), (65536, 768))
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def _gpu_ms(fn, reps: int, spin_cycles: int = 20_000_000, scrub: torch.Tensor | None = None) -> list[float]:
    """Per-call GPU time. A spin kernel queued first holds the GPU while the host enqueues all
    `reps` calls with their event pairs, so host launch latency never shows up as GPU time. With
    `scrub` (a buffer larger than the L2), each call is preceded, outside its events, by a kernel that
    reads the whole buffer: the call then finds none of its data in the L2, and no dirty lines
    either, whose write-back it would pay for (a flush that writes, such as zero_(), leaves them)."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    torch.cuda._sleep(spin_cycles)  # 2e7 cycles ~ 10 ms at H100 clocks: longer than enqueueing 50 forwards
    for s, e in zip(starts, ends):
        if scrub is not None:
            scrub.sum()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


SCRUB_BYTES = 256 << 20  # five times the H100's 50 MB L2
# gpu_time's two ways of timing, as the result files name and describe them (flush_l2 = name == "flushed")
METHODS = {
    "pipelined": "median of CUDA-event times, launches pipelined behind a spin kernel, L2 not flushed: each call "
                 "finds in the L2 what the one before left there",
    "flushed": "median of CUDA-event times, launches pipelined behind a spin kernel, each call preceded (outside "
               "its events) by a read of a 256 MB buffer: every call starts with a cold, clean L2",
}


FAST_SHAPES = ((4096, 1024), (65536, 768), (16384, 4096), (32768, 8192), (8192, 16384))  # the fast kernels' tuning cells


def kernel_us(call, calls: int = 5) -> dict[str, float]:
    """Mean GPU time (µs, torch.profiler's CUPTI records) per launch of each kernel that `calls`
    back-to-back calls of call() ran, keyed by the kernel's short name (no namespace or template
    arguments): how the probes split a call's time among its kernels."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    return {e.key.split("<")[0].split("::")[-1]: e.device_time_total / e.count
            for e in prof.key_averages() if e.device_time_total > 0}


def profiled_once(call, warmups: int = 2) -> None:
    """call() `warmups` times (compiles, plans), then once between cudaProfilerStart and
    cudaProfilerStop: what a script run under `ncu --profile-from-start off` hands Nsight Compute."""
    for _ in range(warmups):
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def cells(shapes):
    """(method, dtype name, dtype, M, N) for every timing method, dtype and shape, in the order the
    fast benchmarks run and record them."""
    for method in METHODS:
        for dname, dtype in DTYPES.items():
            for M, N in shapes:
                yield method, dname, dtype, M, N


def gpu_time(fns: dict, reps: int = 50, rounds: int = 5, spin_cycles: int = 20_000_000,
             flush_l2: bool = False) -> dict[str, float]:
    """Median milliseconds per call for each fn, interleaved in rounds. flush_l2: each call starts
    with a cold L2 (see _gpu_ms); otherwise calls run back to back and find what the previous one
    left in the L2."""
    scrub = torch.ones(SCRUB_BYTES // 4, device="cuda") if flush_l2 else None
    for fn in fns.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    samples = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            samples[k] += _gpu_ms(fn, reps, spin_cycles, scrub)
    return {k: statistics.median(v) for k, v in samples.items()}


def host_us(fns: dict, calls: int = 2000, rounds: int = 7, wait: bool = False) -> dict[str, float]:
    """Median microseconds of host time per call (the GPU keeps up: the kernels are tiny), the fns
    taking turns round by round. With `wait`, each round's clock stops when the GPU has finished its
    calls too (the slower of host and GPU sets the time)."""
    out = {k: [] for k in fns}
    for fn in fns.values():
        for _ in range(100):
            fn()
    torch.cuda.synchronize()
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            if wait:
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            out[k].append((t1 - t0) / calls * 1e6)
    return {k: statistics.median(v) for k, v in out.items()}


def _grid():
    """(op, dtype name, dtype, M, N) of every benchmark row, in table order."""
    for op in ("layer_norm", "rms_norm"):
        for dname, dtype in DTYPES.items():
            for m, n in SHAPES:
                yield op, dname, dtype, m, n


def _stamp_line() -> str:
    from reimpl.checks.record import stamp
    import cupy
    st = stamp()
    return (f"Device: {st['device']}; torch {st['torch']} (git {st['git'][:12]}), CUDA {st['cuda']}, "
            f"CuPy {cupy.__version__}; date {st['date']}.")


def _training_fns(op: str, x, w, b, g) -> dict:
    """One forward plus backward through autograd, torch.nn.functional's and ours. autograd.grad
    returns fresh gradients, so no accumulation kernel is added on repeated calls."""
    import reimpl
    n = x.shape[-1]
    if op == "layer_norm":
        def step(f):
            return lambda: torch.autograd.grad(f(x, (n,), w, b, 1e-5), (x, w, b), g)
        return {"torch": step(torch.nn.functional.layer_norm), "ours": step(reimpl.layer_norm)}

    def step(f):
        return lambda: torch.autograd.grad(f(x, (n,), w, 1e-5), (x, w), g)
    return {"torch": step(torch.nn.functional.rms_norm), "ours": step(reimpl.rms_norm)}


def _backward_fns(op: str, x, w, b, g) -> dict:
    """The aten backward op alone, on torch's saved statistics."""
    import reimpl
    n = x.shape[-1]
    if op == "layer_norm":
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, 1e-5)
        return {"torch": lambda: torch.ops.aten.native_layer_norm_backward(g, x, [n], mean, rstd, w, b,
                                                                          [True, True, True]),
                "ours": lambda: reimpl.native_layer_norm_backward(g, x, (n,), mean, rstd, w, b, (True, True, True))}
    _, rstd = torch.ops.aten._fused_rms_norm(x, [n], w, 1e-5)
    return {"torch": lambda: torch.ops.aten._fused_rms_norm_backward(g, x, [n], rstd, w, [True, True]),
            "ours": lambda: reimpl.fused_rms_norm_backward(g, x, (n,), rstd, w, (True, True))}


def run_backward() -> str:
    """Forward + backward through autograd, and the backward op alone, ours against torch."""
    lines = [_stamp_line(), ""]
    lines.append("GPU time per call: median of per-call CUDA-event timings (5 rounds x 20 calls, ours and torch "
                 "interleaved by round; calls queued behind a ~50 ms spin kernel so host latency is excluded). "
                 "`fwd+bwd` is one forward and one backward through autograd (F.layer_norm / F.rms_norm against "
                 "reimpl.layer_norm / reimpl.rms_norm, gradients for input, weight and bias); `bwd` is the aten "
                 "backward op alone (native_layer_norm_backward / _fused_rms_norm_backward).")
    lines.append("")
    lines.append("| op | dtype | M x N | pass | torch us | ours us | ours/torch |")
    lines.append("|---|---|---|---|---|---|---|")
    worst = 0.0
    for op, dname, dtype, m, n in _grid():
        x = torch.randn(m, n, device="cuda", dtype=dtype, requires_grad=True)
        w = torch.randn(n, device="cuda", dtype=dtype, requires_grad=True)
        b = torch.randn(n, device="cuda", dtype=dtype, requires_grad=True)
        g = torch.randn(m, n, device="cuda", dtype=dtype)
        for label, fns in (("fwd+bwd", _training_fns(op, x, w, b, g)),
                           ("bwd", _backward_fns(op, x.detach(), w.detach(), b.detach(), g))):
            t = gpu_time(fns, reps=20, spin_cycles=100_000_000)
            ratio = t["ours"] / t["torch"]
            worst = max(worst, ratio)
            lines.append(f"| {op} | {dname} | {m} x {n} | {label} | {t['torch']*1e3:.1f} | "
                         f"{t['ours']*1e3:.1f} | {ratio:.3f} |")
        del x, w, b, g
    lines.append("")
    lines.append(f"Worst ours/torch GPU-time ratio: {worst:.3f}.")
    return "\n".join(lines) + "\n"


def run() -> str:
    import reimpl
    lines = [_stamp_line(), ""]
    lines.append("GPU time per forward call: median of per-call CUDA-event timings (5 rounds x 50 calls, ours and torch "
                 "interleaved by round; calls queued behind a spin kernel so host latency is excluded). "
                 "GB/s counts one read and one write of x.")
    lines.append("")
    lines.append("| op | dtype | M x N | torch us | ours us | ours/torch | torch GB/s | ours GB/s |")
    lines.append("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for op, dname, dtype, m, n in _grid():
        x = torch.randn(m, n, device="cuda", dtype=dtype)
        w = torch.randn(n, device="cuda", dtype=dtype)
        b = torch.randn(n, device="cuda", dtype=dtype)
        if op == "layer_norm":
            fns = {"torch": lambda: torch.ops.aten.native_layer_norm(x, [n], w, b, 1e-5),
                   "ours": lambda: reimpl.native_layer_norm(x, (n,), w, b, 1e-5)}
        else:
            fns = {"torch": lambda: torch.ops.aten._fused_rms_norm(x, [n], w, 1e-5),
                   "ours": lambda: reimpl.fused_rms_norm(x, (n,), w, 1e-5)}
        t = gpu_time(fns)
        gb = 2 * x.numel() * x.element_size() / 1e9
        ratio = t["ours"] / t["torch"]
        worst = max(worst, ratio)
        lines.append(f"| {op} | {dname} | {m} x {n} | {t['torch']*1e3:.1f} | {t['ours']*1e3:.1f} | "
                     f"{ratio:.3f} | {gb / (t['torch']/1e3):.0f} | {gb / (t['ours']/1e3):.0f} |")
        del x, w, b
    lines.append("")
    lines.append(f"Worst ours/torch GPU-time ratio: {worst:.3f}.")
    lines.append("")
    x = torch.randn(8, 1024, device="cuda")
    w = torch.randn(1024, device="cuda")
    b = torch.randn(1024, device="cuda")
    h = host_us({"torch F.layer_norm": lambda: torch.nn.functional.layer_norm(x, (1024,), w, b),
                 "ours reimpl.layer_norm": lambda: reimpl.layer_norm(x, (1024,), w, b),
                 "torch aten.native_layer_norm": lambda: torch.ops.aten.native_layer_norm(x, [1024], w, b, 1e-5),
                 "ours reimpl.native_layer_norm": lambda: reimpl.native_layer_norm(x, (1024,), w, b, 1e-5)})
    lines.append("Host time per call at 8 x 1024 fp32 (median of 7 rounds of 2000 calls):")
    lines.append("")
    lines.append("| call | us per call |")
    lines.append("|---|---|")
    for k, v in h.items():
        lines.append(f"| {k} | {v:.1f} |")
    lines.append("")
    lines.append(f"Host overhead ratio (reimpl.layer_norm / F.layer_norm): "
                 f"{h['ours reimpl.layer_norm'] / h['torch F.layer_norm']:.2f}.")
    return "\n".join(lines) + "\n"
