"""Time every ladder rung (reimpl/ladder/registry.py, CUDA and Triton) beside torch's F.layer_norm / F.rms_norm and a copy (x.clone()), in one
run: median CUDA-event time per call, launches pipelined back to back behind a spin kernel (the L2
is not flushed between calls; every shape but 4096 x 1024 is far larger than the 50 MB L2).
Forward GB/s counts one read of x and one write of y; forward+backward (Triton and torch, through
autograd) counts x and y, then x, dy and dx. Usage: python scripts/gpu/ladder_bench.py OUT.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from reimpl.checks.bench import gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.ladder import registry, rungs, triton_rungs  # noqa: E402

SHAPES = ((4096, 1024), (65536, 768), (16384, 4096), (32768, 8192), (8192, 16384))
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
SLOW = {"naive"}  # one thread per row: timed on the two small shapes only, with fewer calls


def main(out: str) -> None:
    rows = []
    for dname, dtype in DTYPES.items():
        for M, N in SHAPES:
            x = torch.randn(M, N, device="cuda", dtype=dtype)
            w = torch.randn(N, device="cuda", dtype=dtype)
            b = torch.randn(N, device="cuda", dtype=dtype)
            fns = {"copy": lambda: x.clone(),
                   "torch_layer_norm": lambda: F.layer_norm(x, (N,), w, b),
                   "torch_rms_norm": lambda: F.rms_norm(x, (N,), w)}
            for e in registry.RUNGS:
                if e.name not in SLOW:
                    fns[e.name] = (lambda e=e, run=e.launch_fn(): run(e.name, x, w, None if e.rms_norm else b))
            ms = gpu_time(fns, reps=30, rounds=3)
            if M * N <= 65536 * 768:
                ms.update(gpu_time({"naive": lambda: rungs.run("naive", x, w, b)}, reps=3, rounds=1))
            nbytes = 2 * M * N * x.element_size()
            for name, t in ms.items():
                rows.append({"dtype": dname, "M": M, "N": N, "kernel": name, "pass": "forward", "ms": t,
                             "gbps": nbytes / t / 1e6, "pct_copy": 100 * ms["copy"] / t})
            print(dname, M, N, {k: round(nbytes / v / 1e6) for k, v in ms.items()}, flush=True)
            xg, wg, bg = (t.detach().requires_grad_(True) for t in (x, w, b))
            dy = torch.randn_like(x)

            def train(f, params):
                return lambda: torch.autograd.grad(f(), params, dy)
            both = {"torch_layer_norm": train(lambda: F.layer_norm(xg, (N,), wg, bg), (xg, wg, bg)),
                    "torch_rms_norm": train(lambda: F.rms_norm(xg, (N,), wg), (xg, wg))}
            for e in registry.RUNGS:  # the rungs with a backward: Triton's, through autograd
                if e.cuda is None:
                    both[e.name] = (train(lambda: triton_rungs.rms_norm(xg, wg), (xg, wg)) if e.rms_norm
                                    else train(lambda: triton_rungs.layer_norm(xg, wg, bg), (xg, wg, bg)))
            ms2 = gpu_time(both, reps=20, rounds=3)
            nb2 = 5 * M * N * x.element_size()
            for name, t in ms2.items():
                rows.append({"dtype": dname, "M": M, "N": N, "kernel": name, "pass": "forward+backward", "ms": t,
                             "gbps": nb2 / t / 1e6})
            print("  fwd+bwd", {k: round(nb2 / v / 1e6) for k, v in ms2.items()}, flush=True)
    Path(out).write_text(json.dumps({**stamp(), "method": "median of CUDA-event times, launches pipelined "
                                     "behind a spin kernel, L2 not flushed", "rows": rows}, indent=0) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
