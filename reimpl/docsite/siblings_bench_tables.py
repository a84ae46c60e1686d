"""The siblings' speed, rendered at build time from results/siblings_bench.json
(scripts/gpu/siblings_bench.py): every sentence on the pages that says "faster", "wins" or "at % of
copy" is a number from here.

    {% siblings_verdict OP %}            per dtype and method: how our kernel stands against the copy,
                                         torch and the peers over the cells of at least 32 MB
    {% siblings_bandwidth OP DTYPE %}    a chart of % of copy per width (pipelined), and the tables of
                                         every cell and kernel, both methods, one click away
    {% siblings_claim OP %}              the verdict as sentences, for the prose
    {% siblings_ncu OP %}                Nsight Compute per launched kernel (results/ncu_siblings.json)

Rows: method, op, dtype, shape, kernel, ms, gbps, pct_copy (and layout, pass for BatchNorm).
"""
from __future__ import annotations

import itertools
import math
import re

from .ladder_tables import COLOURS, INK, SPARE, _data, _svg, caption, chart_style, legend_below

BIG = 32 << 20  # a cell of at least 32 MB of copy-equivalent traffic: launch costs are noise there
TARGET_90 = ("softmax", "cross_entropy")  # the ops held to 90% of copy; BatchNorm is held to torch's speed


def _pct_range(pcts, dash: str = "–") -> str:
    """min–max of percentages to a tenth: the ends neither disagree with the whole numbers of the
    cells they summarise nor leave out a value a list beside them names."""
    return f"{min(pcts):.1f}{dash}{max(pcts):.1f}"


# per op: our kernel, the kernels it is held against, and the copy-equivalent bytes of a shape
OURS = {"softmax": "one_read", "cross_entropy": "cross_entropy_fused", "batchnorm": "bn_split"}
RIVALS = {"softmax": ("torch_softmax", "three_pass", "online_warp", "online_block", "liger_softmax", "quack_softmax"),
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
    """The verdict as a table. BatchNorm (three passes) has a row per dtype, method and pass; softmax
    and cross-entropy, whose rivals are many, have a column per dtype and method and a row per rival,
    so that the table fits the text column."""
    if d is None or not any(r["op"] == op for r in d["rows"]):
        return "*Not measured yet: run `python scripts/gpu/siblings_bench.py results/siblings_bench.json` on a GPU.*\n"
    ours = OURS[op]
    rows = verdict(d, op)
    rivals = [r for r in RIVALS[op] if any(r in v["beats"] for v in rows)]
    lines = [caption(f"`{ours}` over every cell of at least 32 MB: its % of the copy's bandwidth, and, against each "
                     f"other kernel timed in the same run, in how many cells it took no longer (in brackets: the "
                     f"other's time over ours in the cell where that ratio is lowest)", d,
                     "both of bench.METHODS, each cell's kernels interleaved")]

    def beat(v, r):
        return f"{v['beats'][r][0]} of {v['beats'][r][1]}<br>({v['worst'][r][0]:.2f}x)" if r in v["beats"] else "—"
    if op == "batchnorm":
        lines += ["| dtype | method | pass | cells | % of copy, min – max |" + "".join(f" vs {_code(r)} |" for r in rivals),
                  "|---|---|---|---:|---:|" + "---:|" * len(rivals)]
        for v in rows:
            lines.append(f"| {v['dtype']} | {v['method']} | {v['pass'].replace('_', ' + ')} | {v['cells']} "
                         f"| {_pct_range(v['pcts'], ' – ')} |" + "".join(f" {beat(v, r)} |" for r in rivals))
        return "\n".join(lines) + "\n"
    lines += ["| | " + " | ".join(f"{v['dtype']}<br>{v['method']}" for v in rows) + " |",
              "|---|" + "---:|" * len(rows),
              "| cells | " + " | ".join(str(v["cells"]) for v in rows) + " |",
              "| % of copy | " + " | ".join(_pct_range(v["pcts"], "–") for v in rows) + " |"]
    for r in rivals:
        lines.append(f"| vs {_code(r)} | " + " | ".join(beat(v, r) for v in rows) + " |")
    return "\n".join(lines) + "\n"


LAYOUT = {"nchw": "NCHW", "channels_last": "channels-last"}
PASSES = ("forward", "forward_backward", "backward")
PASS_TITLE = {"forward": "forward", "forward_backward": "forward + backward", "backward": "backward alone"}
NOWRAP = "white-space: nowrap"


def _code(name: str) -> str:
    """A kernel's name in a Markdown table cell, kept on one line (the theme breaks code anywhere)."""
    return f'<span style="{NOWRAP}">`{name}`</span>'


def _shape(shape) -> str:
    """A shape that does not wrap at its x's."""
    return "&nbsp;x&nbsp;".join(map(str, shape))


def _breakable(kernel: str) -> str:
    """A long CUDA kernel name that may wrap only after `::` and before `_`, never mid-word, in a column
    kept wide enough that it takes two or three lines, not one a word."""
    name = kernel.replace("::", "::<wbr>").replace("_", "<wbr>_")
    return f'<span style="display: inline-block; min-width: 13em">{name}</span>'



def _ratio(x: float) -> str:
    """Another kernel's time over ours; three decimals where two would round a shortfall up to 1.00."""
    return f"{x:.3f}x" if f"{x:.2f}" == "1.00" and x < 1 else f"{x:.2f}x"


def _shown(op: str) -> list[str]:
    """ORDER as a reader meets it (table columns, legend): ours, torch's, the peers, then the earlier
    rungs, the copy last."""
    first = [OURS[op], RIVALS[op][0]] + [k for k in ORDER[op] if k.startswith(("liger", "quack"))]
    return first + [k for k in ORDER[op] if k not in first]


# The data under a chart, as tables that fit the text column (one table of every kernel ran past it).
# BatchNorm has a set of rows per pass, as the chart has a panel per pass. A set of rows whose kernels
# do not fit one table is cut, in the kernels' order, into the fewest tables that fit, as even as can
# be; those tables number their rows, which pair by number (as the Nsight Compute tables' do), and each
# repeats the shape. Widths are counted in characters of about 7 px (a space counts half): a column
# takes its widest cell or header (kernel names are kept on one line) and its padding. The text column
# is 686 px wide at a 1280 px window, 98 characters; a table may take 96.
TEXT_CHARS = 96
PAD_CHARS = 3


def _chars(text: str) -> float:
    """The width a table cell's text is drawn at, in characters: a space counts half."""
    t = re.sub(r"<[^>]+>", "", text).replace("&nbsp;", " ").replace("`", "")
    return len(t) - t.count(" ") / 2


def _width(columns) -> float:
    """A table's width in characters: each column's widest cell or header, and its padding."""
    return sum(max(map(_chars, [head, *cells])) + PAD_CHARS for head, _, cells in columns)


def _cut(keys, kernels: list) -> list[list]:
    """The kernel columns cut, in order, into the fewest tables that fit TEXT_CHARS, the widest of them
    as narrow as can be. keys(i, n): the columns that open table i of n."""
    for n in range(1, len(kernels) + 1):
        fits = []
        for cuts in itertools.combinations(range(1, len(kernels)), n - 1):
            parts = [kernels[a:b] for a, b in zip((0, *cuts), (*cuts, len(kernels)))]
            widest = max(_width(keys(i, n) + part) for i, part in enumerate(parts))
            if widest <= TEXT_CHARS:
                fits.append((widest, parts))
        if fits:
            return min(fits, key=lambda f: f[0])[1]
    return [[k] for k in kernels]


def _holds(op: str, kernels: list[str]) -> str:
    """What a table's kernel columns hold, as the page names them: "ours (`one_read`), torch's and
    Liger's", "the three earlier kernels and the copy's own GB/s"."""
    earlier = [k for k in kernels if k != "copy" and k not in (OURS[op], RIVALS[op][0])
               and not k.startswith(("liger", "quack"))]
    words = []
    for k in kernels:
        if k == OURS[op]:
            words.append(f"ours (`{k}`)")
        elif k == RIVALS[op][0]:
            words.append("torch's")
        elif k.startswith("liger"):
            words.append("Liger's")
        elif k.startswith("quack"):
            words.append("quack's")
        elif k == "copy":
            words.append("the copy's own GB/s")
        elif k == earlier[0]:
            words.append(f"the earlier kernel `{k}`" if len(earlier) == 1 else
                         f"the {NUMBERS.get(len(earlier), len(earlier))} earlier kernels")
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]


NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five"}


def _table(d: dict, op: str, dtype: str) -> str:
    """The numbers of a chart: % of copy per cell and kernel, both methods, in tables that fit the
    text column (TEXT_CHARS), each with its caption."""
    cells = _cells(d, op)
    methods = list(dict.fromkeys(m for (_, m, _) in cells))
    labels = list(dict.fromkeys(l for (dt, _, l) in cells if dt == dtype))

    def first(label):
        ref = next(cells[dtype, m, label] for m in methods if (dtype, m, label) in cells)
        return next(iter(ref.values()))

    bn = op == "batchnorm"
    if bn:  # a set of rows per pass, as the chart's panels, NCHW first
        labels.sort(key=lambda l: (PASSES.index(first(l)["pass"]), list(LAYOUT).index(first(l)["layout"])))
        groups = [(p, [l for l in labels if first(l)["pass"] == p]) for p in PASSES]
    else:
        groups = [(None, labels)]
    each = "each cell " + " / ".join(methods)
    out = []
    for pass_, rows in groups:
        if not rows:
            continue
        # a column: (header, alignment, cells)
        kernels = []
        for k in _shown(op):
            got = [[cells.get((dtype, m, l), {}).get(k) for m in methods] for l in rows]
            if any(any(g) for g in got):
                key = "gbps" if k == "copy" else "pct_copy"
                kernels.append((f"`{k}`" if k != "copy" else "`copy`, GB/s", "---:",
                                [" / ".join(f"{r[key]:.0f}" if r else "—" for r in g) for g in got]))

        def keys(i, n, rows=rows):
            return ([("#", "--:", [str(j) for j in range(1, len(rows) + 1)])] if n > 1 else []) \
                + ([("layout", "---", [LAYOUT[first(l)["layout"]] for l in rows])] if bn else []) \
                + [("shape", "---", [_shape(first(l)["shape"]) for l in rows])] \
                + ([("MB", "---:", [f"{nbytes(first(l)) / 2**20:.0f}" for l in rows])] if i == 0 else [])

        parts = _cut(keys, kernels)
        names = [[head.split("`")[1] for head, _, _ in part] for part in parts]
        where = f"{op}, {dtype}" + (f", {PASS_TITLE[pass_]}" if pass_ else "")
        for i, part in enumerate(parts):
            timed = [k for k in names[i] if k != "copy"]
            what = (where + (", the same rows by number" if i else "") + ": "
                    + (f"% of `x.clone()`'s bandwidth per cell for {_holds(op, timed)}, {each}" if timed else
                       f"the copy's GB/s per cell, {each}")
                    + ("; the copy's own GB/s in its column" if timed and "copy" in names[i] else ""))
            if i == 0:
                what += "; MB: MiB (2^20 bytes) read and written by the copy"
            if i == 0 and len(parts) > 1:
                what += (f"; the table after it gives {_holds(op, names[1])}"
                         f"{' and more' if len(parts) > 2 else ''} for the same rows, by number")
            columns = keys(i, len(parts)) + part
            lines = [caption(what, d, "bench.METHODS, each cell's kernels interleaved by round"),
                     "| " + " | ".join(head for head, _, _ in columns) + " |",
                     "|" + "|".join(align for _, align, _ in columns) + "|"]
            lines += ["| " + " | ".join(row) + " |" for row in zip(*(c for _, _, c in columns))]
            out.append("\n".join(lines) + "\n")
    return "\n".join(out)


def _positions(d: dict, op: str, dtype: str, pass_: str | None = None):
    """The x axis of a chart: [(x, label, tick)], the big cells first in the run's order (for BatchNorm,
    NCHW then channels-last), a gap, then the rest; and [(x0, x1, group name)] for the groups."""
    cells = _cells(d, op)
    labels = [l for (dt, m, l) in cells if dt == dtype and m == "pipelined"
              and (pass_ is None or next(iter(cells[dt, m, l].values())).get("pass") == pass_)]
    row = {l: next(iter(cells[dtype, "pipelined", l].values())) for l in labels}
    if op == "batchnorm":
        groups = [(LAYOUT[lay], [l for l in labels if row[l]["layout"] == lay]) for lay in LAYOUT]
        # a * marks the shapes whose forward (x read, y written) moves under 32 MB: one tick serves
        # every pass's panel
        tick = {l: " x ".join(map(str, row[l]["shape"][1:] if len(row[l]["shape"]) == 4 else row[l]["shape"]))
                + (" *" if 2 * math.prod(row[l]["shape"]) * (4 if dtype == "fp32" else 2) < BIG else "")
                for l in labels}
    else:
        big = [l for l in labels if nbytes(row[l]) >= BIG]
        groups = [("", big), ("under 32 MB", [l for l in labels if l not in big])]
        tick = {l: l for l in labels}
    out, spans, x = [], [], 0
    for gname, ls in groups:
        if not ls:
            continue
        spans.append((x, x + len(ls) - 1, gname))
        out += [(x + i, l, tick[l]) for i, l in enumerate(ls)]
        x += len(ls) + 1  # a gap: a line is not drawn across it
    return out, spans


def _legend(fig, ax, name: str) -> None:
    handles, labels = ax.get_legend_handles_labels()
    legend_below(fig, handles, labels, name, fontsize=11.5)


def _chart(d: dict, op: str, dtype: str, name: str, title: str) -> str:
    import io

    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    cells = _cells(d, op)
    bn = op == "batchnorm"
    passes = [p for p in PASSES if _positions(d, op, dtype, p)[0]] if bn else [None]
    kernels = [k for k in _shown(op) if k != "copy"
               and any(k in ks for (dt, m, _), ks in cells.items() if dt == dtype and m == "pipelined")]
    spare = iter(SPARE)
    colour = {k: PEER_COLOURS.get(k) or COLOURS.get(k) or next(spare) for k in kernels}
    with matplotlib.rc_context(chart_style(name, 12)):
        # about the text column's width, so that the text is drawn near its stated size
        fig = Figure(figsize=(9.2, 3.1 + 2.4 * len(passes)) if bn else (9.2, 6.4), layout="constrained")
        axes = fig.subplots(len(passes), 1, sharex=True, squeeze=False)[:, 0]
        for ax, pass_ in zip(axes, passes):
            xs, spans = _positions(d, op, dtype, pass_)
            for k in kernels:
                ys = {x: cells[dtype, "pipelined", l][k]["pct_copy"] for x, l, _ in xs
                      if k in cells[dtype, "pipelined", l]}
                if not ys:
                    continue
                # NaN where a kernel was not timed and in the gaps: the line breaks there
                xx = list(range(xs[-1][0] + 1))
                ax.plot(xx, [ys.get(x, float("nan")) for x in xx], marker="o", markersize=4.5,
                        linewidth=2.4 if k == OURS[op] else 1.4, color=colour[k], label=k,
                        zorder=3 if k == OURS[op] else 2)
            ax.axhline(100, color=INK, linestyle=(0, (4, 2)), linewidth=1.2, label="copy (x.clone()) = 100%")
            if op in TARGET_90:
                ax.axhline(90, color=INK, linestyle=":", linewidth=1, alpha=0.6, label="90% of the copy")
            for x0, x1, gname in spans:
                if x0:
                    ax.axvline(x0 - 1, color=INK, linewidth=0.8, alpha=0.35)
                if gname:
                    ax.text((x0 + x1) / 2, 112 if not bn else 108, gname, ha="center", va="bottom", fontsize=11,
                            style="italic")
            ax.set_ylim(0, 118 if not bn else 114)
            ax.set_yticks(range(0, 101, 20))
            ax.yaxis.grid(True, color=INK, alpha=0.18, linewidth=0.8)
            for side in ("top", "right"):
                ax.spines[side].set_visible(False)
            if bn:
                ax.set_title(PASS_TITLE[pass_], loc="left", fontsize=12, pad=2)
        ax = axes[-1]
        few = len(xs) <= 8  # a few shapes read level; many are slanted to fit
        ax.set_xticks([x for x, _, _ in xs], [t for _, _, t in xs], rotation=0 if few else 55,
                      ha="center" if few else "right", rotation_mode="anchor", fontsize=10.5)
        ax.set_xlim(-0.6, xs[-1][0] + 0.6)
        fig.suptitle(title, x=0.01, ha="left", fontsize=13.5, fontweight="bold", gid=f"{name}-title")
        xlabel = ("shape: C x H x W of a ResNet-50 layer at batch 32, or (N·L) x C of ViT tokens" if bn else
                  "shape: M x N (rows x " + ("vocabulary" if op == "cross_entropy" else "elements per row")
                  + "), by row width")
        ax.set_xlabel(xlabel, fontsize=12, gid=f"{name}-xlabel")
        fig.supylabel("% of the copy's bandwidth (pipelined)", fontsize=12, gid=f"{name}-ylabel")
        _legend(fig, axes[0], name)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return buf.getvalue()


def bandwidth(d: dict | None, op: str, dtype: str) -> str:
    if d is None or not any(r["op"] == op and r["dtype"] == dtype for r in d["rows"]):
        return "*Not measured yet: run `python scripts/gpu/siblings_bench.py results/siblings_bench.json` on a GPU.*\n"
    name = f"siblings-{op}-{dtype}".replace("_", "-")
    title = f"{op.replace('_', '-')} {dtype}: % of the copy's bandwidth per shape, {d['device']}"
    data = _data(_table(d, op, dtype))
    # the data tables: kernel names whole, shapes on one line, cells padded less than the theme's (the
    # PAD_CHARS of a column's width), so that each table fits the text column
    compact = "padding: .6em .8em; min-width: 0"
    data = re.sub(r'<(t[hd])( style="([^"]*)")?>', lambda m: f'<{m.group(1)} style="{m.group(3) or ""}{compact}">',
                  data)
    data = re.sub(r'<th style="([^"]*)"><code>', rf'<th style="\1; {NOWRAP}"><code>', data)
    return f'<div class="diagram-box">{_svg(_chart(d, op, dtype, name, title), name, title)}{data}</div>'


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
    """Nsight Compute per kernel launch of each profiled call (results/ncu_siblings.json), as two
    tables whose rows pair by number: what ran and how long; then its memory, SMs and bound (one
    table of twelve columns ran past the text column)."""
    if d is None:
        return "*Not profiled yet: run `OUT=results bash scripts/gpu/ncu_siblings.sh` on a GPU.*\n"
    rows = [c for c in d["cases"] if _ncu_op(c["kernel"]) == op and c["us"] >= NCU_MIN_US]
    bn = op == "batchnorm"
    what = [caption(f"Nsight Compute, {op}: each kernel of at least {NCU_MIN_US} µs a call launches, and its time "
                    "(µs); the table after it gives each row's memory and SMs", d, d["cache_control"]),
            "| # | call | " + ("layout | " if bn else "") + "dtype | shape | kernel launched | µs |",
            "|--:|---|" + ("---|" if bn else "") + "---|---|---|---:|"]
    how = [caption(f"Nsight Compute, {op}, the same rows by number: the DRAM megabytes each kernel read and wrote, "
                   "the memory system's busiest unit and the SMs' busiest pipe (% of peak), achieved occupancy "
                   "(% of the SM's warps), registers a thread, and the bound that follows: memory or compute (SM), "
                   "whichever is busier, where it passes 60%, else latency", d, d["cache_control"]),
           "| # | DRAM MB (10⁶ B) read / written | memory % | SM % | occupancy % | registers | bound |",
           "|--:|---:|---:|---:|---:|---:|---|"]
    earlier = 0
    for i, c in enumerate(rows, 1):
        call, _, layout = c["kernel"].rstrip("]").partition("[")  # bn_split[nchw]: the call, its layout
        where = f'<span style="{NOWRAP}">{LAYOUT.get(layout, layout)}</span> | ' if bn else ""
        now = _launched_now(c)
        mark = ""
        if now is not None and now != c["launched"]:
            earlier += 1
            mark = f" (earlier plan; now {_code(now.removeprefix('ladder::'))})"
        what.append(f"| {i} | {_code(call)} | {where}{c['dtype']} | {_shape(c['shape'])} "
                    f"| {_breakable(c['launched'])}{mark} | {c['us']:.1f} |")
        how.append(f"| {i} | {c['dram_read_mb']:.0f}&nbsp;/&nbsp;{c['dram_write_mb']:.0f} | {c['memory_sol_pct']:.0f} "
                   f"| {c['sm_sol_pct']:.0f} | {c['occupancy_pct']:.0f} | {c['registers']} | {c['bound']} |")
    note = (f"\n*{earlier} of these rows were profiled under an earlier launch plan: the kernel the plan launches "
            "for that shape now is named beside it, and the benchmark above times the plan of now.*\n") if earlier else ""
    return "\n".join(what) + "\n" + note + "\n" + "\n".join(how) + "\n"


def _launched_now(c: dict) -> str | None:
    """The kernel (as ncu names it) that one_read or the fused cross-entropy launches today for a
    profiled case's shape and dtype; None for other calls and torch's helpers."""
    if c["kernel"] not in ("one_read", "cross_entropy_fused") or not c["launched"].startswith("ladder::"):
        return None
    from ..ladder.launch import regs_plan
    plan = regs_plan(c["shape"][-1], 4 if c["dtype"] == "fp32" else 2)
    kind = "smem" if plan.smem else "regs"
    return f"ladder::softmax_online_{kind}" if c["kernel"] == "one_read" else f"ladder::cross_entropy_{kind}"


NCU_MIN_US = 5  # the few-microsecond helpers a call also launches (a fill, a scalar) are left out


def _ncu_op(kernel: str) -> str:
    if "cross_entropy" in kernel:
        return "cross_entropy"
    if kernel.startswith(("bn_", "torch_batch_norm")):
        return "batchnorm"
    return "softmax"


def _beats(v: dict, skip: str = "") -> str:
    """"; no slower than `a` in 3 of 4, `b` in 4 of 4" from a verdict row."""
    said = [f"`{r}` in {w} of {n}" for r, (w, n) in v["beats"].items() if r != skip]
    return f"; no slower than {', '.join(said)}" if said else ""


def claim(d: dict | None, op: str) -> str:
    """The verdict as bullets, one per dtype and method (BatchNorm: nested by pass), then where our kernel
    falls short, pipelined: the figures the prose would otherwise type."""
    if d is None:
        return ""
    ours = OURS[op]
    out, head = [], ""
    for v in verdict(d, op):
        span = f"`{ours}` at {_pct_range(v['pcts'])}% of copy over {v['cells']} cells{_beats(v)}."
        if v["pass"]:
            if head != f"- {v['dtype']}, {v['method']}:":
                head = f"- {v['dtype']}, {v['method']}:"
                out.append(head)
            out.append(f"    - {PASS_TITLE[v['pass']].replace(' alone', '')}: {span}")
        else:
            out.append(f"- {v['dtype']}, {v['method']}: {span}")
    cells = {v["dtype"]: v for v in verdict(d, op) if v["method"] == "pipelined"}
    theirs = RIVALS[op][0]
    if op == "batchnorm":
        out.append(f"\nWhere `{ours}` is slower than `{theirs}`, pipelined, in cells of at least 32 MB (in "
                   "brackets: torch's time over ours, below 1 where torch is faster):\n")
        counted: dict = {}
        for v in verdict(d, op):
            if v["method"] == "pipelined" and theirs in v["beats"]:
                w, n = v["beats"][theirs]
                lost, total = counted.get(v["dtype"], (0, 0))
                counted[v["dtype"]] = (lost + n - w, total + n)
        for dtype, groups in _slower_bn(d).items():
            lost, total = counted[dtype]
            out.append(f"- {dtype}, slower in {lost} of {total} cells:")
            for (layout, pass_), where in groups.items():
                out.append(f"    - {LAYOUT[layout]}, {PASS_TITLE[pass_]}: {', '.join(where)}.")
        return _keep_shapes("\n".join(out) + "\n")
    short = shortfalls(d, op)
    if short:
        out.append(f"\nWhere `{ours}` falls short, pipelined, in cells of at least 32 MB (in brackets: its % of "
                   f"copy, or torch's time over ours, below 1 where torch is faster):\n")
        for dtype, (below, slow) in short.items():
            n = cells[dtype]["cells"] if dtype in cells else len(below)
            out.append(f"- {dtype}:")
            if op in TARGET_90:
                out.append(f"    - below 90% of copy in {len(below)} of {n} cells: {', '.join(below)}." if below else
                           f"    - at 90% of copy or more in all {n} cells.")
            out.append(f"    - slower than `{theirs}` in {len(slow)} of {n} cells: {', '.join(slow)}." if slow else
                       f"    - never slower than `{theirs}`: at least its speed in all {n} cells.")
    return _keep_shapes("\n".join(out) + "\n")


def _keep_shapes(text: str) -> str:
    """Shapes in running text (512 x 65536) kept on one line, with what is said of them in brackets."""
    return re.sub(r"(?<=\d) \((?=\d)", "&nbsp;(", re.sub(r"(?<=\d) x (?=\d)", "&nbsp;x&nbsp;", text))


def _slower_bn(d: dict) -> dict:
    """BatchNorm, pipelined, big cells where ours took longer than torch's:
    dtype -> {(layout, pass): ["32 x 64 x 56 x 56 (0.76x)", ...]}, NCHW first, forward first."""
    theirs = RIVALS["batchnorm"][0]
    out: dict = {}
    for (dtype, method, label), ks in _cells(d, "batchnorm").items():
        o = ks.get(OURS["batchnorm"])
        if method != "pipelined" or not o or nbytes(o) < BIG or theirs not in ks or o["ms"] <= ks[theirs]["ms"]:
            continue
        out.setdefault(dtype, []).append(((list(LAYOUT).index(o["layout"]), PASSES.index(o["pass"])), o,
                                          f"{' x '.join(map(str, o['shape']))} ({_ratio(ks[theirs]['ms'] / o['ms'])})"))
    grouped: dict = {}
    for dtype, items in out.items():
        for _, o, text in sorted(items, key=lambda t: t[0]):
            grouped.setdefault(dtype, {}).setdefault((o["layout"], o["pass"]), []).append(text)
    return grouped


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
            slow.append(f"{label} ({_ratio(ks[theirs]['ms'] / ks[ours]['ms'])})")
    return out
