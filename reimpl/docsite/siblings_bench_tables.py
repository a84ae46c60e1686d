"""The siblings' speed, rendered at build time from results/siblings_bench.json
(scripts/gpu/siblings_bench.py): every sentence on the pages that says "faster", "wins" or "at % of
copy" is a number from here.

    {% siblings_verdict OP %}            per dtype and method: how our kernel stands against the copy,
                                         torch and the peers over the cells of at least 32 MB
    {% siblings_bandwidth OP DTYPE %}    a chart of % of copy per width (pipelined), and the table of
                                         every cell and kernel, both methods, one click away
    {% siblings_claim OP %}              the verdict as sentences, for the prose
    {% siblings_ncu OP %}                Nsight Compute per launched kernel (results/ncu_siblings.json)

Rows: method, op, dtype, shape, kernel, ms, gbps, pct_copy (and layout, pass for BatchNorm).
"""
from __future__ import annotations

from .ladder_tables import COLOURS, INK, SPARE, _data, _svg, caption

BIG = 32 << 20  # a cell of at least 32 MB of copy-equivalent traffic: launch costs are noise there
TARGET_90 = ("softmax", "cross_entropy")  # the ops held to 90% of copy; BatchNorm is held to torch's speed
ITEMSIZE = {"fp32": 4, "bf16": 2, "fp16": 2}
# per op: our kernel, the kernels it is held against, and the copy-equivalent bytes of a shape
OURS = {"softmax": "one_read", "cross_entropy": "cross_entropy_fused", "batchnorm": "bn_split"}
RIVALS = {"softmax": ("torch_softmax", "three_pass", "online_block", "liger_softmax", "quack_softmax"),
          "cross_entropy": ("torch_cross_entropy", "liger_cross_entropy", "quack_cross_entropy"),
          "batchnorm": ("torch_batch_norm", "bn_kernel")}
ORDER = {"softmax": ("three_pass", "online_warp", "online_block", "one_read", "torch_softmax", "liger_softmax",
                     "quack_softmax", "copy"),
         "cross_entropy": ("cross_entropy_fused", "torch_cross_entropy", "liger_cross_entropy",
                           "quack_cross_entropy", "copy"),
         "batchnorm": ("bn_kernel", "bn_split", "torch_batch_norm", "copy")}
PEER_COLOURS = {"one_read": "#3d9a3a", "cross_entropy_fused": "#3d9a3a", "bn_split": "#3d9a3a",
                "torch_softmax": "#4e79a7", "torch_cross_entropy": "#4e79a7", "torch_batch_norm": "#4e79a7",
                "liger_softmax": "#e15759", "liger_cross_entropy": "#e15759",
                "quack_softmax": "#b07aa1", "quack_cross_entropy": "#b07aa1",
                "three_pass": "#f28e2b", "online_warp": "#8c8c8c", "online_block": "#59a1a0", "bn_kernel": "#d4a72c"}


def nbytes(r: dict) -> int:
    """The copy-equivalent bytes of a row's cell (what its GB/s counts)."""
    return round(r["gbps"] * r["ms"] * 1e6)


def _label(r: dict) -> str:
    s = " x ".join(map(str, r["shape"]))
    if r["op"] == "batchnorm":
        s += f" {r.get('layout', '')} {r.get('pass', '').replace('_', '+')}"
    return s


def _cells(d: dict, op: str):
    """(dtype, method, label) -> {kernel: row}, in the run's order."""
    cells: dict = {}
    for r in d["rows"]:
        if r["op"] == op:
            cells.setdefault((r["dtype"], r["method"], _label(r)), {})[r["kernel"]] = r
    return cells


def verdict(d: dict, op: str) -> list[dict]:
    """Per (dtype, method[, pass]): our kernel's % of copy over the big cells and, per rival, in how
    many of the cells it was timed in ours took no longer. The pages' claims are read from here."""
    ours = OURS[op]
    out: dict = {}
    for (dtype, method, label), ks in _cells(d, op).items():
        if ours not in ks or nbytes(ks[ours]) < BIG:
            continue
        key = (dtype, method, ks[ours].get("pass", ""))
        v = out.setdefault(key, {"dtype": dtype, "method": method, "pass": key[2], "cells": 0, "pcts": [],
                                 "beats": {}, "worst": {}})
        v["cells"] += 1
        v["pcts"].append(ks[ours]["pct_copy"])
        for rival in RIVALS[op]:
            if rival in ks:
                won, n = v["beats"].get(rival, (0, 0))
                v["beats"][rival] = (won + (ks[ours]["ms"] <= ks[rival]["ms"]), n + 1)
                ratio = ks[rival]["ms"] / ks[ours]["ms"]
                if ratio < v["worst"].get(rival, (9e9, ""))[0]:
                    v["worst"][rival] = (ratio, label)
    return list(out.values())


def verdict_table(d: dict | None, op: str) -> str:
    if d is None or not any(r["op"] == op for r in d["rows"]):
        return "*Not measured yet: run `python scripts/gpu/siblings_bench.py results/siblings_bench.json` on a GPU.*\n"
    ours = OURS[op]
    rows = verdict(d, op)
    rivals = [r for r in RIVALS[op] if any(r in v["beats"] for v in rows)]
    head = "| dtype | method |" + (" pass |" if op == "batchnorm" else "") + " cells | % of copy, min – max |"
    head += "".join(f" no slower than `{r}` (slowest ratio) |" for r in rivals)
    lines = [caption(f"`{ours}` over every cell of at least 32 MB: its % of the copy's bandwidth, and in how many "
                     f"cells it took no longer than each other kernel timed in the same run (in brackets: the "
                     f"other's time over ours in the cell where that ratio is lowest)", d,
                     "both of bench.METHODS, each cell's kernels interleaved"),
             head, "|---|---|" + ("---|" if op == "batchnorm" else "") + "---:|---:|" + "---:|" * len(rivals)]
    for v in rows:
        cells = "".join(
            f" {v['beats'][r][0]} of {v['beats'][r][1]} ({v['worst'][r][0]:.2f}x) |" if r in v["beats"] else " — |"
            for r in rivals)
        p = f" {v['pass'].replace('_', ' + ')} |" if op == "batchnorm" else ""
        lines.append(f"| {v['dtype']} | {v['method']} |{p} {v['cells']} | {min(v['pcts']):.0f} – {max(v['pcts']):.0f} |"
                     + cells)
    return "\n".join(lines) + "\n"


def _table(d: dict, op: str, dtype: str) -> str:
    cells = _cells(d, op)
    methods = list(dict.fromkeys(m for (_, m, _) in cells))
    labels = list(dict.fromkeys(l for (dt, _, l) in cells if dt == dtype))
    kernels = [k for k in ORDER[op] if any(k in ks for (dt, _, _), ks in cells.items() if dt == dtype)]
    lines = [caption(f"% of `x.clone()`'s bandwidth per cell and kernel, {op}, {dtype}, "
                     + " / ".join(methods) + "; the copy's GB/s in its column", d,
                     "bench.METHODS, each cell's kernels interleaved by round"),
             "| shape | MB | " + " | ".join(f"`{k}`" for k in kernels) + " |", "|---|---:|" + "---:|" * len(kernels)]
    for label in labels:
        ref = next(cells[dtype, m, label] for m in methods if (dtype, m, label) in cells)
        any_row = next(iter(ref.values()))
        vals = []
        for k in kernels:
            got = [cells.get((dtype, m, label), {}).get(k) for m in methods]
            if k == "copy":
                vals.append(" / ".join(f"{r['gbps']:.0f} GB/s" if r else "—" for r in got))
            else:
                vals.append(" / ".join(f"{r['pct_copy']:.0f}" if r else "—" for r in got))
        lines.append(f"| {label} | {nbytes(any_row) / 2**20:.0f} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def _chart(d: dict, op: str, dtype: str, name: str, title: str) -> str:
    import io

    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    cells = _cells(d, op)
    labels = [l for (dt, m, l) in cells if dt == dtype and m == "pipelined"]
    kernels = [k for k in ORDER[op] if k != "copy" and any(k in cells[dtype, "pipelined", l] for l in labels)]
    spare = iter(SPARE)
    rc = {"svg.fonttype": "none", "svg.hashsalt": name, "font.family": "sans-serif", "font.size": 11.5,
          "text.color": INK, "axes.labelcolor": INK, "axes.edgecolor": INK, "xtick.color": INK, "ytick.color": INK,
          "figure.facecolor": "none", "axes.facecolor": "none", "savefig.facecolor": "none",
          "savefig.edgecolor": "none", "legend.frameon": False}
    with matplotlib.rc_context(rc):
        fig = Figure(figsize=(10, 5.6), layout="constrained")
        ax = fig.add_subplot()
        for k in kernels:
            pts = [(i, cells[dtype, "pipelined", l][k]["pct_copy"]) for i, l in enumerate(labels)
                   if k in cells[dtype, "pipelined", l]]
            c = PEER_COLOURS.get(k) or COLOURS.get(k) or next(spare)
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", markersize=4, linewidth=2 if k == OURS[op] else 1.3,
                    color=c, label=k, zorder=3 if k == OURS[op] else 2)
        ax.axhline(100, color=INK, linestyle=(0, (4, 2)), linewidth=1.2, label="copy (x.clone()) = 100%")
        ax.axhline(90, color=INK, linestyle=":", linewidth=1, alpha=0.6, label="90% of copy")
        ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=9.5)
        ax.set_ylim(0, 115)
        ax.yaxis.grid(True, color=INK, alpha=0.18, linewidth=0.8)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        ax.set_title(title, loc="left", fontsize=13, fontweight="bold", gid=f"{name}-title")
        ax.set_xlabel("shape: M x N (rows x elements per row), in the run's order", gid=f"{name}-xlabel")
        ax.set_ylabel("% of the copy's bandwidth (pipelined)", gid=f"{name}-ylabel")
        legend = fig.legend(loc="outside lower center", ncols=4, fontsize=10.5)
        legend.set_gid(f"{name}-legend")
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return buf.getvalue()


def bandwidth(d: dict | None, op: str, dtype: str) -> str:
    if d is None or not any(r["op"] == op and r["dtype"] == dtype for r in d["rows"]):
        return "*Not measured yet: run `python scripts/gpu/siblings_bench.py results/siblings_bench.json` on a GPU.*\n"
    name = f"siblings-{op}-{dtype}".replace("_", "-")
    title = f"{op.replace('_', '-')} {dtype}: % of copy bandwidth per shape, {d['device']}"
    return _svg(_chart(d, op, dtype, name, title), name, title) + _data(_table(d, op, dtype))


def expand(kind: str, arg: str | None, load, load_ncu) -> str | None:
    if kind == "siblings_verdict" and arg in OURS:
        return verdict_table(load(), arg)
    if kind == "siblings_claim" and arg in OURS:
        return claim(load(), arg)
    if kind == "siblings_ncu" and arg in OURS:
        return ncu_table(load_ncu(), arg)
    if kind == "siblings_bandwidth" and arg and len(arg.split()) == 2:
        op, dtype = arg.split()
        return bandwidth(load(), op, dtype)
    return None


def ncu_table(d: dict | None, op: str) -> str:
    """Nsight Compute per kernel launch of each profiled call (results/ncu_siblings.json)."""
    if d is None:
        return "*Not profiled yet: run `OUT=results bash scripts/gpu/ncu_siblings.sh` on a GPU.*\n"
    rows = [c for c in d["cases"] if _ncu_op(c["kernel"]) == op and c["us"] >= NCU_MIN_US]
    lines = [caption(f"Nsight Compute, {op}: each kernel of at least {NCU_MIN_US} µs a call launches, its time (µs), "
                     "the DRAM megabytes it read and wrote, the memory system's busiest unit and the SMs' busiest "
                     "pipe (% of peak), achieved occupancy (% of the SM's warps), registers a thread, and the bound "
                     "that follows: the larger of memory and SM where it passes 60%, else latency", d,
                     d["cache_control"]),
             "| call | dtype | shape | kernel launched | µs | DRAM MB read / written | memory % | SM % "
             "| occupancy % | registers | bound |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for c in rows:
        lines.append(f"| `{c['kernel']}` | {c['dtype']} | {' x '.join(map(str, c['shape']))} | {c['launched']} "
                     f"| {c['us']:.1f} | {c['dram_read_mb']:.0f} / {c['dram_write_mb']:.0f} "
                     f"| {c['memory_sol_pct']:.0f} | {c['sm_sol_pct']:.0f} | {c['occupancy_pct']:.0f} "
                     f"| {c['registers']} | {c['bound']} |")
    return "\n".join(lines) + "\n"


NCU_MIN_US = 5  # the few-microsecond helpers a call also launches (a fill, a scalar) are left out


def _ncu_op(kernel: str) -> str:
    if "cross_entropy" in kernel:
        return "cross_entropy"
    if kernel.startswith(("bn_", "torch_batch_norm")):
        return "batchnorm"
    return "softmax"


def claim(d: dict | None, op: str) -> str:
    """One sentence per dtype and method, from verdict(): the figures the prose would otherwise type."""
    if d is None:
        return ""
    out = []
    for v in verdict(d, op):
        where = f"{v['dtype']}, {v['method']}" + (f", {v['pass'].replace('_', ' + ')}" if v["pass"] else "")
        beats = "".join(f"; no slower than `{r}` in {w} of {n}" for r, (w, n) in v["beats"].items())
        out.append(f"- {where}: `{OURS[op]}` at {min(v['pcts']):.0f}–{max(v['pcts']):.0f}% of copy over "
                   f"{v['cells']} cells of at least 32 MB{beats}.")
    short = shortfalls(d, op)
    if short:
        out.append("\nWhere it falls short, pipelined (cells of at least 32 MB):\n")
        for dtype, (cells, slow) in short.items():
            below = f"below 90% of copy: {', '.join(cells) or 'none'}; " if op in TARGET_90 else ""
            out.append(f"- {dtype}, {below}slower than torch: {', '.join(slow) or 'none'}.")
    return "\n".join(out) + "\n"


def shortfalls(d: dict, op: str) -> dict:
    """dtype -> (cells below 90% of copy, cells slower than torch's), pipelined, big cells only."""
    ours, theirs = OURS[op], RIVALS[op][0]
    out: dict = {}
    for (dtype, method, label), ks in _cells(d, op).items():
        if method != "pipelined" or ours not in ks or nbytes(ks[ours]) < BIG:
            continue
        below, slow = out.setdefault(dtype, ([], []))
        if ks[ours]["pct_copy"] < 90:
            below.append(f"{label} ({ks[ours]['pct_copy']:.1f}%)")
        if theirs in ks and ks[ours]["ms"] > ks[theirs]["ms"]:
            slow.append(f"{label} ({ks[theirs]['ms'] / ks[ours]['ms']:.2f}x)")
    return out
