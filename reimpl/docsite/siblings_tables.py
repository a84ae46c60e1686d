"""The sibling pages' tables, rendered at build time: from the committed GPU results
(results/siblings_errors.json, results/siblings_bench.json) with the stated bounds of
reimpl/ladder/accuracy.py, and from CPU computations that need no GPU (the axes example, the
merge-order demonstration).

    {% siblings_axes %}                  the 2 x 4 example: what LayerNorm, BatchNorm, softmax reduce
    {% merge_order %}                    one row's (mean, variance) bits along four merge trees
    {% softmax_errors KERNEL %}          distance to torch.softmax per family and dtype, its bound
    {% batchnorm_errors IMPL %}          distance to torch.nn.BatchNorm per dtype and mode, its bound
    {% siblings_bandwidth OP DTYPE %}    % of copy per cell, ours beside torch, the peers and x.clone()
    {% siblings_verdict OP %}            how ours stands over the big cells (siblings_bench_tables.py)
    {% siblings_stamp %}                 device, versions, date and method of the GPU runs
    {% softmax_waves %}                  one_read on rows of 262144 over a run of row counts (waves)
    {% softmax_shortfall %}              one_read's short cells beside cells that reach the copy, profiled

Each renderer takes the loaded results as an argument (tests pass small fixtures); a missing file
renders a "not measured yet" note.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..ladder import accuracy
from ..ladder.softmax import bound as softmax_bound
from . import siblings_bench_tables
from .ladder_tables import caption

RESULTS = Path(__file__).resolve().parents[2] / "results"
ERRORS = RESULTS / "siblings_errors.json"
BENCH = RESULTS / "siblings_bench.json"
NCU = RESULTS / "ncu_siblings.json"
WAVES = RESULTS / "softmax_waves.json"
SHORTFALL = RESULTS / "softmax_shortfall.json"
MISSING = "*Not measured yet: run `{cmd}` on a GPU and commit `results/{file}`.*\n"
ERRORS_CMD = "python scripts/gpu/siblings_errors.py results/siblings_errors.json"
BENCH_CMD = "python scripts/gpu/siblings_bench.py results/siblings_bench.json"


def load(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def stamp(errors: dict | None, bench: dict | None) -> str:
    parts = []
    for name, d in (("errors", errors), ("bandwidth", bench)):
        if d:
            method = f"; {d['method']}" if "method" in d else ""
            parts.append(f"{name}: {d['device']}, torch {d['torch']}, CUDA {d['cuda']}, {d['date']}{method}")
    return ("*" + ". ".join(parts) + ".*\n") if parts else ""


def softmax_errors(d: dict | None, kernel: str) -> str:
    if d is None:
        return MISSING.format(cmd=ERRORS_CMD, file=ERRORS.name)
    worst: dict = {}
    for r in d["softmax"]:
        if r["kernel"] != kernel:
            continue
        limit = softmax_bound(kernel, r["dtype"], r["N"])[0]
        w = worst.setdefault((r["family"], r["dtype"]), {"ratio": -1.0, "nan": True, "same": 1.0, "rel": 0.0,
                                                         "trel": 0.0})
        if r["max_ulp_to_torch"] / limit > w["ratio"]:
            w.update(ratio=r["max_ulp_to_torch"] / limit, ulp=r["max_ulp_to_torch"], limit=limit,
                     at=f"{r['M']}x{r['N']}")
        w["nan"] &= r["nan_positions_match"]
        w["same"] = min(w["same"], r["identical_to_torch"])
        w["rel"] = max(w["rel"], r["max_rel_err"])
        w["trel"] = max(w["trel"], r["torch_max_rel_err"])
    if not worst:
        raise ValueError(f"{kernel}: no softmax rows in {ERRORS.name}")
    lines = [caption(f"Worst distance of `{kernel}` to `torch.softmax` per input family and dtype over every shape "
                     "measured: ulps of torch's output, the bound stated at that shape (ulps), % of elements "
                     "bit-identical to torch, relative error against a float64 softmax (no unit)", d,
                     f"outputs against torch's and a float64 reference on the GPU, `{ERRORS_CMD}`"),
             "| family | dtype | max ulps from torch | at M x N | stated bound there | NaN where torch's "
             "| bit-identical (worst shape) | rel. error vs float64, ours | torch's |",
             "|---|---|---:|---|---:|---|---:|---:|---:|"]
    for (family, dtype), w in sorted(worst.items()):
        lines.append(f"| {family} | {dtype} | {w['ulp']:.3g} | {w['at']} | {w['limit']} | {'yes' if w['nan'] else '**no**'} "
                     f"| {100 * w['same']:.1f}% | {w['rel']:.3g} | {w['trel']:.3g} |")
    why = {softmax_bound(kernel, dt, 1)[1] for dt in accuracy.STORAGE_ULP}
    return "\n".join(lines) + "\n\nWhere the bounds come from:\n\n" + "\n".join(f"- {w}" for w in sorted(why)) + "\n"


def batchnorm_errors(d: dict | None, impl: str) -> str:
    if d is None:
        return MISSING.format(cmd=ERRORS_CMD, file=ERRORS.name)
    worst: dict = {}
    for r in d["batchnorm"]:
        if r["impl"] != impl:
            continue
        w = worst.setdefault((r["dtype"], r["param_dtype"], r["mode"]), {"y": (0.0, ""), "rm": 0.0, "rv": 0.0})
        if r["y_rel"] >= w["y"][0]:
            layout = " channels_last" if r.get("layout") == "channels_last" else ""
            w["y"] = (r["y_rel"], "x".join(map(str, r["shape"])) + f" {r['family']}{layout}")
        if r["mode"] == "train":
            w["rm"], w["rv"] = max(w["rm"], r["running_mean_rel"]), max(w["rv"], r["running_var_rel"])
    if not worst:
        raise ValueError(f"{impl}: no BatchNorm rows in {ERRORS.name}")
    lines = [caption(f"Worst error of `{impl}` against `torch.nn.BatchNorm` per dtype, parameter dtype and mode over "
                     "every shape measured: y and, in training, the running mean and variance, "
                     "abs(ours − torch's) / max(abs(torch's), 1) (no unit)", d,
                     f"outputs and running statistics against torch's on the GPU, `{ERRORS_CMD}`"),
             "| x | parameters | mode | worst error of y | at | bound | running mean | running var | bound |",
             "|---|---|---|---:|---|---:|---:|---:|---:|"]
    reasons = set()
    for (dtype, pdt, mode), w in sorted(worst.items()):
        yb, ywhy = accuracy.batchnorm_bound(dtype, "y")
        rb, rwhy = accuracy.batchnorm_bound(pdt, "running")
        reasons |= {ywhy, rwhy}
        run = f"{w['rm']:.3g} | {w['rv']:.3g} | {rb:.3g}" if mode == "train" else "— | — | —"
        lines.append(f"| {dtype} | {pdt} | {mode} | {w['y'][0]:.3g} | {w['y'][1]} | {yb:.3g} | {run} |")
    return ("\n".join(lines) + "\n\nWhere the bounds come from (relative to max(|torch's value|, 1)):\n\n"
            + "\n".join(f"- {r}" for r in sorted(reasons)) + "\n")


def axes() -> str:
    """The 2 x 4 example, computed now: what each operator reduces and what it broadcasts back."""
    x = np.array([[1, 2, 3, 4], [5, 6, 7, 10]], dtype=np.float64)
    fmt = lambda a: ", ".join(f"{v:.4g}" for v in a)  # noqa: E731
    e = np.exp(x - x.max(1, keepdims=True))
    rows = ["| operator | reduces over | statistics | one output row (row 0) |", "|---|---|---|---|",
            f"| LayerNorm | each row (the features, dim −1) | mean per row: {fmt(x.mean(1))}; variance: "
            f"{fmt(x.var(1))} | {fmt((x[0] - x[0].mean()) / np.sqrt(x[0].var()))} |",
            f"| BatchNorm | each column (the batch, dim 0) | mean per column: {fmt(x.mean(0))}; variance: "
            f"{fmt(x.var(0))} | {fmt((x[0] - x.mean(0)) / np.sqrt(x.var(0)))} |",
            f"| softmax | each row (dim −1) | max per row: {fmt(x.max(1))}; Σ exp(x − max): {fmt(e.sum(1))} "
            f"| {fmt(e[0] / e[0].sum())} |"]
    return ("x = \n\n| | col 0 | col 1 | col 2 | col 3 |\n|---|---:|---:|---:|---:|\n"
            + "".join(f"| row {i} | " + " | ".join(f"{v:g}" for v in r) + " |\n" for i, r in enumerate(x))
            + "\n" + "\n".join(rows) + "\n\n*Computed when the site is built (float64, eps = 0 for the example).*\n")


def merge_order(d: dict) -> str:
    """The merge-order demonstration (reimpl.emulator.merge_order.demo())."""
    t = d["trees"]
    lines = [f"The row (`numpy.random.default_rng({d['seed']}).standard_normal(16) + 10`, float32):\n",
             "`" + ", ".join(f"{v:.9g}" for v in d["row"]) + "`\n",
             "| how the 16 states are merged | mean (bits) | mean | variance (bits) | variance |",
             "|---|---|---:|---|---:|"]
    for k, r in t.items():
        same = " (= torch)" if k != "torch" and (r["mean"], r["var"]) == (t["torch"]["mean"], t["torch"]["var"]) else ""
        lines.append(f"| {r['what']}{same} | `{r['mean']}` | {r['mean_value']:.9g} | `{r['var']}` | {r['var_value']:.9g} |")
    ex = d["exact"]
    lines.append(f"| exact (rational arithmetic), rounded once to float32 | `{ex['mean']}` | {ex['mean_value']:.9g} "
                 f"| `{ex['var']}` | {ex['var_value']:.9g} |")
    return "\n".join(lines) + "\n\n*Computed by the CPU emulator when the site is built (`python scripts/merge_order_demo.py` prints the same).*\n"


def softmax_waves(d: dict | None) -> str:
    """Per dtype: the range of one_read's share of the copy over the row counts measured, and the
    largest drop from one row count to the next (a partial last wave would show as a saw-tooth)."""
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/softmax_waves.py results/softmax_waves.json",
                              file="softmax_waves.json")
    out = []
    for dtype in dict.fromkeys(r["dtype"] for r in d["rows"]):
        rs = [r for r in d["rows"] if r["dtype"] == dtype]
        pct = [r["pct_copy"] for r in rs]
        drop = max(0.0, max(a - b for a, b in zip(pct, pct[1:])))
        out.append(f"- {dtype}, {rs[0]['M']} to {rs[-1]['M']} rows of {rs[0]['N']} ({len(rs)} row counts): "
                   f"{min(pct):.1f} to {max(pct):.1f}% of the copy, {pct[0]:.1f}% at the fewest rows and "
                   f"{pct[-1]:.1f}% at the most; the largest drop from one row count to the next is "
                   f"{drop:.1f} points.")
    return "\n".join(out) + f"\n\n*{d['device']}, torch {d['torch']}, {d['date']}; pipelined, `x.clone()` in the same run.*\n"


def _cell(r: dict) -> str:
    return f"{r['dtype']} {siblings_bench_tables._shape((r['M'], r['N']))}"


def shortfall_pairs(d: dict) -> dict:
    """The two comparisons the page draws: 'cluster' -> (reference, [cells of a cluster of 16]),
    'odd' -> (reference, odd-width cell); the reference of the odd width is its row one shorter."""
    rows = d["rows"]
    refs = [r for r in rows if r["what"] == "reference"]
    ref32 = next(r for r in refs if r["ncu"]["cluster"] == 1)
    odd = next(r for r in rows if r["what"] == "odd width")
    ref_odd = next(r for r in refs if r["dtype"] == odd["dtype"] and r["N"] == odd["N"] - 1)
    return {"cluster": (ref32, [r for r in rows if r["what"] == "cluster of 16"]), "odd": (ref_odd, odd)}


def softmax_shortfall(d: dict | None) -> str:
    """Each profiled cell's share of the copy and what Nsight Compute counted in one call of it, then
    the two comparisons in figures: the cluster-of-16 cells against rows of 4096; the odd width
    against the row one element shorter, which takes the same plan."""
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/softmax_shortfall.py results/softmax_shortfall.json",
                              file="softmax_shortfall.json")
    lines = ["*Per cell: blocks a row x threads a block; % of the copy; then one profiled call: DRAM busy, % of "
             "its peak; instructions and branches executed, millions; registers a thread; threads an SM holds by "
             "its registers; achieved occupancy, %; clusters the device keeps resident.*", "",
             "| cell | plan | % of copy | DRAM % | instr. | branches | regs | threads an SM | occupancy | clusters |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in d["rows"]:
        n = r["ncu"]
        lines.append(f"| {_cell(r)} | {int(n['cluster'])}&nbsp;x&nbsp;{int(n['block'])} | {r['pct_copy']:.1f} "
                     f"| {n['dram_pct']:.1f} | {n['instructions'] / 1e6:.1f} | {n['branch_instructions'] / 1e6:.2f} "
                     f"| {int(n['registers'])} | {int(n['blocks_per_sm_by_registers'] * n['block'])} "
                     f"| {n['achieved_occupancy_pct']:.1f} | {int(n['max_active_clusters'])} |")
    pairs = shortfall_pairs(d)
    ref, wide = pairs["cluster"]
    out = ["\n".join(lines), ""]
    for r in wide:
        out.append(f"- {_cell(r)}, a cluster of {int(r['ncu']['cluster'])} a row: {r['pct_copy']:.1f}% of the copy, "
                   f"DRAM {r['ncu']['dram_pct']:.1f}% busy, achieved occupancy {r['ncu']['achieved_occupancy_pct']:.1f}%; "
                   f"{_cell(ref)}, a block a row: {ref['pct_copy']:.1f}%, {ref['ncu']['dram_pct']:.1f}%, "
                   f"{ref['ncu']['achieved_occupancy_pct']:.1f}%.")
    ref, odd = pairs["odd"]
    n, m = odd["ncu"], ref["ncu"]
    same = "the same occupancy" if abs(n["achieved_occupancy_pct"] - m["achieved_occupancy_pct"]) < 1 else "occupancy"
    out.append(f"- {_cell(odd)} against {_cell(ref)}, the same plan: {odd['pct_copy']:.1f}% of the copy against "
               f"{ref['pct_copy']:.1f}%, {n['instructions'] / m['instructions']:.2f} times the instructions and "
               f"{n['branch_instructions'] / m['branch_instructions']:.2f} times the branches, {same} "
               f"({n['achieved_occupancy_pct']:.1f}% and {m['achieved_occupancy_pct']:.1f}%).")
    return "\n".join(out) + (f"\n\n*{d['device']}, torch {d['torch']}, CUDA {d['cuda']}, {d['date']}. % of copy: "
                              f"{d['method']}. The rest: one call each under {d['profile']}.*\n")


def expand(kind: str, arg: str | None) -> str | None:
    """The directive's Markdown, or None when `kind` is not one of ours."""
    if kind == "siblings_axes" and not arg:
        return axes()
    if kind == "merge_order" and not arg:
        from ..emulator import merge_order as mo
        return merge_order(mo.demo())
    if kind == "softmax_errors" and arg:
        return softmax_errors(load(ERRORS), arg)
    if kind == "batchnorm_errors" and arg:
        return batchnorm_errors(load(ERRORS), arg)
    bench = siblings_bench_tables.expand(kind, arg, lambda: load(BENCH), lambda: load(NCU))
    if bench is not None:
        return bench
    if kind == "softmax_waves" and not arg:
        return softmax_waves(load(WAVES))
    if kind == "softmax_shortfall" and not arg:
        return softmax_shortfall(load(SHORTFALL))
    if kind == "siblings_stamp" and not arg:
        return stamp(load(ERRORS), load(BENCH))
    return None
