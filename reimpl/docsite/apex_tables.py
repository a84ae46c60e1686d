"""The apex rung beside apex's own fused LayerNorm, built from apex's sources as apex builds it
(scripts/gpu/build_apex_layer_norm.py) and timed in one run with torch's kernel and a copy
(scripts/gpu/ladder_bench.py into a file of its own, kernel `apex_layer_norm`), rendered at build
time from results/apex_real.json:

    {% apex_real %}   per dtype and method: the cells where both ran, the rung's speed as a share of
                      apex's (median and lowest), apex's speed against torch's (median) and the cells
                      where apex's, or the rung, is at least as fast as torch's

Speed is the inverse of the median time; each ratio compares two kernels of one cell and one run.
"""
from __future__ import annotations

from statistics import median

from .ladder_tables import ITEMSIZE, MISSING, RESULTS, caption, load, rows_stamp

APEX_REAL = RESULTS / "apex_real.json"
RUNG, REAL, TORCH = "apex", "apex_layer_norm", "torch_layer_norm"
_CMD = ("python scripts/gpu/build_apex_layer_norm.py DEST, then REIMPL_APEX_DIR=DEST LADDER_KERNELS=apex,apex_layer_norm "
        "python scripts/gpu/ladder_bench.py results/apex_real.json fp32,bf16,fp16 tall,wide,model forward")


def cells(d: dict) -> list[dict]:
    """Every (method, dtype, cell) where the rung, apex's build and torch ran in one run: their times."""
    by: dict = {}
    for r in d["rows"]:
        if r["pass"] == "forward" and r["kernel"] in (RUNG, REAL, TORCH):
            by.setdefault((r["method"], r["dtype"], r["M"], r["N"], r["run"]), {})[r["kernel"]] = r
    return [{"method": k[0], "dtype": k[1], "M": k[2], "N": k[3], "rows": v,
             **{name: v[name]["ms"] for name in (RUNG, REAL, TORCH)}}
            for k, v in sorted(by.items()) if len(v) == 3]


def summary(d: dict) -> list[dict]:
    """Per (dtype, method): cells, the rung's speed over apex's (median, lowest), apex's speed over
    torch's (median), the cells where apex's and where the rung's is at least torch's."""
    out = []
    all_cells = cells(d)
    for dtype in ITEMSIZE:
        for method in d["methods"]:
            cs = [c for c in all_cells if c["dtype"] == dtype and c["method"] == method]
            if not cs:
                continue
            share = [c[REAL] / c[RUNG] for c in cs]
            out.append({"dtype": dtype, "method": method, "cells": len(cs),
                        "rung_vs_real": median(share), "rung_vs_real_low": min(share),
                        "real_vs_torch": median(c[TORCH] / c[REAL] for c in cs),
                        "real_wins": sum(c[REAL] <= c[TORCH] for c in cs),
                        "rung_wins": sum(c[RUNG] <= c[TORCH] for c in cs)})
    return out


def table() -> str:
    d = load(APEX_REAL)
    s = summary(d) if d else []
    if not s:
        return MISSING.format(cmd=_CMD, file=APEX_REAL.name)
    rows = [r for c in cells(d) for r in c["rows"].values()]
    lines = [caption("The `apex` rung beside apex's own fused LayerNorm (`apex_layer_norm`, built from apex "
                     f"{d['runs'][max(r['run'] for r in rows)]['peers'].get('apex', '?')[:8]} with apex's flags) and "
                     "torch's, every cell of the shared grid where all three ran in one run: speed ratios "
                     "(no unit; above 1 the first named is faster), medians over the cells", rows_stamp(d, rows), "median CUDA-event times, "
                     "`scripts/gpu/ladder_bench.py`"),
             "| dtype | method | cells | rung / apex (lowest) | apex / torch | apex ≥ torch | rung ≥ torch |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for e in s:
        lines.append(f"| {e['dtype']} | {e['method']} | {e['cells']} | {e['rung_vs_real']:.2f} "
                     f"({e['rung_vs_real_low']:.2f}) | {e['real_vs_torch']:.2f} | {e['real_wins']} | {e['rung_wins']} |")
    return "\n".join(lines) + "\n"
