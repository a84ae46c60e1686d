"""The shared-grid summaries of the ladder's top rungs, rendered at build time from
results/ladder_bench.json (scripts/gpu/ladder_bench.py over reimpl.checks.grid's cells), and
what the probes and the profiler say of them:

    {% ladder_grid %}       per dtype and method, the % of copy of row_held, rms_row_held, the Triton
                            rungs and the peers over the cells of at least 32 MB (lowest, highest, cells at their goal
                            or more) beside torch's kernels', and the cells of any size where the rung
                            is slower than torch's kernel
    {% ladder_grid_ncu %}   Nsight Compute on the top rungs and torch's kernels (results/ncu_ladder.json)
    {% triton_plan %}       the Triton forward's plan settings, each one's median % of copy over the
                            probe's cells (results/triton_probe.json)
    {% row_held_affine %}   row_held before and after its fused affine step, per dtype and method:
                            median % of copy over the large cells and the cells at 90 or more
                            (results/row_held_affine.json), and the registers of its block plans
                            before and after (results/row_held_resources.json)

Each row of the file carries its own run's copy time in pct_copy, so rows from several runs compare.
"""
from __future__ import annotations

from statistics import median

from ..checks import grid
from .ladder_tables import BENCH as GRID, ITEMSIZE, MISSING, RESULTS, caption, load, nowrap, rows_stamp

NCU = RESULTS / "ncu_ladder.json"
AFFINE = RESULTS / "row_held_affine.json"
RESOURCES = RESULTS / "row_held_resources.json"
TRITON_PROBE = RESULTS / "triton_probe.json"
TRITON_WIDE = RESULTS / "triton_wide_probe.json"
PAIRS = (("row_held", "torch_layer_norm"), ("rms_row_held", "torch_rms_norm"),
         ("triton_ln", "torch_layer_norm"), ("triton_rms", "torch_rms_norm"),
         ("liger_layer_norm", "torch_layer_norm"), ("liger_rms_norm", "torch_rms_norm"),
         ("quack_layer_norm", "torch_layer_norm"), ("quack_rms_norm", "torch_rms_norm"))
SLOWER_SHOWN = 4  # cells slower than torch named in the table; the rest are counted
# % of copy each rung is held to on cells of at least grid.LARGE bytes: 90 for the top CUDA rungs,
# 95 for the Triton ones; the peers (Liger-Kernel, quack) are counted against the CUDA rungs' 90
GOALS = {"row_held": 90, "rms_row_held": 90, "triton_ln": 95, "triton_rms": 95,
         "liger_layer_norm": 90, "liger_rms_norm": 90, "quack_layer_norm": 90, "quack_rms_norm": 90}


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
                            "large": len(big), "lo": min(big), "hi": max(big), "goal": GOALS[ours],
                            "at_goal": sum(p >= GOALS[ours] for p in big),
                            "torch_lo": min(tb), "torch_hi": max(tb), "slower": slower})
    return out


def table() -> str:
    d = load(GRID)
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/ladder_bench.py results/ladder_bench.json", file=GRID.name)
    run = rows_stamp(d, [r for r in d["rows"] if r["pass"] == "forward"])
    lines = [caption(f"% of copy, forward, over the shared grid's cells of at least {grid.LARGE >> 20} MB "
                     "(lowest–highest; cells at the rung's goal or more: 90% for the CUDA rungs, against which the "
                     "peers are counted too, 95% for the Triton rungs), and the cells of any size where the rung "
                     "takes longer than torch's kernel (F.layer_norm's beside the LayerNorm rungs, F.rms_norm's "
                     "beside the RMSNorm ones; the first four, and how many more)", run,
                     "pipelined, and L2 flushed before each call"),
             "| rung | dtype, method | % of copy | at its goal | torch's % of copy | slower than torch (M × N) |",
             "|---|---|---|---|---|---|"]
    for s in summary(d):
        slower = ", ".join(f"{M} × {N}" for M, N in s["slower"][:SLOWER_SHOWN]) or "none"
        if len(s["slower"]) > SLOWER_SHOWN:
            slower += f" and {len(s['slower']) - SLOWER_SHOWN} more"
        lines.append(f"| {_code(s['kernel'])} | {s['dtype']}, {s['method']} | {s['lo']:.0f}–{s['hi']:.0f} | "
                     f"{s['at_goal']} of {s['large']} at ≥ {s['goal']}% | {s['torch_lo']:.0f}–{s['torch_hi']:.0f} | "
                     f"{slower} |")
    return "\n".join(lines) + "\n"


def ncu_table() -> str:
    """Nsight Compute per dtype: for each profiled shape and call, the kernel's time, DRAM throughput,
    the memory system's and the SMs' busiest unit (% of peak), achieved occupancy, registers and the
    bound that follows (scripts/gpu/ncu_siblings.py's rule)."""
    d = load(NCU)
    if d is None:
        return MISSING.format(cmd="OUT=results bash scripts/gpu/ncu_siblings.sh ladder", file=NCU.name)
    out = []
    for dtype in dict.fromkeys(c["dtype"] for c in d["cases"]):
        lines = [caption(f"Nsight Compute, {dtype}: each call's kernel time (µs), DRAM throughput, the memory "
                         "system's busiest unit and the SMs' busiest pipe (% of peak), achieved occupancy (% of "
                         "the SM's warps), registers a thread, and the bound: memory or compute (SM), whichever "
                         "is busier, where it passes 60%, else latency", d, d["cache_control"]),
                 "| M x N | call | µs | DRAM / memory / SM % | occupancy % (registers) | bound |",
                 "|---|---|---:|---:|---:|---|"]
        for c in (c for c in d["cases"] if c["dtype"] == dtype):
            M, N = c["shape"]
            lines.append(f"| {M} x {N} | {_code(c['kernel'])} | {c['us']:.1f} | {c['dram_pct']:.0f} / "
                         f"{c['memory_sol_pct']:.0f} / {c['sm_sol_pct']:.0f} | {c['occupancy_pct']:.0f} "
                         f"({c['registers']}) | {c['bound']} |")
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)


def _code(name: str) -> str:
    return nowrap(f"`{name}`")


def triton_medians(d: dict) -> dict:
    """{setting: {kernel: median % of copy over the probe's cells}}."""
    out = {}
    for r in d["rows"]:
        out.setdefault(r["setting"], {}).setdefault(r["kernel"], []).append(r["pct_copy"])
    return {s: {k: median(v) for k, v in ks.items()} for s, ks in out.items()}


def triton_plan() -> str:
    """Each setting of (TILE_BYTES, THREAD_BYTES) the probe timed: the medians, the lowest cell, and
    which one triton_rungs uses."""
    from ..ladder import triton_rungs
    d = load(TRITON_PROBE)
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/triton_probe.py results/triton_probe.json", file=TRITON_PROBE.name)
    med = triton_medians(d)
    cells = {(r["dtype"], r["M"], r["N"]) for r in d["rows"]}
    lines = [caption(f"Median % of copy over the probe's {len(cells)} cells (bf16 and fp32, rows of 64 to 32768 "
                     "and few rows of wide ones), forward, for each setting of the plan's two numbers, "
                     "and the lowest cell's", d, d["method"]),
             "| tile bytes | bytes a thread | `triton_ln` median | `triton_rms` median | lowest cell (ln / rms) | in use |",
             "|---:|---:|---:|---:|---:|---|"]
    for name, (tile, thread) in d["settings"].items():
        low = {k: min(r["pct_copy"] for r in d["rows"] if r["setting"] == name and r["kernel"] == k)
               for k in ("triton_ln", "triton_rms")}
        used = "yes" if (tile, thread) == (triton_rungs.TILE_BYTES, triton_rungs.THREAD_BYTES) else ""
        lines.append(f"| {tile} | {thread} | {med[name]['triton_ln']:.1f} | {med[name]['triton_rms']:.1f} | "
                     f"{low['triton_ln']:.0f} / {low['triton_rms']:.0f} | {used} |")
    return "\n".join(lines) + "\n"


def triton_wide_rows(d: dict) -> list[dict]:
    """Per cell of the persistent-program probe: the rung's % of copy, the best persistent variant's
    and its setting (warps, programs an SM, num_stages, prefetch, weights once)."""
    out = []
    for r in d["rows"]:
        best = max((v, k) for k, v in r.items() if isinstance(v, float) and k not in ("copy_ms", "rung"))
        out.append({"dtype": r["dtype"], "M": r["M"], "N": r["N"], "rung": r["rung"], "best": best[0],
                    "setting": best[1]})
    return out


def triton_wide() -> str:
    """The persistent Triton LayerNorm forward against the rung on few rows of wide ones
    (scripts/gpu/triton_wide_probe.py)."""
    d = load(TRITON_WIDE)
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/triton_wide_probe.py results/triton_wide_probe.json",
                              file=TRITON_WIDE.name)
    lines = [caption("% of copy of `triton_ln`'s forward (one program a row) and of the best variant of a "
                     "persistent program (one or two an SM, each walking rows a grid apart) on each cell; the "
                     "variant's setting: warps, programs an SM, the loop's `num_stages`, whether the next row's "
                     f"load is issued before this row's arithmetic, whether weight and bias are loaded once; "
                     f"Triton {d['triton']}", d, d["method"]),
             "| dtype | M x N | `triton_ln` | persistent, best | its setting |", "|---|---|--:|--:|---|"]
    for r in triton_wide_rows(d):
        lines.append(f"| {r['dtype']} | {r['M']} x {r['N']} | {r['rung']:.1f} | {r['best']:.1f} | `{r['setting']}` |")
    return "\n".join(lines) + "\n"


def affine_summary(d: dict) -> list[dict]:
    """Per (dtype, method): row_held's large cells measured both before and after, the median % of
    copy of each and the cells at 90 or more of each."""
    by = {(r["setting"], r["method"], r["dtype"], r["M"], r["N"]): r["pct_copy"] for r in d["rows"]
          if r["kernel"] == "row_held"}
    out = []
    for dtype in ITEMSIZE:
        for method in d["methods"]:
            cells = [(M, N) for (st, m, dt, M, N) in by if st == "before" and m == method and dt == dtype
                     and ("after", m, dt, M, N) in by and grid.large(M, N, ITEMSIZE[dtype])]
            if not cells:
                continue
            before = [by[("before", method, dtype, *c)] for c in cells]
            after = [by[("after", method, dtype, *c)] for c in cells]
            out.append({"dtype": dtype, "method": method, "cells": len(cells), "before": median(before),
                        "after": median(after), "before_90": sum(v >= 90 for v in before),
                        "after_90": sum(v >= 90 for v in after)})
    return out


def affine_table() -> str:
    d = load(AFFINE)
    s = affine_summary(d) if d else []
    if not s:
        return MISSING.format(cmd="see results/row_held_affine.json's `command`", file=AFFINE.name)
    lines = [caption("`row_held` (LayerNorm) before and after its affine step became one fused multiply-add an "
                     "element: median % of copy over the cells of at least 32 MB, and the cells at 90% or more",
                     rows_stamp(d), "median CUDA-event times, each run against its own copy, "
                     "`scripts/gpu/ladder_bench.py` on each kernel file"),
             "| dtype | method | cells | before | after | cells ≥ 90, before → after |", "|---|---|---:|---:|---:|---:|"]
    for e in s:
        lines.append(f"| {e['dtype']} | {e['method']} | {e['cells']} | {e['before']:.1f} | {e['after']:.1f} "
                     f"| {e['before_90']} → {e['after_90']} |")
    regs = registers(load(RESOURCES))
    if regs:
        lines.append("\nRegisters a thread of `row_held`'s one-block plans (rows of 4096 to 16384; NVRTC for "
                     "sm_90, `cuobjdump -res-usage`, `scripts/row_held_resources.py`), before → after: "
                     + "; ".join(f"{dt} {b} → {a}" for dt, (b, a) in regs.items()) + ".")
    return "\n".join(lines) + "\n"


def registers(d: dict | None) -> dict:
    """dtype -> (registers before, after) of row_held's one-block plans (cluster 1) of rows of 4096 to
    16384, where every such instantiation of the dtype agrees; {} without the record."""
    if not d:
        return {}
    out = {}
    for dt in ("float32", "bfloat16", "float16"):
        rs = [r for r in d["rows"] if r["rung"] == "row_held" and r["dtype"] == dt and r["plan"][3] == 1
              and r["plan"][2] == 0 and 4096 <= r["N"] <= 16384]
        before = {r["registers"] for r in rs if r["kernel_file"] == "before"}
        after = {r["registers"] for r in rs if r["kernel_file"] == "now"}
        assert len(before) == len(after) == 1, (dt, before, after)
        out[dt] = (before.pop(), after.pop())
    return out
