"""reimpl.fast's page: its tables and charts, rendered at build time from the committed GPU results.

    {% fast_bandwidth DTYPE [METHOD] %}  reimpl.fast beside torch and a copy (results/fast_bench.json);
                                  METHOD pipelined (the default) or flushed, as reimpl.checks.bench.METHODS
    {% fast_chart DTYPE [METHOD] %}  the same as bars (matplotlib, inline SVG), the table under it in <details>
    {% fast_experiments %}        variants of the fast kernel that were tried and dropped (results/fast_experiments.json)
    {% fast_rows_sweep %}         two or four 1024-element rows a warp, over M (results/fast_rows_sweep.json)
    {% fast_grad_bandwidth DTYPE [METHOD] %}  reimpl.fast's dX beside torch's and a copy (results/fast_grad_bench.json)
    {% fast_grad_chart DTYPE [METHOD] %}  the same as bars
    {% fast_backward DTYPE [METHOD] %}  the whole backward (dX, dgamma, dbeta): reimpl.fast, torch and
                                  Liger-Kernel, % of copy per shape (results/fast_backward_bench.json)
    {% fast_backward_summary %}   its cells of at least 32 MB counted: against torch, against Liger, % of copy
    {% fast_grid DTYPE [METHOD] %}  the forward on the whole shared grid (results/fast_grid_bench.json):
                                  % of copy of torch, reimpl.fast and Liger-Kernel per cell of at least 32 MB
    {% fast_grid_summary %}       its cells counted per dtype and method: at 90% of copy or more, slower than torch
    {% fast_gain CHANGE %}        the cells a change moved, before and after it: `group` (rows of at most
                                  128 elements, the group kernel), `stream` (rows past 8192, the stream kernel)
                                  or `weights` (fp32 rows of 1028 to 2048, weights loaded early)
    {% ladder_ncu PASS %}         Nsight Compute on torch's kernel and reimpl.fast's (results/ncu_fast_PASS.json:
                                  forward, grad, or l2: dX and a copy with the L2 left warm), as two
                                  tables (time and instructions; memory) narrow enough not to clip

The table and chart renderers and the caption line every table opens with are the ladder's
(reimpl/docsite/ladder_tables.py), with this page's order.
"""
from __future__ import annotations

from pathlib import Path

from ..checks.grid import LARGE
from .ladder_tables import FLUSHED, ITEMSIZE, MISSING, PIPELINED, RESULTS, bench_chart, bench_table, caption, load

NCU = {p: RESULTS / f"ncu_fast_{p}.json" for p in ("forward", "grad", "l2")}
FAST = RESULTS / "fast_bench.json"
FAST_TRIED = RESULTS / "fast_experiments.json"
FAST_ROWS = RESULTS / "fast_rows_sweep.json"
FAST_GRAD = RESULTS / "fast_grad_bench.json"
FAST_BACKWARD = RESULTS / "fast_backward_bench.json"
FAST_GRID = RESULTS / "fast_grid_bench.json"
GOAL = 90.0  # % of copy the forward is held to on cells of at least LARGE bytes
# ours first, then torch's and the copy
ORDER = ("fast_layer_norm", "fast_rms_norm", "fast_layer_norm_dx", "fast_rms_norm_dx", "torch_layer_norm",
         "torch_rms_norm", "torch_layer_norm_dx", "torch_rms_norm_dx", "copy")
# the whole backward's chart: ours, torch's, the peer's, the copy
BACKWARD_ORDER = tuple(f"{who}_{op}_backward" for who in ("fast", "torch", "liger")
                       for op in ("layer_norm", "rms_norm")) + ("copy",)


def _method_name(arg: str) -> str:
    """The timing method of "DTYPE [METHOD]" in a reader's words: pipelined or L2 flushed."""
    return FLUSHED if arg.partition(" ")[2] == "flushed" else PIPELINED


def _method_words(arg: str, words: str) -> str:
    """The JSON's words for the method, led by "L2 flushed" where it is (the pipelined words say so)."""
    return f"{FLUSHED}: {words}" if _method_name(arg) == FLUSHED else words


def _what(path: Path, arg: str) -> str:
    """What a table or chart of `path` at "DTYPE [METHOD]" holds."""
    dtype = arg.partition(" ")[0]
    if path == FAST_BACKWARD:
        return f"whole backward (dX, dgamma, dbeta), {dtype}: reimpl.fast, torch and Liger-Kernel"
    return (f"backward dX, {dtype}: reimpl.fast and torch" if path == FAST_GRAD else
            f"forward, {dtype}: reimpl.fast and torch")


def _method_rows(d: dict, arg: str) -> tuple[list, str]:
    """The rows of one dtype and timing method ("fp32" or "fp32 flushed"), and the method's words."""
    dtype, _, method = arg.partition(" ")
    method = method or "pipelined"
    if method not in d["methods"]:
        raise ValueError(f"unknown timing method {method!r}: {sorted(d['methods'])}")
    return [r for r in d["rows"] if r["dtype"] == dtype and r["method"] == method], d["methods"][method]


# per record: the chart's file name, its y axis, and its kernels' order
CHARTS = {FAST: ("fast", "bandwidth (GB/s): x read + y written", ORDER),
          FAST_GRAD: ("fast-dx", "bandwidth (GB/s): x + dy read, dx written", ORDER),
          FAST_BACKWARD: ("fast-backward", "bandwidth (GB/s): the backward's copy-equivalent bytes", BACKWARD_ORDER)}


def fast_chart(arg: str, path: Path = FAST) -> str:
    """reimpl.fast beside torch's kernel per shape (results/fast_bench.json, the dX's
    results/fast_grad_bench.json, or the whole backward's results/fast_backward_bench.json with
    Liger-Kernel's), as bars. arg: "DTYPE [METHOD]"."""
    d = load(path)
    if d is None:
        return ""
    rows, words = _method_rows(d, arg)
    name, ylabel, order = CHARTS[path]
    dtype, _, method = arg.partition(" ")
    what, how = _what(path, arg), _method_name(arg)
    data = (caption(f"GB/s per kernel and shape, as plotted, {what}; {d['bytes']}", d, _method_words(arg, words))
            + bench_table(rows, order, pct=False))
    chart = bench_chart(rows, order, f"{name}-{dtype}" + (f"-{method}" if method else ""),
                        f"LayerNorm and RMSNorm {what}\n{how}, {d['device']}, {d['date']}", ylabel, data)
    return f'<div class="diagram-box">{chart}</div>'


def fast_grad_chart(arg: str) -> str:
    return fast_chart(arg, FAST_GRAD)


def fast_backward_chart(arg: str) -> str:
    return fast_chart(arg, FAST_BACKWARD)


def ncu(what: str) -> str:
    """Nsight Compute's numbers for one pass (forward, grad or l2), from results/ncu_fast_PASS.json,
    as two tables of one row per kernel and case, six columns each so that they fit the text column:
    time and instructions, then occupancy and memory. (One table of eleven columns ran past the column
    and read as clipped.)"""
    path = NCU[what]
    d = load(path)
    if d is None:
        return MISSING.format(cmd=f"PASS={what} OUT=dir bash scripts/gpu/ncu_fast.sh", file=path.name)
    method = f"`{d['command']}`: {d['what']}"
    time = [caption("Time and instructions per kernel and case: kernel time in µs, thread instructions "
                    "per element, % of issue slots busy, registers per thread", d, method),
            "| kernel | case | time (µs) | instructions / element | issue slots busy (%) | registers |",
            "|---|---|---:|---:|---:|---:|"]
    memory = [caption("Occupancy and memory per kernel and case: achieved occupancy in %, DRAM throughput in % "
                      "of peak, DRAM bytes read / written in MB, L2 hit rate in %", d, method),
              "| kernel | case | occupancy (%) | DRAM (% of peak) | DRAM read / written (MB) | L2 hit rate (%) |",
              "|---|---|---:|---:|---:|---:|"]
    for c in d["cases"]:
        case = f"| {c['kernel']} | {c['dtype']}, {c['M']}&nbsp;x&nbsp;{c['N']} "
        time.append(case + f"| {c['kernel_us']:.1f} | {c['thread_instructions_per_element']:.1f} "
                    f"| {c['issue_active_pct']:.1f} | {c['registers']} |")
        memory.append(case + f"| {c['achieved_occupancy_pct']:.0f} | {c['dram_throughput_pct_of_peak']:.1f} "
                      f"| {c['dram_read_bytes'] / 1e6:.1f}&nbsp;/&nbsp;{c['dram_write_bytes'] / 1e6:.1f} "
                      f"| {c['l2_hit_rate_pct']:.0f} |")
    return "\n".join(time) + "\n\n" + "\n".join(memory) + "\n"


def fast_bandwidth(arg: str, path: Path = FAST) -> str:
    """reimpl.fast's table per shape from results/fast_bench.json (or the dX's fast_grad_bench.json).
    arg: "DTYPE [METHOD]"."""
    d = load(path)
    if d is None:
        return MISSING.format(cmd=f"python scripts/gpu/{path.stem}.py results/{path.name}", file=path.name)
    rows, words = _method_rows(d, arg)
    return (caption(f"GB/s and % of copy, {_what(path, arg)}; {d['bytes']}", d, _method_words(arg, words))
            + bench_table(rows, ORDER, pct=True))


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
    full = [caption("Percent of `x.clone()`'s bandwidth in the same run, every measured cell", d, d["method"]),
            "| variant | shape | % of copy |", "|---|---|---:|"]
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
    return ("\n".join(lines) + "\n\n<details markdown=\"1\"><summary>Every measured cell, with the notes "
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
             "| dtype, M | rows per SM | LayerNorm, 2 rows a warp | LayerNorm, 4 | RMSNorm, 2 | RMSNorm, 4 |",
             "|---|---:|---:|---:|---:|---:|"]
    for dtype, M in keys:
        plan = cell[(dtype, M, "copy")]["plan_rows"]
        out = []
        for op in ("layer_norm", "rms_norm"):
            for rows in (2, 4):
                pct = f"{cell[(dtype, M, f'{op} rows={rows}')]['pct_copy']:.0f}%"
                out.append(f"**{pct}**" if rows == plan else pct)
        lines.append(f"| {dtype}, {M} | {M / d['sms']:.1f} | " + " | ".join(out) + " |")
    return "\n".join(lines) + "\n"


def backward_cells(d: dict, method: str = "pipelined") -> dict:
    """(op, dtype, M, N) -> {"torch" | "fast" | "liger": row} of the whole-backward record."""
    out: dict = {}
    for r in d["rows"]:
        if r["method"] != method or r["kernel"] == "copy":
            continue
        who, _, op = r["kernel"].removesuffix("_backward").partition("_")
        out.setdefault((op, r["dtype"], r["M"], r["N"]), {})[who] = r
    return out


def large(dtype: str, M: int, N: int) -> bool:
    """x alone is at least LARGE bytes (the whole-backward goals count cells by x's size)."""
    return M * N * (4 if dtype == "fp32" else 2) >= LARGE


def fast_backward(arg: str) -> str:
    """% of copy of the whole backward per shape, LayerNorm and RMSNorm side by side. arg: "DTYPE [METHOD]"."""
    d = load(FAST_BACKWARD)
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/fast_backward_bench.py results/fast_backward_bench.json",
                              file=FAST_BACKWARD.name)
    dtype, _, method = arg.partition(" ")
    method = method or "pipelined"
    cells = backward_cells(d, method)
    shapes = sorted({(M, N) for op, dt, M, N in cells if dt == dtype}, key=lambda s: s[0] * s[1])
    lines = [caption(f"% of copy, whole backward (dX, dgamma, dbeta), {dtype}: reimpl.fast (torch's bits), torch "
                     f"and Liger-Kernel {d['peers'].get('liger_kernel')} (other bits); {d['bytes']}; * marks cells "
                     f"under {LARGE >> 20} MB", d, _method_words(arg, d["methods"][method])),
             "| M×N | LayerNorm: torch / fast / Liger | RMSNorm: torch / fast / Liger |",
             "|---|--:|--:|"]
    for M, N in shapes:
        vals = []
        for op in ("layer_norm", "rms_norm"):
            c = cells[(op, dtype, M, N)]
            vals.append(" / ".join(f"{c[w]['pct_copy']:.0f}" if w in c else "-" for w in ("torch", "fast", "liger")))
        mark = "" if large(dtype, M, N) else " *"
        lines.append(f"| {M}×{N}{mark} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def backward_summary(d: dict) -> dict:
    """Per op, over both methods' cells of at least 32 MB: cells, fast no slower than torch, Liger
    faster than fast, and fast's % of copy range."""
    out = {}
    for op in ("layer_norm", "rms_norm"):
        big = [c for method in d["methods"] for (o, dt, M, N), c in backward_cells(d, method).items()
               if o == op and large(dt, M, N)]
        out[op] = {"cells": len(big), "no_slower_than_torch": sum(c["fast"]["ms"] <= c["torch"]["ms"] for c in big),
                   "liger_faster": sum("liger" in c and c["liger"]["ms"] < c["fast"]["ms"] for c in big),
                   "pct": (min(c["fast"]["pct_copy"] for c in big), max(c["fast"]["pct_copy"] for c in big))}
    return out


def fast_backward_summary() -> str:
    d = load(FAST_BACKWARD)
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/fast_backward_bench.py results/fast_backward_bench.json",
                              file=FAST_BACKWARD.name)
    names = {"layer_norm": "LayerNorm", "rms_norm": "RMSNorm"}
    parts = []
    for op, v in backward_summary(d).items():
        lo, hi = v["pct"]
        parts.append(f"{names[op]}: of {v['cells']} cells of at least {LARGE >> 20} MB (both methods), `reimpl.fast` "
                     f"is no slower than torch in {v['no_slower_than_torch']} and at {lo:.0f}-{hi:.0f}% of copy; "
                     f"Liger-Kernel is faster than it in {v['liger_faster']}.")
    faster = liger_faster_cells(d)
    where = "; ".join(f"{names[op]} {dtype} {M}×{N}" for op, dtype, M, N in faster)
    tail = f" Liger-Kernel's faster cells, by either method: {where}." if faster else ""
    return " ".join(parts) + tail + f" ({d['device']}, torch {d['torch']}, {d['date']}.)\n"


def liger_faster_cells(d: dict) -> list[tuple]:
    """(op, dtype, M, N) of the cells of at least 32 MB where Liger-Kernel's backward took less time
    than reimpl.fast's, by either method, in the page's order (op, dtype, then size)."""
    cells = {k for method in d["methods"] for k, c in backward_cells(d, method).items()
             if large(*k[1:]) and "liger" in c and c["liger"]["ms"] < c["fast"]["ms"]}
    dtypes = ("fp32", "bf16", "fp16")
    return sorted(cells, key=lambda k: (k[0], dtypes.index(k[1]), k[3], k[2]))


def grid_cells(d: dict, method: str) -> dict:
    """(dtype, part, M, N, large) -> {kernel: row} of the whole-grid forward record, for one method."""
    out: dict = {}
    for r in d["rows"]:
        if r["method"] == method:
            out.setdefault((r["dtype"], r["part"], r["M"], r["N"], r["large"]), {})[r["kernel"]] = r
    return out


def grid_summary(d: dict) -> list[dict]:
    """Per method, dtype and op: cells of at least 32 MB, those at GOAL% of copy or more, the lowest %
    and its cell; and cells of any size where fast is slower than torch."""
    out = []
    for method in d["methods"]:
        cells = grid_cells(d, method)
        for dtype in ("fp32", "bf16", "fp16"):
            for op in ("layer_norm", "rms_norm"):
                mine = {k: c for k, c in cells.items() if k[0] == dtype}
                big = [(k, c[f"fast_{op}"]["pct_copy"]) for k, c in mine.items() if k[4]]
                low_k, low = min(big, key=lambda kv: kv[1])
                out.append({"method": method, "dtype": dtype, "op": op, "large": len(big),
                            "at_goal": sum(p >= GOAL for _, p in big), "lowest": low, "lowest_at": low_k[2:4],
                            "slower_than_torch": sum(c[f"fast_{op}"]["ms"] > c[f"torch_{op}"]["ms"]
                                                     for c in mine.values()), "cells": len(mine)})
    return out


def _grid_missing() -> str:
    return MISSING.format(cmd="python scripts/gpu/fast_grid_bench.py results/fast_grid_bench.json",
                          file=FAST_GRID.name)


def fast_grid_summary() -> str:
    d = load(FAST_GRID)
    if d is None:
        return _grid_missing()
    names = {"layer_norm": "LayerNorm", "rms_norm": "RMSNorm"}
    lines = [caption(f"reimpl.fast's forward on the whole grid: of the cells of at least {LARGE >> 20} MB, how many "
                     f"reach {GOAL:.0f}% of copy and the lowest; of all cells, how many are slower than torch's "
                     f"kernel", d, "pipelined and L2 flushed, as reimpl.checks.bench.METHODS; the per-dtype "
                     "tables below are the pipelined run's"),
             f"| method, dtype | op | at {GOAL:.0f}% or more | lowest % (M×N) | slower than torch |",
             "|---|---|--:|--:|--:|"]
    for r in grid_summary(d):
        M, N = r["lowest_at"]
        lines.append(f"| {r['method']}, {r['dtype']} | {names[r['op']]} | {r['at_goal']} of {r['large']} "
                     f"| {r['lowest']:.0f} ({M}×{N}) | {r['slower_than_torch']} of {r['cells']} |")
    return "\n".join(lines) + "\n"


def fast_grid(arg: str) -> str:
    """% of copy per cell of at least 32 MB, torch / fast / Liger for LayerNorm and RMSNorm, a
    mark on fast's figure where it is under GOAL. arg: "DTYPE [METHOD]"."""
    d = load(FAST_GRID)
    if d is None:
        return _grid_missing()
    dtype, _, method = arg.partition(" ")
    method = method or "pipelined"
    cells = grid_cells(d, method)
    lines = [caption(f"% of copy, forward, {dtype}, the cells of at least {LARGE >> 20} MB of the shared grid: torch, "
                     f"reimpl.fast (torch's bits) and Liger-Kernel {d['peers'].get('liger_kernel')} (other bits); "
                     f"{d['bytes']}; fast's figure in bold, with a decimal, where it is under {GOAL:.0f}", d,
                     _method_words(arg, d["methods"][method])),
             "| part | M×N | LayerNorm: torch / fast / Liger | RMSNorm: torch / fast / Liger |", "|---|---|--:|--:|"]
    for (dt, part, M, N, big), c in sorted(cells.items(), key=lambda kv: (kv[0][3], kv[0][2])):
        if dt != dtype or not big:
            continue
        vals = []
        for op in ("layer_norm", "rms_norm"):
            fast = c[f"fast_{op}"]["pct_copy"]
            fast_s = f"**{fast:.1f}**" if fast < GOAL else f"{fast:.0f}"  # 89.6 would round to 90
            liger = c.get(f"liger_{op}")
            vals.append(f"{c[f'torch_{op}']['pct_copy']:.0f} / {fast_s} / "
                        + (f"{liger['pct_copy']:.0f}" if liger else "-"))
        lines.append(f"| {part} | {M}×{N} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


# earlier runs the whole-grid record keeps, for the cells a change moved: key, what that change was,
# and which of the earlier run's cells a table of it shows (dtype, M, N, itemsize)
EARLIER = {"group": ("before_group_kernel", "the group kernel", lambda dt, M, N, size: True),
           "stream": ("before_stream_kernel", "the stream kernel",
                      lambda dt, M, N, size: N > 8192 and 2 * M * N * size >= LARGE),
           "weights": ("before_stream_kernel", "fp32 rows of 1028 to 2048 elements loaded their weights early",
                       lambda dt, M, N, size: dt == "fp32" and 1024 < N <= 2048)}


def gain(d: dict, which: str) -> list[tuple]:
    """(method, dtype, M, N, op, % of copy before, after) for the cells of the change `which` (EARLIER:
    those of its earlier run that it shows)."""
    def pct(rows):
        return {(r["method"], r["dtype"], r["M"], r["N"], r["kernel"]): r["pct_copy"] for r in rows}
    key, _, shown = EARLIER[which]
    before, after = pct(d[key]["rows"]), pct(d["rows"])
    return [(*k[:4], k[4].removeprefix("fast_"), v, after[k]) for k, v in before.items()
            if k[4] != "copy" and k in after and shown(k[1], k[2], k[3], ITEMSIZE[k[1]])]


def fast_gain(which: str) -> str:
    """Pipelined % of copy before and after a change, on the cells EARLIER names for it (for the
    stream kernel, those of at least 32 MB with rows past 8192 elements, the rows it may take)."""
    d = load(FAST_GRID)
    if d is None or which not in EARLIER or EARLIER[which][0] not in d:
        return _grid_missing()
    key, change, _ = EARLIER[which]
    b = d[key]
    names = {"layer_norm": "LayerNorm", "rms_norm": "RMSNorm"}
    rows = [g for g in gain(d, which) if g[0] == "pipelined"]
    lines = [caption(f"% of copy of reimpl.fast's forward, pipelined: before {change} ({b['what']}) and with it",
                     d, d["methods"]["pipelined"]),
             "| dtype | M×N | LayerNorm before | now | RMSNorm before | now |", "|---|---|--:|--:|--:|--:|"]
    by_cell: dict = {}
    for _, dtype, M, N, op, was, now in rows:
        by_cell.setdefault((dtype, M, N), {})[op] = (was, now)
    for (dtype, M, N), ops in by_cell.items():
        vals = " | ".join(f"{ops[op][0]:.0f} | {ops[op][1]:.0f}" if op in ops else "- | -" for op in names)
        lines.append(f"| {dtype} | {M}×{N} | {vals} |")
    return "\n".join(lines) + "\n"
