"""Host time per call, ours beside torch in one run, and where ours goes.
Writes OUT.json: the environment stamp, per-call host microseconds (median of rounds of back-to-back
calls, the GPU idle enough to keep up) for the aten-level and functional calls, a module's forward
with autograd, a forward+backward step, the same calls with launch plans switched off (the full host
mirror every call), pipelined per-call time at 4096 x 1024, and a cProfile of our functional call.
Usage (a CUDA machine): python scripts/gpu/host_bench.py OUT.json"""
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import reimpl  # noqa: E402
from reimpl import api  # noqa: E402
from reimpl.checks.bench import host_us  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402

M, N = 8, 1024


def calls(x, w, b, x_req, gy, mods):
    tl, ol = mods
    return {
        "F.layer_norm": lambda: F.layer_norm(x, (N,), w, b),
        "reimpl.layer_norm": lambda: reimpl.layer_norm(x, (N,), w, b),
        "aten.native_layer_norm": lambda: torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5),
        "reimpl.native_layer_norm": lambda: reimpl.native_layer_norm(x, (N,), w, b, 1e-5),
        "F.rms_norm": lambda: F.rms_norm(x, (N,), w),
        "reimpl.rms_norm": lambda: reimpl.rms_norm(x, (N,), w),
        "torch.ops.reimpl.native_layer_norm": lambda: torch.ops.reimpl.native_layer_norm(x, [N], w, b, 1e-5),
        "torch LayerNorm module, grad": lambda: tl(x_req),
        "reimpl LayerNorm module, grad": lambda: ol(x_req),
        "torch LayerNorm fwd+bwd": lambda: tl(x_req).backward(gy),
        "reimpl LayerNorm fwd+bwd": lambda: ol(x_req).backward(gy),
    }


def pipelined_us(fn, calls=2000, rounds=5):
    """Per-call wall time of back-to-back calls ending in one synchronize: host or GPU, the slower."""
    out = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t) / calls * 1e6)
    return sorted(out)[len(out) // 2]


def main(out_path):
    x = torch.randn(M, N, device="cuda")
    w, b = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    x_req = x.clone().requires_grad_(True)
    gy = torch.randn(M, N, device="cuda")
    tl = torch.nn.LayerNorm(N, device="cuda")
    ol = reimpl.nn.LayerNorm(N, device="cuda")
    fns = calls(x, w, b, x_req, gy, (tl, ol))
    with_plans = host_us(fns)
    api.USE_PLANS = False
    without = host_us({k: v for k, v in fns.items() if k.startswith("reimpl")})
    api.USE_PLANS = True
    X = torch.randn(4096, 1024, device="cuda")
    pipe = {"F.layer_norm": pipelined_us(lambda: F.layer_norm(X, (1024,), w, b)),
            "reimpl.layer_norm": pipelined_us(lambda: reimpl.layer_norm(X, (1024,), w, b))}
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(5000):
        reimpl.layer_norm(x, (N,), w, b)
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(15)
    result = {**stamp(), "method": "host_us: median of 7 rounds of 2000 back-to-back calls, time.perf_counter "
                                   "around each round (the GPU keeps up at this size); pipelined: 2000 calls "
                                   "then one synchronize, median of 5 rounds",
              "shape": [M, N], "dtype": "float32", "host_us": with_plans, "host_us_without_plans": without,
              "pipelined_4096x1024_us": pipe,
              "ratio": with_plans["reimpl.layer_norm"] / with_plans["F.layer_norm"],
              "cprofile_reimpl_layer_norm": text.getvalue().split("\n", 3)[-1].strip()}
    Path(out_path).write_text(json.dumps(result, indent=1) + "\n")
    for k, v in with_plans.items():
        print(f"{k:40s} {v:7.2f} us" + (f"   (no plans {without[k]:7.2f})" if k in without else ""))
    print("pipelined", pipe, "ratio", result["ratio"])


if __name__ == "__main__":
    main(sys.argv[1])
