"""reimpl.fast's page: its tables and charts, rendered at build time from the committed GPU results.

    {% fast_bandwidth DTYPE [METHOD] %}  reimpl.fast beside torch and a copy (results/fast_bench.json);
                                  METHOD pipelined (the default) or flushed, as reimpl.checks.bench.METHODS
    {% fast_chart DTYPE [METHOD] %}  the same as bars
    {% fast_experiments %}        variants of the fast kernel that were tried and dropped (results/fast_experiments.json)
    {% fast_rows_sweep %}         two or four 1024-element rows a warp, over M (results/fast_rows_sweep.json)
    {% fast_grad_bandwidth DTYPE [METHOD] %}  reimpl.fast's dX beside torch's and a copy (results/fast_grad_bench.json)
    {% fast_grad_chart DTYPE [METHOD] %}  the same as bars
    {% ladder_ncu PASS %}         Nsight Compute on torch's kernel and reimpl.fast's (results/ncu_fast_PASS.json:
                                  forward, grad, or l2: dX and a copy with the L2 left warm)

The table and bar renderers are the ladder's (reimpl/docsite/ladder_tables.py), with this page's order.
"""
from __future__ import annotations

from pathlib import Path

from .ladder_tables import MISSING, RESULTS, bench_bars, bench_table, load

NCU = {p: RESULTS / f"ncu_fast_{p}.json" for p in ("forward", "grad", "l2")}
FAST = RESULTS / "fast_bench.json"
FAST_TRIED = RESULTS / "fast_experiments.json"
FAST_ROWS = RESULTS / "fast_rows_sweep.json"
FAST_GRAD = RESULTS / "fast_grad_bench.json"
# ours first, then torch's and the copy
ORDER = ("fast_layer_norm", "fast_rms_norm", "fast_layer_norm_dx", "fast_rms_norm_dx", "torch_layer_norm",
         "torch_rms_norm", "torch_layer_norm_dx", "torch_rms_norm_dx", "copy")


def _method_rows(d: dict, arg: str) -> tuple[list, str]:
    """The rows of one dtype and timing method ("fp32" or "fp32 flushed"), and the method's words."""
    dtype, _, method = arg.partition(" ")
    method = method or "pipelined"
    if method not in d["methods"]:
        raise ValueError(f"unknown timing method {method!r}: {sorted(d['methods'])}")
    return [r for r in d["rows"] if r["dtype"] == dtype and r["method"] == method], d["methods"][method]


def fast_chart(arg: str, path: Path = FAST) -> str:
    """reimpl.fast beside torch's kernel per shape (results/fast_bench.json, or the dX's
    results/fast_grad_bench.json), as bars. arg: "DTYPE [METHOD]"."""
    d = load(path)
    if d is None:
        return ""
    rows, _ = _method_rows(d, arg)
    name, what = ("fast-dx", "dX GB/s (x, dy, dx)") if path == FAST_GRAD else ("fast", "GB/s")
    dtype, _, method = arg.partition(" ")
    return bench_bars(rows, ORDER, f"{name}-{dtype}" + (f"-{method}" if method else ""),
                 f"{what}, reimpl.fast and torch, {dtype}" + (f", L2 {method}" if method else ""))


def fast_grad_chart(arg: str) -> str:
    return fast_chart(arg, FAST_GRAD)


def ncu(what: str) -> str:
    """Nsight Compute's numbers for one pass (forward, grad or l2), from results/ncu_fast_PASS.json."""
    path = NCU[what]
    d = load(path)
    if d is None:
        return MISSING.format(cmd=f"PASS={what} OUT=dir bash scripts/gpu/ncu_fast.sh", file=path.name)
    lines = [f"*{d['device']}, torch {d['torch']}, {d['date']}; `{d['command']}`. {d['what']}.*\n",
             "| kernel | dtype | M x N | kernel time | thread instructions per element | issue slots busy "
             "| DRAM throughput (% of peak) | DRAM read / written (MB) | L2 hit rate | registers "
             "| achieved occupancy |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in d["cases"]:
        lines.append(f"| {c['kernel']} | {c['dtype']} | {c['M']} x {c['N']} | {c['kernel_us']:.1f} µs "
                     f"| {c['thread_instructions_per_element']:.1f} | {c['issue_active_pct']:.1f}% "
                     f"| {c['dram_throughput_pct_of_peak']:.1f}% "
                     f"| {c['dram_read_bytes'] / 1e6:.1f} / {c['dram_write_bytes'] / 1e6:.1f} "
                     f"| {c['l2_hit_rate_pct']:.0f}% | {c['registers']} | {c['achieved_occupancy_pct']:.0f}% |")
    return "\n".join(lines) + "\n"


def fast_bandwidth(arg: str, path: Path = FAST) -> str:
    """reimpl.fast's table per shape from results/fast_bench.json (or the dX's fast_grad_bench.json).
    arg: "DTYPE [METHOD]"."""
    d = load(path)
    if d is None:
        return MISSING.format(cmd=f"python scripts/gpu/{path.stem}.py results/{path.name}", file=path.name)
    rows, method = _method_rows(d, arg)
    return f"*{d['device']}, torch {d['torch']}, {d['date']}; {method}; {d['bytes']}.*\n\n" + bench_table(rows, ORDER, pct=True)


def fast_grad_bandwidth(arg: str) -> str:
    return fast_bandwidth(arg, FAST_GRAD)


def _pct_range(v: dict, keys: tuple[str, ...]) -> str:
    """The range of % of copy over a variant's cells under `keys`, and how many cells."""
    cells, n = [], 0
    for key in keys:
        for pct in v.get(key, {}).values():   # a number, or a "lo-hi" range over a sweep
            cells += [float(p) for p in str(pct).split("-")]
            n += 1
    if not cells:
        return "-"
    lo, hi = (f"{c:g}" for c in (min(cells), max(cells)))
    return (f"{lo}%" if lo == hi else f"{lo}-{hi}%") + f" ({n})"


def fast_experiments() -> str:
    """What was tried: one summary row per variant (kept or not, its range of % of copy), and the
    full table of measured cells one click away."""
    d = load(FAST_TRIED)
    if d is None:
        return MISSING.format(cmd="the runs described on this page", file=FAST_TRIED.name)
    lines = [f"*{d['device']}, torch {d['torch']}, {d['date']}; {d['method']}. Percent of `x.clone()`'s "
             "bandwidth in the same run; LayerNorm with weight and bias unless the variant says RMSNorm or dX.*\n",
             "| what was tried | % of copy (cells) | the kernel kept at the time, same run |", "|---|---|---|"]
    for v in d["variants"]:
        lines.append(f"| {v['name']} | {_pct_range(v, ('pct_copy', 'pct_copy_ln'))} | "
                     f"{_pct_range(v, ('kept', 'pct_copy_ln_registers', 'against_3_blocks'))} |")
    full = ["| variant | shape | % of copy |", "|---|---|---:|"]
    for v in d["variants"]:
        for key in ("pct_copy", "pct_copy_ln", "pct_copy_ln_registers", "against_3_blocks", "kept"):
            label = {"pct_copy": v["name"], "pct_copy_ln": v["name"],
                     "pct_copy_ln_registers": "the same rows held in registers (kept)",
                     "against_3_blocks": "the same at 3 blocks per SM (kept)",
                     "kept": "the kernel kept at the time, same run"}[key]
            for shape, pct in v.get(key, {}).items():
                full.append(f"| {label} | {shape} | {pct}% |")
        if "note" in v:
            full.append(f"| ↳ note | | {v['note']} |")
    return ("\n".join(lines) + "\n\n<details><summary>Every measured cell, with the notes "
            f"(<code>results/{FAST_TRIED.name}</code>)</summary>\n\n" + "\n".join(full) + "\n\n</details>\n")


def fast_rows_sweep() -> str:
    """Per dtype and M: % of copy with two and with four rows a warp, and what the plan picks."""
    d = load(FAST_ROWS)
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/fast_rows_sweep.py results/fast_rows_sweep.json",
                              file=FAST_ROWS.name)
    cell = {(r["dtype"], r["M"], r["kernel"]): r for r in d["rows"]}
    keys = sorted({(r["dtype"], r["M"]) for r in d["rows"]}, key=lambda k: (k[0] != "bf16", k[1]))
    lines = [f"*{d['device']} ({d['sms']} SMs), torch {d['torch']}, {d['date']}; {d['method']}. "
             f"N = 1024, weight and bias; % of copy in the same run. Bold: the plan's choice.*\n",
             "| dtype | M | rows per SM | LayerNorm, 2 rows a warp | LayerNorm, 4 | RMSNorm, 2 | RMSNorm, 4 |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for dtype, M in keys:
        plan = cell[(dtype, M, "copy")]["plan_rows"]
        out = []
        for op in ("layer_norm", "rms_norm"):
            for rows in (2, 4):
                pct = f"{cell[(dtype, M, f'{op} rows={rows}')]['pct_copy']:.0f}%"
                out.append(f"**{pct}**" if rows == plan else pct)
        lines.append(f"| {dtype} | {M} | {M / d['sms']:.1f} | " + " | ".join(out) + " |")
    return "\n".join(lines) + "\n"
