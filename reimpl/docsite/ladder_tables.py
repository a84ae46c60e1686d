"""The ladder pages' tables and charts, rendered at build time from the committed GPU results
(results/ladder_errors.json, results/ladder_bench.json), the stated bounds (reimpl/ladder/accuracy.py)
and the registry of rungs (reimpl/ladder/registry.py).

    {% rung_index %}              every rung: its idea, whose idea, % of copy over the shared grid, bound,
                                  run line
    {% ladder_errors RUNG %}      worst error per input family and dtype, its bound, distance to torch
    {% ladder_bandwidth DTYPE %}  GB/s and % of copy of every rung, torch and the copy, forward, on the
                                  grid's cells SHOWN, and each kernel's median over the large cells
    {% ladder_training DTYPE %}   forward+backward GB/s of the Triton rungs and torch (the model widths)
    {% ladder_chart DTYPE %}      the forward table as a bar chart: matplotlib at build time, inline SVG
                                  (no JavaScript, no CDN), its numbers in a <details> table under it
    {% ladder_stamp %}            device, versions, date and method of the runs

Every table opens with a caption line (`caption`): what it holds and in what unit, how it was
measured, on which device and when (the JSON's stamp). results/ladder_bench.json holds the shared
grid (reimpl/checks/grid.py) as scripts/gpu/ladder_bench.py writes it: both methods, every row
naming its method; the tables here read its pipelined rows.

The benchmark table and chart (`bench_table`, `bench_chart`) also serve reimpl.fast's page
(reimpl/docsite/fast_tables.py), each with its own kernel order. The charts follow the page's
palette (light "default" and dark "slate"): the figure is transparent, and its text, axes, grid and
copy line are drawn in a placeholder colour that becomes `currentColor` in the SVG, so they take the
colour of the text around them; the bars' colours are mid-tones that read on white and on slate.
"""
from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path
from statistics import median

from ..checks import grid
from ..ladder import accuracy, registry

RESULTS = Path(__file__).resolve().parents[2] / "results"
ERRORS = RESULTS / "ladder_errors.json"
BENCH = RESULTS / "ladder_bench.json"
# the order a reader climbs, from the registry (LayerNorm rungs, then RMSNorm's); torch and the copy
# are the yardsticks at the end
YARDSTICKS = ("torch_layer_norm", "torch_rms_norm", "copy")
ORDER = registry.table_order(registry.RUNGS) + YARDSTICKS
PEERS = ("apex_layer_norm", "liger_layer_norm", "liger_rms_norm", "quack_layer_norm", "quack_rms_norm")
ITEMSIZE = {"fp32": 4, "bf16": 2, "fp16": 2}
# the grid's cells the bandwidth tables and charts show: tall rows of these widths (about 256 MB
# each), and one few-row wide cell: short, middle and long rows
SHOWN_N = (256, 4096, 65536)
SHOWN_WIDE = ((1024, 12288),)
TABLE_METHOD = "pipelined"
INDEX_DTYPES = ("fp32", "bf16")
RUN_PREFIX = "pytest tests/gpu/test_ladder_gpu.py -k "  # every rung's `run` line starts so (a test checks)
MISSING = "*Not measured yet: run `{cmd}` on a GPU and commit `{file}`.*\n"


def load(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def rows_stamp(d: dict, rows: list | None = None) -> dict:
    """d's stamp as the runs of `rows` (every row by default) give it: results/ladder_bench.json
    keeps each row's run, and a table's rows may come from runs on other devices or dates (each
    differing field then lists every value, in run order)."""
    runs = [d["runs"][i] for i in sorted({r["run"] for r in (d["rows"] if rows is None else rows)})] or [d]
    return {**d, **{k: " and ".join(dict.fromkeys(str(run[k]) for run in runs)) for k in ("device", "torch", "cuda", "date")}}


def stamp() -> str:
    parts = []
    for name, path in (("errors", ERRORS), ("bandwidth", BENCH)):
        d = load(path)
        if d and "runs" in d:
            d = rows_stamp(d)
        if d:
            method = f"; {d['method']}" if "method" in d else f"; {TABLE_METHOD} in the tables"
            parts.append(f"{name}: {d['device']}, torch {d['torch']}, CUDA {d['cuda']}, {d['date']}{method}")
    return ("*" + ". ".join(parts) + ".*\n") if parts else ""


def errors(rung: str) -> str:
    d = load(ERRORS)
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/ladder_errors.py results/ladder_errors.json", file=ERRORS.name)
    worst: dict = {}
    runs = set()
    for r in d["rows"]:
        if r["rung"] != rung:
            continue
        runs.add(r.get("run", 0))
        k = (r["family"], r["dtype"])
        w = worst.setdefault(k, {"rel": 0.0, "ulp": 0.0, "same": 1.0, "at": ""})
        if r["rel_err"] >= w["rel"]:
            w["rel"], w["at"] = r["rel_err"], f"{r['M']}x{r['N']}"
        w["ulp"] = max(w["ulp"], r["max_ulp_to_torch"])
        w["same"] = min(w["same"], r["identical_to_torch"])
    if not worst:
        if rung not in registry.BY_NAME:
            raise ValueError(f"{rung}: no rows in {ERRORS.name}")
        # a rung added since the last GPU run (its GPU test holds it to its bound meanwhile)
        return MISSING.format(cmd="python scripts/gpu/ladder_errors.py results/ladder_errors.json", file=ERRORS.name)
    lines = [caption(f"Worst error of `{rung}` per input family and dtype over every shape measured: relative "
                     "error |y − ref| / max(|ref|, 1) (no unit), ulps from torch's output, % of shapes "
                     "bit-identical to torch", errors_stamp(d, runs), "y against a float64 reference on the GPU, "
                     "`python scripts/gpu/ladder_errors.py`"),
             # six columns: the table fits the text column instead of running past it
             "| family | dtype | worst error (rel.), at M x N | stated bound | max ulps from torch "
             "| bit-identical to torch (worst shape) |", "|---|---|---|---|---:|---:|"]
    reasons: dict[str, list[str]] = {}
    for (family, dtype), w in sorted(worst.items()):
        limit, why = accuracy.bound(rung, dtype, family)
        lim = "none" if limit == float("inf") else f"{limit:.3g}"
        reasons.setdefault(why, []).append(f"{family}/{dtype}")
        lines.append(f"| {family} | {dtype} | {w['rel']:.3g} at {w['at']} | {lim} | {w['ulp']:.3g} "
                     f"| {100 * w['same']:.1f}% |")
    lines.append("\nWhere the bounds come from:\n")
    lines += [f"- {why} ({', '.join(cases)})" for why, cases in reasons.items()]
    return "\n".join(lines) + "\n"


def errors_stamp(d: dict, runs: set) -> dict:
    """The stamp of the run a rung's error rows come from (the file's own, for a file of one run)."""
    if "runs" not in d:
        return d
    assert len(runs) == 1, f"a rung's error rows come from one run, not {sorted(runs)}"
    return d["runs"][runs.pop()]


def nowrap(markdown: str) -> str:
    """A table cell's name kept on one line (the theme breaks code anywhere)."""
    return f'<span style="white-space: nowrap">{markdown}</span>'


def shown_cells(dtype: str) -> list[tuple[int, int]]:
    """The (M, N) the bandwidth tables and charts show for one dtype."""
    return [(grid.tall_rows(N, ITEMSIZE[dtype]), N) for N in SHOWN_N] + list(SHOWN_WIDE)


def _bench_rows(dtype: str, pass_: str):
    """The pipelined rows of one dtype and pass of results/ladder_bench.json, or None."""
    d = load(BENCH)
    if d is None:
        return None
    rows = [r for r in d["rows"] if r["dtype"] == dtype and r["pass"] == pass_ and r["method"] == TABLE_METHOD]
    return newest_copy(rows)


def newest_copy(rows: list) -> list:
    """`rows` with one copy a cell, the newest run's: a cell keeps an older run's copy beside the
    older rows timed against it (their pct_copy already holds it)."""
    newest: dict = {}
    for r in rows:
        if r["kernel"] == "copy" and r["run"] >= newest.get((r["M"], r["N"]), -1):
            newest[(r["M"], r["N"])] = r["run"]
    return [r for r in rows if r["kernel"] != "copy" or r["run"] == newest[(r["M"], r["N"])]]


def large_summary(rows: list, dtype: str, field: str = "pct_copy") -> dict:
    """kernel -> (median, lowest, cells) of its `field` (% of copy, or GB/s) over the large cells
    (grid.large) of `rows`."""
    out: dict = {}
    for r in rows:
        if grid.large(r["M"], r["N"], ITEMSIZE[dtype]):
            out.setdefault(r["kernel"], []).append(r[field])
    return {k: (median(v), min(v), len(v)) for k, v in out.items()}


def bench_table(rows, order, pct: bool, summary: dict | None = None) -> str:
    """Kernels down, shapes across (GB/s, with % of copy where `pct`); `summary` (large_summary's)
    adds a last column: the median % of copy over the large cells, the lowest, and how many."""
    shapes = sorted({(r["M"], r["N"]) for r in rows}, key=lambda s: s[0] * s[1])
    kernels = [k for k in order if any(r["kernel"] == k for r in rows)]
    cell = {(r["kernel"], r["M"], r["N"]): r for r in rows}
    head = "| kernel | " + " | ".join(f"{M} x {N}" for M, N in shapes) + " |"
    lines = [head, "|---|" + "---:|" * len(shapes)]
    if summary is not None:
        lines = [head + f" ≥ {grid.LARGE >> 20} MB cells: median % (lowest; cells) |", lines[1] + "---:|"]
    for k in kernels:
        vals = []
        for M, N in shapes:
            r = cell.get((k, M, N))
            if r is None:
                vals.append("not timed")
            else:
                vals.append(f"{r['gbps']:.0f}" + (f" ({r['pct_copy']:.0f}%)" if pct else ""))
        if summary is not None:
            med, low, n = summary.get(k, (None, None, 0))
            vals.append(f"{med:.0f} ({low:.0f}; {n})" if n else "not timed")
        lines.append(f"| {nowrap(f'`{k}`')} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def bandwidth(dtype: str) -> str:
    rows = _bench_rows(dtype, "forward")
    if rows is None:
        return MISSING.format(cmd="python scripts/gpu/ladder_bench.py results/ladder_bench.json", file=BENCH.name)
    d = load(BENCH)
    shown = [r for r in rows if (r["M"], r["N"]) in shown_cells(dtype)]
    return (caption(f"GB/s and % of copy, forward, {dtype}: the ladder's kernels, torch and the peers on "
                    f"{len(shown_cells(dtype))} cells of the shared grid, and each kernel's median % of copy over "
                    f"all the grid's cells of at least {grid.LARGE >> 20} MB; GB/s counts one read of x and one "
                    "write of y; each % of copy is against the copy of its own run, the copy row shows the newest"
                    + ("" if len({r["run"] for r in shown}) == 1 else
                       " (the rows come from several runs, so a row's % need not follow from that copy's GB/s)"),
                    rows_stamp(d, rows), PIPELINED)
            + bench_table(shown, ORDER + PEERS, pct=True, summary=large_summary(rows, dtype)))


def training(dtype: str) -> str:
    rows = _bench_rows(dtype, "forward+backward")
    if rows is None:
        return MISSING.format(cmd="python scripts/gpu/ladder_bench.py results/ladder_bench.json", file=BENCH.name)
    d = load(BENCH)
    rows = [r for r in rows if r["kernel"] != "copy"]  # a copy moves 2 of the 5 counted bytes an element: no yardstick
    return (caption(f"GB/s, forward and backward through autograd, {dtype}: the Triton rungs and torch at the "
                    "widths of real models (4096 rows); GB/s counts x and y for the forward, x, dy and dx for "
                    "the backward", rows_stamp(d, rows), PIPELINED)
            + bench_table(rows, ORDER + PEERS, pct=False))


def chart(dtype: str) -> str:
    """The ladder's forward bandwidth per kernel and shown cell, as bars, with its table under it
    (render.py puts both in a diagram box)."""
    rows = _bench_rows(dtype, "forward")
    if rows is None:
        return ""
    rows = [r for r in rows if (r["M"], r["N"]) in shown_cells(dtype) and r["kernel"] in ORDER]  # peers: the table
    d = rows_stamp(load(BENCH), rows)
    what = f"forward, {dtype}: the ladder's kernels and torch"
    return bench_chart(rows, ORDER, f"ladder-{dtype}",
                       f"LayerNorm and RMSNorm {what}\n{PIPELINED}, {d['device']}, {d['date']}",
                       "bandwidth (GB/s): x read + y written",
                       caption(f"GB/s per kernel and shape, as plotted, {what}", d, PIPELINED)
                       + bench_table(rows, ORDER, pct=False))


# --- the charts ---------------------------------------------------------------------------------
PIPELINED = "pipelined (L2 not flushed)"
FLUSHED = "L2 flushed before each call"
# text, axes, grid and the copy's line are drawn in INK, which becomes currentColor in the SVG
INK = "#010203"
# one colour per kernel wherever it is drawn; mid-tones that read on white and on slate. torch in
# blues, reimpl.fast in greens, the ladder's rungs in the other hues (Tableau's 20, darkened where
# light ones vanish on white)
COLOURS = {
    "torch_layer_norm": "#4e79a7", "torch_rms_norm": "#7fb0dc",
    "torch_layer_norm_dx": "#4e79a7", "torch_rms_norm_dx": "#7fb0dc",
    "fast_layer_norm": "#3d9a3a", "fast_rms_norm": "#8ccf7e",
    "fast_layer_norm_dx": "#3d9a3a", "fast_rms_norm_dx": "#8ccf7e",
    "naive": "#8c8c8c", "warp_sums": "#f28e2b", "warp_welford": "#e15759", "block_welford": "#59a1a0",
    "block_cached": "#b07aa1", "block_vec": "#d4a72c", "apex": "#9c755f", "warp_regs": "#ff9da7",
    "triton_ln": "#59a14f", "rms_warp_sumsq": "#f1a35f", "triton_rms": "#9bd18e",
    "row_held": "#17becf", "rms_row_held": "#9edae5",
    "fast_layer_norm_backward": "#3d9a3a", "fast_rms_norm_backward": "#8ccf7e",
    "torch_layer_norm_backward": "#4e79a7", "torch_rms_norm_backward": "#7fb0dc",
    "liger_layer_norm_backward": "#e15759", "liger_rms_norm_backward": "#ff9da7",
}
SPARE = ("#bab0ac", "#d37295", "#a0cbe8", "#86bcb6")
COPY_LABEL = "copy (x.clone())"


def caption(what: str, d: dict, method: str) -> str:
    """The caption line above a table: what it holds (with its unit), how it was measured, on
    which device and when, from the JSON's stamp."""
    return f"*{what}. Method: {method}. {d['device']}, torch {d['torch']}, {d['date']}.*\n\n"


def bench_chart(rows: list, order, name: str, title: str, ylabel: str, data: str) -> str:
    """Grouped bars, one group per shape and one bar per kernel (GB/s), the copy of each shape a
    dashed line across its group, labelled above the group's tallest bar; a legend under the plot.
    Then `data` (Markdown: the caption and table of the plotted numbers) one click away."""
    return _svg(_figure(rows, order, name, title, ylabel), name, title) + _data(data)


def _figure(rows: list, order, name: str, title: str, ylabel: str) -> str:
    """The chart drawn by matplotlib (Agg), as its SVG text."""
    import io

    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    shapes = sorted({(r["M"], r["N"]) for r in rows}, key=lambda s: s[0] * s[1])
    kernels = [k for k in order if k != "copy" and any(r["kernel"] == k for r in rows)]
    cell = {(r["kernel"], r["M"], r["N"]): r["gbps"] for r in rows}
    spare = iter(SPARE)
    colour = {k: COLOURS.get(k) or next(spare) for k in kernels}
    with matplotlib.rc_context(chart_style(name, 11.5)):
        fig = Figure(figsize=(10, 5.8 + 0.25 * (len(kernels) // 4)), layout="constrained")
        ax = fig.add_subplot()
        width = 0.86 / len(kernels)
        tops = []
        for i, (M, N) in enumerate(shapes):
            here = [cell[k, M, N] for k in kernels if (k, M, N) in cell]
            copy = cell.get(("copy", M, N))
            tops.append(max(here + ([copy] if copy else [])))
        for j, k in enumerate(kernels):
            at = [(i + (j - (len(kernels) - 1) / 2) * width, cell[k, M, N])
                  for i, (M, N) in enumerate(shapes) if (k, M, N) in cell]
            ax.bar([x for x, _ in at], [v for _, v in at], width * 0.92, color=colour[k], label=k, zorder=2)
        for i, (M, N) in enumerate(shapes):
            copy = cell.get(("copy", M, N))
            if copy:
                ax.hlines(copy, i - 0.46, i + 0.46, colors=INK, linestyles=(0, (4, 2)), linewidth=1.4, zorder=3)
                # above every bar of the group and above the line: it cannot cover a bar
                ax.annotate(f"copy {copy:.0f}", (i, tops[i]), xytext=(0, 4), textcoords="offset points",
                            ha="center", va="bottom", fontsize=10, zorder=4)
        ax.set_ylim(0, max(tops) * 1.13)
        ax.set_xlim(-0.55, len(shapes) - 0.45)
        # more shapes than fit side by side: the labels on two lines (M over x N)
        sep = "\nx " if len(shapes) > 8 else " x "
        ax.set_xticks(range(len(shapes)), [f"{M}{sep}{N}" for M, N in shapes])
        ax.tick_params(axis="x", length=0)
        ax.yaxis.grid(True, color=INK, alpha=0.18, linewidth=0.8)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        ax.set_title(title, loc="left", fontsize=13, fontweight="bold", gid=f"{name}-title")
        ax.set_xlabel("shape: M x N (rows x elements per row)", gid=f"{name}-xlabel")
        ax.set_ylabel(ylabel, gid=f"{name}-ylabel")
        handles, labels = ax.get_legend_handles_labels()
        handles.append(Line2D([], [], color=INK, linestyle=(0, (4, 2)), linewidth=1.4))
        labels.append(COPY_LABEL)
        legend_below(fig, handles, labels, name)
        # saved inside the rc context: svg.fonttype and svg.hashsalt are read when the SVG is written
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return buf.getvalue()


def chart_style(name: str, font_size: float) -> dict:
    """matplotlib's settings for every chart here: text as text in INK (made currentColor by _svg), no
    backgrounds (the page's palette shows through), ids salted by the chart's name."""
    return {"svg.fonttype": "none", "svg.hashsalt": name, "font.family": "sans-serif", "font.size": font_size,
            "text.color": INK, "axes.labelcolor": INK, "axes.edgecolor": INK, "xtick.color": INK,
            "ytick.color": INK, "figure.facecolor": "none", "axes.facecolor": "none",
            "savefig.facecolor": "none", "savefig.edgecolor": "none", "legend.frameon": False}


def legend_below(fig, handles, labels, name: str, fontsize: float = 11) -> None:
    """The legend under the plot, in as many columns as fit the figure's width; matplotlib fills a
    legend column by column, so the entries are ordered for it to read by rows."""
    for ncols in range(min(5, len(labels)), 0, -1):
        rows_in = [len(range(c, len(labels), ncols)) for c in range(ncols)]
        at = [r * ncols + c for c in range(ncols) for r in range(rows_in[c])]
        legend = fig.legend([handles[i] for i in at], [labels[i] for i in at], loc="outside lower center",
                            ncols=ncols, fontsize=fontsize, handlelength=2.2, columnspacing=1.6)
        fig.draw_without_rendering()
        if legend.get_window_extent().width <= fig.bbox.width - 8 or ncols == 1:
            break
        legend.remove()
    legend.set_gid(f"{name}-legend")


def _svg(svg: str, name: str, title: str) -> str:
    """matplotlib's SVG made inline, the same bytes on every build: no date or creator, ids salted by
    the chart's name (unique on the page), no XML prologue, no page-wide <style>, text in the page's
    font and INK as currentColor."""
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r"<style type=\"text/css\">.*?</style>\s*", "", svg, flags=re.S)
    svg = re.sub(r"<defs>\s*</defs>\s*", "", svg)
    svg = re.sub(r"font-family: [^;\"]*", "font-family: var(--md-text-font-family, sans-serif)", svg)
    svg = svg.replace(INK, "currentColor")
    # ids: matplotlib's own ("figure_1", "patch_3") repeat from chart to chart on a page, so keep
    # only the referenced ones (clip paths and markers, hashed with the salt) and our gids
    used = set(re.findall(r"(?:url\(|href=\")#([^)\"]+)", svg))
    svg = re.sub(r' id="([^"]+)"', lambda m: m.group(0) if m.group(1) in used or m.group(1).startswith(f"{name}-")
                 else "", svg)
    svg = svg.replace(" \n", " ")  # path data: one line per element
    vb = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg)
    w = float(vb.group(1))
    head = (f"<svg xmlns='http://www.w3.org/2000/svg' xmlns:xlink='http://www.w3.org/1999/xlink' "
            f"class='diagram chart' data-diagram='{name}' role='img' aria-labelledby='{name}-svgtitle' "
            f"viewBox='{vb.group(0)[9:-1]}' width='100%' "
            f"style='max-width:{w:.0f}px;min-width:{0.78 * w:.0f}px;height:auto' "
            f"stroke-linejoin='round'><title id='{name}-svgtitle'>{escape(title.replace(chr(10), '; '))}</title>")
    # narrower than min-width (a phone), the diagram box scrolls rather than shrink the text past reading
    svg = head + svg[svg.index(">") + 1:]
    # a raw HTML block ends at a blank line: keep none
    return re.sub(r"\n\s*\n", "\n", svg.strip())


def _data(markdown_text: str) -> str:
    """The numbers a chart plots, one click away. The chart sits in a raw HTML block, where Markdown
    is not parsed, so the caption and table are rendered to HTML here."""
    import markdown
    # kernel names on one line (not broken mid-word); the shapes in the header may wrap at spaces, so
    # the table fits the box
    html = markdown.markdown(markdown_text, extensions=["tables"]).replace("<td><code>",
                                                                          "<td style='white-space: nowrap'><code>")
    html = re.sub(r"\n\s*\n", "\n", html)
    return f"<details class='abstract chart-data'><summary>Data</summary>{html}</details>"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _passes_stamp(d: dict, passes: tuple) -> dict:
    """rows_stamp over several passes, the device and date of each pass named apart."""
    stamps = {p: rows_stamp(d, [r for r in d["rows"] if r["pass"] == p]) for p in passes}
    return {**stamps[passes[0]],
            "device": "; ".join(f"{p}: {st['device']} ({st['date']})" for p, st in stamps.items()),
            "torch": " and ".join(dict.fromkeys(st["torch"] for st in stamps.values())),
            "date": " and ".join(dict.fromkeys(st["date"] for st in stamps.values()))}


def _rate(summaries: dict, name: str) -> str:
    """The median GB/s per index dtype, or nothing where none was timed."""
    vals = _index_speed(summaries, name, low=False)
    return " / ".join(vals) + " GB/s" if any(v != "not timed" for v in vals) else ""


def _index_speed(summaries: dict, name: str, low: bool = True) -> list[str]:
    """A rung's median per index dtype, with its lowest in brackets where `low`."""
    out = []
    for dt in INDEX_DTYPES:
        med, least, n = summaries.get(dt, {}).get(name, (None, None, 0))
        out.append(("not timed" if not n else f"{med:.0f} ({least:.0f})" if low else f"{med:.0f}"))
    return out


def rung_index(page: str = "") -> str:
    """One row per rung of the registry, in climbing order: its idea, whose idea it is, its forward
    median % of copy over the shared grid's large cells per dtype (results/ladder_bench.json,
    pipelined), its stated bound on normal rows, and the line that runs its GPU test. A rung is
    linked to its section where `page` (the Markdown of the page the index is on) has an anchor of
    its name."""
    d = load(BENCH)
    summaries = {dt: large_summary(_bench_rows(dt, "forward"), dt) for dt in INDEX_DTYPES} if d else {}
    backwards = {dt: large_summary(_bench_rows(dt, "backward"), dt) for dt in INDEX_DTYPES} if d else {}
    rates = {p: {dt: large_summary(_bench_rows(dt, p), dt, "gbps") for dt in INDEX_DTYPES} if d else {}
             for p in ("forward", "backward")}
    anchors = set(re.findall(r"\{ #([\w-]+) \}", page))
    head = (caption(f"Every rung: its idea and whose it is, its forward's % of copy over the shared grid's cells of "
                    f"at least {grid.LARGE >> 20} MB (median, lowest) and GB/s (median), and under them, for a rung "
                    "with a backward, the whole backward's; the stated error bound of its forward (relative, no "
                    "unit)",
                    _passes_stamp(d, ("forward", "backward")), PIPELINED) if d else "")
    # no step number: the sections below number only the rungs they teach (one is an exercise)
    lines = [head, "| rung, its GPU test | the idea it adds | whose idea | % of copy (lowest), GB/s; "
             + " / ".join(INDEX_DTYPES) + " | stated bound, normal rows (fp32 / bf16) |",
             "|---|---|---|---:|---|"]
    rules = {}
    for e in registry.RUNGS:
        name = f"[`{e.name}`](#{e.name})" if e.name in anchors else f"`{e.name}`"
        name = nowrap(name)
        if e.rms_norm:
            name += " (RMSNorm)"
        name += f"<br>test: `-k {e.run.removeprefix(RUN_PREFIX)}`"
        speed = " / ".join(_index_speed(summaries, e.name)) + "<br>" + _rate(rates["forward"], e.name)
        if e.backward is not None:
            speed += ("<br>backward: " + " / ".join(_index_speed(backwards, e.name)) + "<br>"
                      + _rate(rates["backward"], e.name))
        (b32, why), (b16, _) = (accuracy.bound(e.name, dt, "normal") for dt in ("float32", "bfloat16"))
        rules.setdefault(e.bound_family, why)
        lines.append(f"| {name} | {_cell(e.idea)} | {_cell(e.credit)} | {speed}"
                     + f" | {b32:.3g} / {b16:.3g} ({e.bound_family}) |")
    source = (f"Bandwidth from `results/{BENCH.name}`: each dtype's median over the cells of at least "
              f"{grid.LARGE >> 20} MB, the lowest in brackets" if d else
              MISSING.format(cmd="python scripts/gpu/ladder_bench.py results/ladder_bench.json",
                             file=BENCH.name).strip())
    notes = [f"\n*{source} (`naive` is timed only where M x N ≤ {grid.SLOW_MOST:,}: one thread a row is too "
             "slow for the rest); the [bandwidth tables](index.md#bandwidth) give shapes. Bounds are on "
             "|y − ref| / max(|ref|, 1) "
             "against a float64 reference, u being float32's unit roundoff (2^-24); the other input families "
             "have their own (see each rung's table). "
             f"Every row comes from `reimpl/ladder/registry.py`; a rung's GPU tests run with `{RUN_PREFIX}...`, the `-k` under its name.*\n",
             "Bound families, on normal rows:\n"]
    notes += [f"- `{rule}`: {why}" for rule, why in rules.items()]
    return "\n".join(lines) + "\n" + "\n".join(notes) + "\n"
