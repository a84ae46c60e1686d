"""Time the Triton forward rungs (triton_ln, triton_rms) under each setting of fwd_plan's two numbers
(reimpl/ladder/triton_rungs.py: TILE_BYTES, the least bytes of x a program's tile covers; THREAD_BYTES,
the bytes of the tile each thread holds) beside a copy, on cells of the shared grid (reimpl.checks.grid)
from 64-wide rows to few rows of 16384. Median CUDA-event times, pipelined (reimpl.checks.bench.METHODS).
Usage (a CUDA machine): python scripts/gpu/triton_probe.py OUT.json [method=pipelined]"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl.checks import grid  # noqa: E402
from reimpl.checks.bench import METHODS, gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.ladder import triton_rungs  # noqa: E402

SETTINGS = {f"tile{t}_thread{b}": (t, b) for t in (2048, 4096, 8192) for b in (32, 64, 128, 256)}
CELLS = {"bf16": [(grid.tall_rows(N, 2), N) for N in (64, 128, 256, 512, 1024, 2048, 4096, 5120, 6144, 8192, 12288,
                                                            16384, 32768)]
         + [(1024, 12288), (2048, 16384), (256, 8192)],
         "fp32": [(grid.tall_rows(N, 4), N) for N in (64, 256, 1024, 4096, 12288, 16384)] + [(1024, 16384)]}
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def main(out, method="pipelined"):
    import triton
    rows = []
    for dname, cells in CELLS.items():
        dtype = DTYPES[dname]
        for M, N in cells:
            x = torch.randn(M, N, device="cuda", dtype=dtype)
            w, b = torch.randn(N, device="cuda", dtype=dtype), torch.randn(N, device="cuda", dtype=dtype)
            fns = {"copy": lambda: x.clone()}
            for name, (tile, thread) in SETTINGS.items():
                triton_rungs.TILE_BYTES, triton_rungs.THREAD_BYTES = tile, thread
                plan = triton_rungs.fwd_plan(N, x.element_size())
                # settings that give the same plan launch the same compiled kernel: time each plan once
                fns[f"triton_ln:{plan}"] = lambda p=plan: _run(p, x, w, b, False)
                fns[f"triton_rms:{plan}"] = lambda p=plan: _run(p, x, w, None, True)
            ms = gpu_time(fns, reps=20, rounds=3, flush_l2=method == "flushed")
            for name, (tile, thread) in SETTINGS.items():
                triton_rungs.TILE_BYTES, triton_rungs.THREAD_BYTES = tile, thread
                plan = triton_rungs.fwd_plan(N, x.element_size())
                for k in ("triton_ln", "triton_rms"):
                    t = ms[f"{k}:{plan}"]
                    rows.append({"setting": name, "dtype": dname, "M": M, "N": N, "kernel": k, "plan": list(plan),
                                 "ms": t, "pct_copy": 100 * ms["copy"] / t})
            best = {k: max((r for r in rows if r["kernel"] == k and r["M"] == M and r["N"] == N and r["dtype"] == dname),
                           key=lambda r: r["pct_copy"]) for k in ("triton_ln", "triton_rms")}
            print(dname, M, N, {k: (round(r["pct_copy"]), r["plan"]) for k, r in best.items()}, flush=True)
            Path(out).write_text(json.dumps({**stamp(), "method": METHODS[method], "triton": triton.__version__,
                                             "settings": SETTINGS, "rows": rows}, indent=0) + "\n")


def _run(plan, x, w, b, rms):
    saved = triton_rungs.fwd_plan
    triton_rungs.fwd_plan = lambda N, itemsize: plan
    try:
        return triton_rungs.forward(x, w, b, 1e-5, rms)
    finally:
        triton_rungs.fwd_plan = saved


if __name__ == "__main__":
    main(*sys.argv[1:])
