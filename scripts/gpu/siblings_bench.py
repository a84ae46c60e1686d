"""Time LayerNorm's siblings beside torch and a copy, with the ladder's method
(reimpl.checks.bench.gpu_time: median CUDA-event time per call, launches pipelined back to back
behind a spin kernel, ours, torch's and x.clone() interleaved by round; the L2 is not flushed).
Softmax: our three kernels beside torch.softmax. BatchNorm: our training-forward kernel beside
F.batch_norm(training=True) (running statistics updated by both). GB/s counts one read of x and one
write of y. Usage (a CUDA machine): python scripts/gpu/siblings_bench.py results/siblings_bench.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from reimpl.checks.bench import gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.ladder import registry, softmax  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
SOFTMAX_SHAPES = ((16384, 128), (4096, 1024), (65536, 768), (16384, 4096), (4096, 32768))
BN_SHAPES = ((32, 64, 112, 112), (64, 256, 28, 28), (128, 512, 7, 7), (8192, 1024))
METHOD = ("median of CUDA-event times (reimpl.checks.bench.gpu_time: 3 rounds x 30 calls, kernels "
          "interleaved by round), launches pipelined behind a spin kernel, L2 not flushed")


def _rows(op, dname, shape, ms, nbytes):
    return [{"op": op, "dtype": dname, "shape": list(shape), "kernel": k, "ms": t, "gbps": nbytes / t / 1e6,
             "pct_copy": 100 * ms["copy"] / t} for k, t in ms.items()]


def main(out: str) -> None:
    rows = []
    for dname, dtype in DTYPES.items():
        for M, N in SOFTMAX_SHAPES:
            x = torch.randn(M, N, device="cuda", dtype=dtype)
            fns = {"copy": lambda: x.clone(), "torch_softmax": lambda: torch.softmax(x, -1)}
            for e in registry.of_group("softmax"):
                fns[e.name] = (lambda e=e: softmax.run(e.name, x))
            ms = gpu_time(fns, reps=30, rounds=3)
            rows += _rows("softmax", dname, (M, N), ms, 2 * x.numel() * x.element_size())
            print("softmax", dname, M, N, {k: round(v * 1e3, 1) for k, v in ms.items()}, "us", flush=True)
        for shape in BN_SHAPES:
            C = shape[1]
            x = torch.randn(shape, device="cuda", dtype=dtype)
            w, b = torch.randn(C, device="cuda", dtype=dtype), torch.randn(C, device="cuda", dtype=dtype)
            rm, rv = torch.zeros(C, device="cuda", dtype=dtype), torch.ones(C, device="cuda", dtype=dtype)
            rm2, rv2 = rm.clone(), rv.clone()
            fns = {"copy": lambda: x.clone(),
                   "torch_batch_norm": lambda: F.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5)}
            for e in registry.of_group("batchnorm"):
                fns[e.name] = (lambda run=e.launch_fn(): run(x, w, b, rm2, rv2, 0.1, 1e-5))
            ms = gpu_time(fns, reps=30, rounds=3)
            rows += _rows("batchnorm", dname, shape, ms, 2 * x.numel() * x.element_size())
            print("batchnorm", dname, shape, {k: round(v * 1e3, 1) for k, v in ms.items()}, "us", flush=True)
    Path(out).write_text(json.dumps({**stamp(), "method": METHOD, "rows": rows}, indent=0) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
