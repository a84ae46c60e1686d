"""Time reimpl.fast's grad-input kernel (dX) beside torch's and a copy (x.clone()) in one run:
median CUDA-event time per call, launches pipelined behind a spin kernel, once with the L2 as the
previous call left it and once flushed before every call (reimpl.checks.bench.METHODS), weight
present, output_mask asking for dX only (so each side launches its grad-input kernel and nothing
else). GB/s counts reads of x and dy and the write of dx; a copy moves two arrays, so the percent
of copy bandwidth is 150 * t_copy / t. Usage: python scripts/gpu/fast_grad_bench.py OUT.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl import fast  # noqa: E402
from reimpl.checks.bench import FAST_SHAPES, METHODS, cells, gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402

aten = torch.ops.aten


def timings(x, dy, w, reps: int = 30, rounds: int = 3, flush_l2: bool = False) -> dict[str, float]:
    ns = [x.shape[-1]]
    _, mean, rstd = aten.native_layer_norm(x, ns, w, None, 1e-5)
    _, rrstd = aten._fused_rms_norm(x, ns, w, 1e-5)
    return gpu_time({
        "copy": lambda: x.clone(),
        "torch_layer_norm_dx": lambda: aten.native_layer_norm_backward(dy, x, ns, mean, rstd, w, None,
                                                                       [True, False, False]),
        "fast_layer_norm_dx": lambda: fast.native_layer_norm_backward(dy, x, ns, mean, rstd, w, None,
                                                                      (True, False, False)),
        "torch_rms_norm_dx": lambda: aten._fused_rms_norm_backward(dy, x, ns, rrstd, w, [True, False]),
        "fast_rms_norm_dx": lambda: fast.fused_rms_norm_backward(dy, x, ns, rrstd, w, (True, False)),
    }, reps=reps, rounds=rounds, flush_l2=flush_l2)


def main(out: str) -> None:
    rows = []
    for method, dname, dtype, M, N in cells(FAST_SHAPES):
        x = torch.randn(M, N, device="cuda", dtype=dtype)
        dy = torch.randn(M, N, device="cuda", dtype=dtype)
        w = torch.randn(N, device="cuda", dtype=dtype)
        with torch.no_grad():
            ms = timings(x, dy, w, flush_l2=method == "flushed")
        for k, t in ms.items():
            nbytes = (2 if k == "copy" else 3) * M * N * x.element_size()
            rows.append({"method": method, "dtype": dname, "M": M, "N": N, "kernel": k, "ms": t,
                         "gbps": nbytes / t / 1e6,
                         "pct_copy": 100 * (nbytes / t) / (2 * M * N * x.element_size() / ms["copy"])})
        print(method, dname, M, N,
              {r["kernel"]: f"{r['gbps']:.0f} ({r['pct_copy']:.0f}%)" for r in rows[-len(ms):]}, flush=True)
    Path(out).write_text(json.dumps({**stamp(), "methods": METHODS, "bytes": "GB/s counts x, dy and dx (copy: x "
                                     "and its clone)", "rows": rows}, indent=0) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
