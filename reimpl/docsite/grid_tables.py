"""The shared-grid summary of the ladder's top rung, rendered at build time from
results/ladder_grid_bench.json (scripts/gpu/ladder_bench.py over reimpl.checks.grid's cells):

    {% ladder_grid %}   per dtype and method, row_held's and rms_row_held's % of copy over the cells of
                        at least 32 MB (lowest, highest, cells at 90% or more) beside torch's kernels',
                        and the cells of any size where the rung is slower than torch's kernel

Each row of the file carries its own run's copy time in pct_copy, so rows from several runs compare.
"""
from __future__ import annotations

from pathlib import Path

from ..checks import grid
from .ladder_tables import MISSING, caption, load

GRID = Path(__file__).resolve().parents[2] / "results" / "ladder_grid_bench.json"
PAIRS = (("row_held", "torch_layer_norm"), ("rms_row_held", "torch_rms_norm"))
ITEMSIZE = {"fp32": 4, "bf16": 2, "fp16": 2}
GOAL = 90  # % of copy the top rung is held to on cells of at least grid.LARGE bytes


def summary(d: dict) -> list[dict]:
    """One entry per (kernel, dtype, method): the % of copy over the large cells, and the cells of
    any size slower than its torch counterpart."""
    rows = [r for r in d["rows"] if r["pass"] == "forward"]
    by = {(r["method"], r["dtype"], r["M"], r["N"], r["kernel"]): r for r in rows}
    out = []
    for ours, theirs in PAIRS:
        for dtype in ITEMSIZE:
            for method in d["methods"]:
                mine = [r for r in rows if r["kernel"] == ours and r["dtype"] == dtype and r["method"] == method]
                if not mine:
                    continue
                big = [r["pct_copy"] for r in mine if grid.large(r["M"], r["N"], ITEMSIZE[dtype])]
                tb = [by[(method, dtype, r["M"], r["N"], theirs)]["pct_copy"] for r in mine
                      if grid.large(r["M"], r["N"], ITEMSIZE[dtype])]
                slower = [(r["M"], r["N"]) for r in mine
                          if r["ms"] > by[(method, dtype, r["M"], r["N"], theirs)]["ms"]]
                out.append({"kernel": ours, "torch": theirs, "dtype": dtype, "method": method, "cells": len(mine),
                            "large": len(big), "lo": min(big), "hi": max(big), "at_goal": sum(p >= GOAL for p in big),
                            "torch_lo": min(tb), "torch_hi": max(tb), "slower": slower})
    return out


def table() -> str:
    d = load(GRID)
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/ladder_bench.py results/ladder_grid_bench.json", file=GRID.name)
    run = d["runs"][-1]
    lines = [caption(f"% of copy, forward, over the shared grid's cells of at least {grid.LARGE >> 20} MB "
                     f"(lowest–highest; cells at {GOAL}% or more), and the cells of any size where the rung "
                     "takes longer than torch's kernel (F.layer_norm's beside row_held, F.rms_norm's beside rms_row_held)",
                     run, "both of the repository's methods"),
             f"| rung | dtype | method | % of copy | at ≥ {GOAL}% | torch's kernel | slower than torch (M × N) |",
             "|---|---|---|---|---|---|---|"]
    for s in summary(d):
        slower = ", ".join(f"{M} × {N}" for M, N in s["slower"]) or "none"
        lines.append(f"| `{s['kernel']}` | {s['dtype']} | {s['method']} | {s['lo']:.0f}–{s['hi']:.0f} | "
                     f"{s['at_goal']} of {s['large']} | {s['torch_lo']:.0f}–{s['torch_hi']:.0f} | "
                     f"{slower} |")
    return "\n".join(lines) + "\n"
