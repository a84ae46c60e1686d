"""reimpl.fast's forward on the whole shared shape grid (reimpl.checks.grid: tall, wide and model
cells, fp32, bf16 and fp16), beside torch's kernel, Liger-Kernel's (other bits, where its wheel is
unpacked: scripts/gpu/unpack_peers.sh) and a copy (x.clone()) in one run: median CUDA-event time per
call, launches pipelined behind a spin kernel, both timing methods (reimpl.checks.bench.METHODS),
weight (and bias) present. GB/s counts one read of x and one write of y; `large` marks the cells of
at least 32 MB, where the kernel is held to a share of the copy. The tuning cells are
scripts/gpu/fast_bench.py's five shapes; this grid is wider on purpose.
Writes OUT.json (rows: method, dtype, part, M, N, large, kernel, ms, gbps, pct_copy).
Usage (a CUDA machine): python scripts/gpu/fast_grid_bench.py OUT.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from reimpl import fast  # noqa: E402
from reimpl.checks import grid, peers  # noqa: E402
from reimpl.checks.bench import METHODS, gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402

EPS = 1e-5
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def fns(x, w, b) -> dict:
    N = x.shape[-1]
    out = {"copy": lambda: x.clone(),
           "torch_layer_norm": lambda: F.layer_norm(x, (N,), w, b, EPS),
           "fast_layer_norm": lambda: fast.layer_norm(x, (N,), w, b, EPS),
           "torch_rms_norm": lambda: F.rms_norm(x, (N,), w, EPS),
           "fast_rms_norm": lambda: fast.rms_norm(x, (N,), w, EPS)}
    liger_ln, liger_rms = peers.liger_layer_norm(), peers.liger_rms_norm()
    if liger_ln:
        out["liger_layer_norm"] = lambda: liger_ln(x, w, b, EPS)
    if liger_rms:
        out["liger_rms_norm"] = lambda: liger_rms(x, w, EPS)
    return out


def main(out: str) -> None:
    rows = []
    for method in METHODS:
        for dname, dtype in DTYPES.items():
            size = torch.tensor([], dtype=dtype).element_size()
            for part, M, N in grid.cells(size):
                x = torch.randn(M, N, device="cuda", dtype=dtype)
                w, b = torch.randn(N, device="cuda", dtype=dtype), torch.randn(N, device="cuda", dtype=dtype)
                with torch.no_grad():
                    ms = gpu_time(fns(x, w, b), reps=20, rounds=3, flush_l2=method == "flushed")
                nbytes = grid.traffic(M, N, size)
                for k, t in ms.items():
                    rows.append({"method": method, "dtype": dname, "part": part, "M": M, "N": N,
                                 "large": grid.large(M, N, size), "kernel": k, "ms": t, "gbps": nbytes / t / 1e6,
                                 "pct_copy": 100 * ms["copy"] / t})
                print(method, dname, part, M, N, {k: f"{100 * ms['copy'] / v:.0f}%" for k, v in ms.items()},
                      flush=True)
                del x, w, b
        Path(out).write_text(json.dumps({**stamp(), "peers": peers.versions(), "methods": METHODS,
                                         "bytes": "GB/s counts one read of x and one write of y",
                                         "grid": grid.__doc__.strip(), "rows": rows}, indent=0) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
