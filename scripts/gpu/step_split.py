"""Where a forward+backward step's time goes on large tensors: host time to launch 20 steps back to
back, wall time until the GPU has finished them, and the GPU's kernel time from torch.profiler,
each per step, for torch's LayerNorm/RMSNorm and reimpl.fast's (functional call, through autograd).
A step is as fast as the slower of its host time and its GPU time; this says which one it is.
Usage (a CUDA machine): python scripts/gpu/step_split.py OUT.json"""
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

import reimpl  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402

STEPS, ROUNDS = 20, 7
SHAPES = (("layer_norm", "bf16", 16384, 1024), ("rms_norm", "bf16", 8192, 4096), ("layer_norm", "fp16", 2048, 16384),
          ("layer_norm", "bf16", 65536, 768), ("layer_norm", "fp32", 8192, 4096), ("rms_norm", "bf16", 16384, 1024),
          ("layer_norm", "fp32", 16384, 1024))
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def split(op, dtype, M, N, kernels):
    x = torch.randn(M, N, device="cuda", dtype=dtype, requires_grad=True)
    w = torch.randn(N, device="cuda", dtype=dtype, requires_grad=True)
    b = torch.randn(N, device="cuda", dtype=dtype, requires_grad=True) if op == "layer_norm" else None
    g = torch.randn(M, N, device="cuda", dtype=dtype)
    F = torch.nn.functional
    if op == "layer_norm":
        f = (lambda: F.layer_norm(x, (N,), w, b)) if kernels == "torch" else \
            (lambda: reimpl.layer_norm(x, (N,), w, b, kernels=kernels))
    else:
        f = (lambda: F.rms_norm(x, (N,), w)) if kernels == "torch" else \
            (lambda: reimpl.rms_norm(x, (N,), w, kernels=kernels))
    params = tuple(t for t in (x, w, b) if t is not None)

    def run():
        for _ in range(STEPS):
            torch.autograd.grad(f(), params, g)
    for _ in range(3):
        run()
    host, wall = [], []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        run()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) / STEPS * 1e6)
        wall.append((t2 - t0) / STEPS * 1e6)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    gpu = sum(e.device_time_total for e in prof.key_averages()
              if e.device_type == torch.autograd.DeviceType.CUDA) / STEPS
    return {"host_us": round(statistics.median(host), 1), "wall_us": round(statistics.median(wall), 1),
            "gpu_kernels_us": round(gpu, 1)}


def main(out):
    rows = []
    for op, dname, M, N in SHAPES:
        for kernels in ("torch", "fast"):
            r = {"op": op, "dtype": dname, "M": M, "N": N, "kernels": kernels, **split(op, DTYPES[dname], M, N, kernels)}
            rows.append(r)
            print(r, flush=True)
    method = (f"per step, {STEPS} forward+backward steps through autograd back to back (functional call, "
              f"torch.autograd.grad of the input, weight and bias): host_us until the last call returns and wall_us "
              f"until the GPU has finished (medians of {ROUNDS} rounds); gpu_kernels_us: the kernels' GPU time "
              "from torch.profiler over one more round")
    Path(out).write_text(json.dumps({**stamp(), "method": method, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
