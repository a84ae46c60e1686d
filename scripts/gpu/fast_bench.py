"""Time reimpl.fast's forward beside torch's and a copy (x.clone()) in one run: median CUDA-event
time per call, launches pipelined behind a spin kernel, once with the L2 as the previous call left it
and once flushed before every call (reimpl.checks.bench.METHODS), weight and bias present. GB/s
counts one read of x and one write of y. Usage: python scripts/gpu/fast_bench.py OUT.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from reimpl import fast  # noqa: E402
from reimpl.checks.bench import FAST_SHAPES, METHODS, cells, gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402


def main(out: str) -> None:
    rows = []
    for method, dname, dtype, M, N in cells(FAST_SHAPES):
        x = torch.randn(M, N, device="cuda", dtype=dtype)
        w, b = torch.randn(N, device="cuda", dtype=dtype), torch.randn(N, device="cuda", dtype=dtype)
        with torch.no_grad():
            ms = gpu_time({"copy": lambda: x.clone(),
                           "torch_layer_norm": lambda: F.layer_norm(x, (N,), w, b),
                           "fast_layer_norm": lambda: fast.layer_norm(x, (N,), w, b),
                           "torch_rms_norm": lambda: F.rms_norm(x, (N,), w),
                           "fast_rms_norm": lambda: fast.rms_norm(x, (N,), w)}, reps=30, rounds=3,
                          flush_l2=method == "flushed")
        nbytes = 2 * M * N * x.element_size()
        for k, t in ms.items():
            rows.append({"method": method, "dtype": dname, "M": M, "N": N, "kernel": k, "ms": t,
                         "gbps": nbytes / t / 1e6, "pct_copy": 100 * ms["copy"] / t})
        print(method, dname, M, N,
              {k: f"{nbytes / v / 1e6:.0f} ({100 * ms['copy'] / v:.0f}%)" for k, v in ms.items()}, flush=True)
    Path(out).write_text(json.dumps({**stamp(), "methods": METHODS, "bytes": "GB/s counts one read of x and one "
                                     "write of y", "rows": rows}, indent=0) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
