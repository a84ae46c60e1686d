"""The ladder pages' tables and charts, rendered at build time from the committed GPU results
(results/ladder_errors.json, results/ladder_bench.json) and the stated bounds (reimpl/ladder/accuracy.py).

    {% ladder_errors RUNG %}      worst error per input family and dtype, its bound, distance to torch
    {% ladder_bandwidth DTYPE %}  GB/s and % of copy of every rung, torch and the copy, forward
    {% ladder_training DTYPE %}   forward+backward GB/s of the Triton rungs and torch
    {% ladder_chart DTYPE %}      the forward table as an inline SVG bar chart (no JavaScript, no CDN)
    {% ladder_stamp %}            device, versions, date and method of the runs
    {% ladder_ncu PASS %}         Nsight Compute on torch's kernel and reimpl.fast's (results/ncu_fast_PASS.json:
                                  forward, grad, or l2: dX and a copy with the L2 left warm)
    {% fast_bandwidth DTYPE [METHOD] %}  reimpl.fast beside torch and a copy (results/fast_bench.json);
                                  METHOD pipelined (the default) or flushed, as reimpl.checks.bench.METHODS
    {% fast_chart DTYPE [METHOD] %}  the same as bars
    {% fast_experiments %}        variants of the fast kernel that were tried and dropped (results/fast_experiments.json)
    {% fast_rows_sweep %}         two or four 1024-element rows a warp, over M (results/fast_rows_sweep.json)
    {% fast_grad_bandwidth DTYPE [METHOD] %}  reimpl.fast's dX beside torch's and a copy (results/fast_grad_bench.json)
    {% fast_grad_chart DTYPE [METHOD] %}  the same as bars
"""
from __future__ import annotations

import json
from html import escape
from pathlib import Path

from ..ladder import accuracy

RESULTS = Path(__file__).resolve().parents[2] / "results"
ERRORS = RESULTS / "ladder_errors.json"
BENCH = RESULTS / "ladder_bench.json"
NCU = {p: RESULTS / f"ncu_fast_{p}.json" for p in ("forward", "grad", "l2")}
FAST = RESULTS / "fast_bench.json"
FAST_TRIED = RESULTS / "fast_experiments.json"
FAST_ROWS = RESULTS / "fast_rows_sweep.json"
FAST_GRAD = RESULTS / "fast_grad_bench.json"
# the order a reader climbs: torch and the copy are the yardsticks at the end
ORDER = ("fast_layer_norm", "fast_rms_norm", "fast_layer_norm_dx", "fast_rms_norm_dx", "naive", "warp_sums", "warp_welford", "block_welford", "block_cached", "block_vec", "apex",
         "triton_ln", "rms_warp_sumsq", "triton_rms", "torch_layer_norm", "torch_rms_norm", "torch_layer_norm_dx",
         "torch_rms_norm_dx", "copy")
MISSING = "*Not measured yet: run `{cmd}` on a GPU and commit `{file}`.*\n"


def _load(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def stamp() -> str:
    parts = []
    for name, path in (("errors", ERRORS), ("bandwidth", BENCH)):
        d = _load(path)
        if d:
            method = f"; {d['method']}" if "method" in d else ""
            parts.append(f"{name}: {d['device']}, torch {d['torch']}, CUDA {d['cuda']}, {d['date']}{method}")
    return ("*" + ". ".join(parts) + ".*\n") if parts else ""


def errors(rung: str) -> str:
    d = _load(ERRORS)
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/ladder_errors.py results/ladder_errors.json", file=ERRORS.name)
    worst: dict = {}
    for r in d["rows"]:
        if r["rung"] != rung:
            continue
        k = (r["family"], r["dtype"])
        w = worst.setdefault(k, {"rel": 0.0, "ulp": 0.0, "same": 1.0, "at": ""})
        if r["rel_err"] >= w["rel"]:
            w["rel"], w["at"] = r["rel_err"], f"{r['M']}x{r['N']}"
        w["ulp"] = max(w["ulp"], r["max_ulp_to_torch"])
        w["same"] = min(w["same"], r["identical_to_torch"])
    if not worst:
        raise ValueError(f"{rung}: no rows in {ERRORS.name}")
    lines = ["| family | dtype | worst error (rel.) | at M x N | stated bound | max ulps from torch "
             "| bit-identical to torch (worst shape) |", "|---|---|---|---|---|---:|---:|"]
    reasons: dict[str, list[str]] = {}
    for (family, dtype), w in sorted(worst.items()):
        limit, why = accuracy.bound(rung, dtype, family)
        lim = "none" if limit == float("inf") else f"{limit:.3g}"
        reasons.setdefault(why, []).append(f"{family}/{dtype}")
        lines.append(f"| {family} | {dtype} | {w['rel']:.3g} | {w['at']} | {lim} | {w['ulp']:.3g} "
                     f"| {100 * w['same']:.1f}% |")
    lines.append("\nWhere the bounds come from:\n")
    lines += [f"- {why} ({', '.join(cases)})" for why, cases in reasons.items()]
    return "\n".join(lines) + "\n"


def _bench_rows(dtype: str, pass_: str):
    d = _load(BENCH)
    if d is None:
        return None
    return [r for r in d["rows"] if r["dtype"] == dtype and r.get("pass", "forward") == pass_]


def _table(rows, pct: bool) -> str:
    shapes = sorted({(r["M"], r["N"]) for r in rows}, key=lambda s: s[0] * s[1])
    kernels = [k for k in ORDER if any(r["kernel"] == k for r in rows)]
    cell = {(r["kernel"], r["M"], r["N"]): r for r in rows}
    head = "| kernel | " + " | ".join(f"{M} x {N}" for M, N in shapes) + " |"
    lines = [head, "|---|" + "---:|" * len(shapes)]
    for k in kernels:
        vals = []
        for M, N in shapes:
            r = cell.get((k, M, N))
            if r is None:
                vals.append("not timed")
            else:
                vals.append(f"{r['gbps']:.0f}" + (f" ({r['pct_copy']:.0f}%)" if pct else ""))
        lines.append(f"| `{k}` | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def bandwidth(dtype: str) -> str:
    rows = _bench_rows(dtype, "forward")
    if rows is None:
        return MISSING.format(cmd="python scripts/gpu/ladder_bench.py results/ladder_bench.json", file=BENCH.name)
    return _table(rows, pct=True)


def training(dtype: str) -> str:
    rows = _bench_rows(dtype, "forward+backward")
    if rows is None:
        return MISSING.format(cmd="python scripts/gpu/ladder_bench.py results/ladder_bench.json", file=BENCH.name)
    return _table(rows, pct=False)


def chart(dtype: str) -> str:
    """The ladder's forward bandwidth per kernel and shape, as bars."""
    rows = _bench_rows(dtype, "forward")
    return "" if rows is None else _bars(rows, f"ladder-{dtype}", f"Forward GB/s per kernel and shape, {dtype}")


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
    d = _load(path)
    if d is None:
        return ""
    rows, _ = _method_rows(d, arg)
    name, what = ("fast-dx", "dX GB/s (x, dy, dx)") if path == FAST_GRAD else ("fast", "GB/s")
    dtype, _, method = arg.partition(" ")
    return _bars(rows, f"{name}-{dtype}" + (f"-{method}" if method else ""),
                 f"{what}, reimpl.fast and torch, {dtype}" + (f", L2 {method}" if method else ""))


def fast_grad_chart(arg: str) -> str:
    return fast_chart(arg, FAST_GRAD)


def _bars(rows: list, name: str, what: str) -> str:
    """Grouped horizontal bars: one group per shape, one bar per kernel, GB/s, copy drawn as a line."""
    shapes = sorted({(r["M"], r["N"]) for r in rows}, key=lambda s: s[0] * s[1])
    kernels = [k for k in ORDER if k != "copy" and any(r["kernel"] == k for r in rows)]
    cell = {(r["kernel"], r["M"], r["N"]): r["gbps"] for r in rows}
    top = max(r["gbps"] for r in rows)
    bar, gap, left, width = 9, 14, 150, 520
    y, body = 20, []
    font = "font-family='ui-monospace,Menlo,monospace' font-size='10'"
    for M, N in shapes:
        body.append(f"<text x='4' y='{y + 8}' font-weight='bold'>{M} x {N}</text>")
        y += 12
        copy = cell.get(("copy", M, N))
        y0 = y
        for k in kernels:
            v = cell.get((k, M, N))
            body.append(f"<text x='{left - 6}' y='{y + bar - 1}' text-anchor='end'>{escape(k)}</text>")
            if v is not None:
                cls = ("#3f51b5" if k.startswith("torch") else "#2e7d32" if k.startswith(("triton", "fast"))
                       else "#9e9e9e")
                body.append(f"<rect x='{left}' y='{y}' width='{width * v / top:.1f}' height='{bar}' fill='{cls}'/>"
                            f"<text x='{left + width * v / top + 4:.1f}' y='{y + bar - 1}'>{v:.0f}</text>")
            y += bar + 2
        if copy:
            x = left + width * copy / top
            body.append(f"<line x1='{x:.1f}' y1='{y0 - 2}' x2='{x:.1f}' y2='{y}' stroke='#ef6c00' stroke-dasharray='3,2'/>"
                        f"<text x='{x + 3:.1f}' y='{y0 + 6}' fill='#ef6c00'>copy {copy:.0f}</text>")
        y += gap
    w = left + width + 70
    title = f"{what} (dashed: x.clone())"
    return (f"<svg xmlns='http://www.w3.org/2000/svg' class='diagram' data-diagram='{name}' role='img' "
            f"viewBox='0 0 {w} {y}' width='100%' style='max-width:{w}px' {font}><title>{escape(title)}</title>"
            + "".join(body) + "</svg>")


def ncu(what: str) -> str:
    """Nsight Compute's numbers for one pass (forward, grad or l2), from results/ncu_fast_PASS.json."""
    path = NCU[what]
    d = _load(path)
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
    d = _load(path)
    if d is None:
        return MISSING.format(cmd=f"python scripts/gpu/{path.stem}.py results/{path.name}", file=path.name)
    rows, method = _method_rows(d, arg)
    return f"*{d['device']}, torch {d['torch']}, {d['date']}; {method}; {d['bytes']}.*\n\n" + _table(rows, pct=True)


def fast_grad_bandwidth(arg: str) -> str:
    return fast_bandwidth(arg, FAST_GRAD)


def fast_experiments() -> str:
    """One row per variant and measured cell: % of copy."""
    d = _load(FAST_TRIED)
    if d is None:
        return MISSING.format(cmd="the runs described on this page", file=FAST_TRIED.name)
    lines = [f"*{d['device']}, torch {d['torch']}, {d['date']}; {d['method']}. {d['what']}*\n",
             "| variant | shape | % of copy |", "|---|---|---:|"]
    for v in d["variants"]:
        for key in ("pct_copy", "pct_copy_ln", "pct_copy_ln_registers", "against_3_blocks", "kept"):
            label = {"pct_copy": v["name"], "pct_copy_ln": v["name"],
                     "pct_copy_ln_registers": "the same rows held in registers (kept)",
                     "against_3_blocks": "the same at 3 blocks per SM (kept)",
                     "kept": "the kernel kept at the time, same run"}[key]
            for shape, pct in v.get(key, {}).items():
                lines.append(f"| {label} | {shape} | {pct}% |")
        if "note" in v:
            lines.append(f"| ↳ note | | {v['note']} |")
    return "\n".join(lines) + "\n"


def fast_rows_sweep() -> str:
    """Per dtype and M: % of copy with two and with four rows a warp, and what the plan picks."""
    d = _load(FAST_ROWS)
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
