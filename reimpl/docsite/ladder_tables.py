"""The ladder pages' tables and charts, rendered at build time from the committed GPU results
(results/ladder_errors.json, results/ladder_bench.json), the stated bounds (reimpl/ladder/accuracy.py)
and the registry of rungs (reimpl/ladder/registry.py).

    {% rung_index %}              every rung: its idea, whose idea, GB/s and % of copy, bound, run line
    {% ladder_errors RUNG %}      worst error per input family and dtype, its bound, distance to torch
    {% ladder_bandwidth DTYPE %}  GB/s and % of copy of every rung, torch and the copy, forward
    {% ladder_training DTYPE %}   forward+backward GB/s of the Triton rungs and torch
    {% ladder_chart DTYPE %}      the forward table as an inline SVG bar chart (no JavaScript, no CDN)
    {% ladder_stamp %}            device, versions, date and method of the runs

The benchmark table and bars (`bench_table`, `bench_bars`) also serve reimpl.fast's page
(reimpl/docsite/fast_tables.py), each with its own kernel order.
"""
from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

from ..ladder import accuracy, registry

RESULTS = Path(__file__).resolve().parents[2] / "results"
ERRORS = RESULTS / "ladder_errors.json"
BENCH = RESULTS / "ladder_bench.json"
# the order a reader climbs, from the registry (LayerNorm rungs, then RMSNorm's); torch and the copy
# are the yardsticks at the end
YARDSTICKS = ("torch_layer_norm", "torch_rms_norm", "copy")
ORDER = registry.table_order(registry.RUNGS) + YARDSTICKS
# the rung index's bandwidth: one shape every rung but the slow `naive` was timed at, rows long
# enough that one block per row has work
INDEX_SHAPE = (16384, 4096)
INDEX_DTYPES = ("fp32", "bf16")
MISSING = "*Not measured yet: run `{cmd}` on a GPU and commit `{file}`.*\n"


def load(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def stamp() -> str:
    parts = []
    for name, path in (("errors", ERRORS), ("bandwidth", BENCH)):
        d = load(path)
        if d:
            method = f"; {d['method']}" if "method" in d else ""
            parts.append(f"{name}: {d['device']}, torch {d['torch']}, CUDA {d['cuda']}, {d['date']}{method}")
    return ("*" + ". ".join(parts) + ".*\n") if parts else ""


def errors(rung: str) -> str:
    d = load(ERRORS)
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
    d = load(BENCH)
    if d is None:
        return None
    return [r for r in d["rows"] if r["dtype"] == dtype and r.get("pass", "forward") == pass_]


def bench_table(rows, order, pct: bool) -> str:
    shapes = sorted({(r["M"], r["N"]) for r in rows}, key=lambda s: s[0] * s[1])
    kernels = [k for k in order if any(r["kernel"] == k for r in rows)]
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
    return bench_table(rows, ORDER, pct=True)


def training(dtype: str) -> str:
    rows = _bench_rows(dtype, "forward+backward")
    if rows is None:
        return MISSING.format(cmd="python scripts/gpu/ladder_bench.py results/ladder_bench.json", file=BENCH.name)
    return bench_table(rows, ORDER, pct=False)


def chart(dtype: str) -> str:
    """The ladder's forward bandwidth per kernel and shape, as bars."""
    rows = _bench_rows(dtype, "forward")
    return "" if rows is None else bench_bars(rows, ORDER, f"ladder-{dtype}",
                                              f"Forward GB/s per kernel and shape, {dtype}")


def bench_bars(rows: list, order, name: str, what: str) -> str:
    """Grouped horizontal bars: one group per shape, one bar per kernel, GB/s, copy drawn as a line."""
    shapes = sorted({(r["M"], r["N"]) for r in rows}, key=lambda s: s[0] * s[1])
    kernels = [k for k in order if k != "copy" and any(r["kernel"] == k for r in rows)]
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


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def rung_index(page: str = "") -> str:
    """One row per rung of the registry, in climbing order: its idea, whose idea it is, its forward
    GB/s and % of copy at INDEX_SHAPE per dtype (results/ladder_bench.json), its stated bound on
    normal rows, and the line that runs its GPU test. A rung is linked to its section where `page`
    (the Markdown of the page the index is on) has an anchor of its name."""
    d = load(BENCH)
    M, N = INDEX_SHAPE
    cell = {(r["kernel"], r["dtype"]): r for r in (d["rows"] if d else ())
            if (r["M"], r["N"]) == INDEX_SHAPE and r.get("pass", "forward") == "forward"}
    anchors = set(re.findall(r"\{ #([\w-]+) \}", page))
    lines = ["| # | rung | the idea it adds | whose idea | "
             + " | ".join(f"{dt} GB/s (% of copy)" for dt in INDEX_DTYPES)
             + " | stated bound, normal rows (fp32 / bf16) | run it |",
             "|---:|---|---|---|" + "---:|" * len(INDEX_DTYPES) + "---|---|"]
    rules = {}
    for i, e in enumerate(registry.RUNGS, 1):
        name = f"[`{e.name}`](#{e.name})" if e.name in anchors else f"`{e.name}`"
        if e.rms_norm:
            name += " (RMSNorm)"
        speed = [f"{cell[e.name, dt]['gbps']:.0f} ({cell[e.name, dt]['pct_copy']:.0f}%)" if (e.name, dt) in cell
                 else "not timed" for dt in INDEX_DTYPES]
        (b32, why), (b16, _) = (accuracy.bound(e.name, dt, "normal") for dt in ("float32", "bfloat16"))
        rules.setdefault(e.bound_family, why)
        lines.append(f"| {i} | {name} | {_cell(e.idea)} | {_cell(e.credit)} | " + " | ".join(speed)
                     + f" | {b32:.3g} / {b16:.3g} ({e.bound_family}) | `{e.run}` |")
    source = (f"Bandwidth at M x N = {M} x {N} from `results/{BENCH.name}`" if d else
              MISSING.format(cmd="python scripts/gpu/ladder_bench.py results/ladder_bench.json",
                             file=BENCH.name).strip())
    notes = [f"\n*{source} (`naive` was timed on the two smallest shapes only); each rung's tables below "
             "give every shape. Bounds are on |y − ref| / max(|ref|, 1) "
             "against a float64 reference; the other input families have their own (see each rung's table). "
             "Every row comes from `reimpl/ladder/registry.py`.*\n", "Bound families, on normal rows:\n"]
    notes += [f"- `{rule}`: {why}" for rule, why in rules.items()]
    return "\n".join(lines) + "\n" + "\n".join(notes) + "\n"
