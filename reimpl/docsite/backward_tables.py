"""The ladder's backward rungs on the shared grid, rendered at build time from the `backward` pass of
results/ladder_bench.json (scripts/gpu/ladder_bench.py) and from results/backward_probe.json
(scripts/gpu/backward_probe.py):

    {% ladder_backward_grid %}    per rung, dtype and method: % of copy over the cells of at least
                                  32 MB beside Liger-Kernel's and torch's, and the cells among
                                  them where Liger's or torch's backward is faster
    {% ladder_backward DTYPE %}   every cell of at least 32 MB of one dtype, pipelined: % of copy of
                                  torch, Liger, the Triton rung and the CUDA rung, LayerNorm then
                                  RMSNorm
    {% ladder_backward_verdict %} per rung, the cells of at least 32 MB where Liger's backward is
                                  faster, over every dtype and method
    {% triton_backward_resources %} registers and stack frame a thread of the Triton backward's
                                  program per tile (results/triton_backward_resources.json)
    {% backward_probe %}          the CUDA backward's settings, each one's median % of copy over the
                                  probe's cells

% of copy counts the whole backward's copy-equivalent bytes (reimpl.checks.grid.backward_bytes).
"""
from __future__ import annotations

from statistics import median

from ..checks import grid
from .ladder_tables import BENCH, ITEMSIZE, MISSING, RESULTS, TABLE_METHOD, caption, load, newest_copy, nowrap, rows_stamp

PROBE = RESULTS / "backward_probe.json"
TRITON_RESOURCES = RESULTS / "triton_backward_resources.json"
# (ours, Liger's, torch's): each backward rung beside the peer and the torch op of its norm
TRIOS = (("row_held", "liger_layer_norm", "torch_layer_norm"), ("rms_row_held", "liger_rms_norm", "torch_rms_norm"),
         ("triton_ln", "liger_layer_norm", "torch_layer_norm"), ("triton_rms", "liger_rms_norm", "torch_rms_norm"))
SHOWN = 2  # cells named in a summary cell; the rest are counted
SHOWN_SHAPES = 5  # shapes named in a verdict line
SHORT = {"row_held": "LN", "rms_row_held": "RMS"}  # the probe table's column heads
SHORT_TRITON = {"triton_ln": "LN", "triton_rms": "RMS"}
_CMD = "python scripts/gpu/ladder_bench.py results/ladder_bench.json fp32,bf16,fp16 tall,wide,model backward"


def _rows(d: dict) -> list[dict]:
    return [r for r in d["rows"] if r["pass"] == "backward"]


def summary(d: dict) -> list[dict]:
    """One entry per (rung, dtype, method) timed: its % of copy over the large cells, Liger's and
    torch's there, the large cells where Liger's is faster and the cells of any size where torch's is."""
    rows = _rows(d)
    by = {(r["method"], r["dtype"], r["M"], r["N"], r["kernel"]): r for r in rows}
    out = []
    for ours, liger, torch_ in TRIOS:
        for dtype in ITEMSIZE:
            for method in d["methods"]:
                mine = [r for r in rows if r["kernel"] == ours and r["dtype"] == dtype and r["method"] == method]
                if not mine:
                    continue
                big = [r for r in mine if grid.large(r["M"], r["N"], ITEMSIZE[dtype])]

                def theirs(r, k):
                    return by.get((method, dtype, r["M"], r["N"], k))
                out.append({
                    "kernel": ours, "dtype": dtype, "method": method, "large": len(big),
                    "pct": [r["pct_copy"] for r in big],
                    "liger": [theirs(r, liger)["pct_copy"] for r in big if theirs(r, liger)],
                    "torch": [theirs(r, torch_)["pct_copy"] for r in big],
                    "slower_than_liger": [(r["M"], r["N"]) for r in big
                                          if theirs(r, liger) and r["ms"] > theirs(r, liger)["ms"]],
                    "slower_than_torch": [(r["M"], r["N"]) for r in big if r["ms"] > theirs(r, torch_)["ms"]],
                    "not_timed": [s for s in _large_cells(dtype) if s not in {(r["M"], r["N"]) for r in big}]})
    return out


def _large_cells(dtype: str) -> list[tuple[int, int]]:
    return [(M, N) for _, M, N in grid.cells(ITEMSIZE[dtype]) if grid.large(M, N, ITEMSIZE[dtype])]


def _range(v: list) -> str:
    """median (lowest–highest), the bracket kept on one line"""
    return f"{median(v):.0f} " + nowrap(f"({min(v):.0f}–{max(v):.0f})") if v else "not timed"


def _cells(cells: list) -> str:
    """How many, then the first SHOWN of them."""
    if not cells:
        return "0"
    return f"{len(cells)}: " + ", ".join(f"{M} × {N}" for M, N in cells[:SHOWN]) + (", …" if len(cells) > SHOWN else "")


def grid_table() -> str:
    d = load(BENCH)
    rows = _rows(d) if d else []
    if not rows:
        return MISSING.format(cmd=_CMD, file=BENCH.name)
    lines = [caption(f"% of copy, the whole backward (dX, dgamma, dbeta), over the shared grid's cells of at least "
                     f"{grid.LARGE >> 20} MB: median (lowest–highest) of each rung, of Liger-Kernel's backward and of "
                     "torch's on the same cells; on how many of those cells Liger's and torch's are faster, on "
                     "unrounded times (and the first of them in the benchmark's order, M × N)", rows_stamp(d, rows),
                     "pipelined (L2 as the previous call left it) and flushed (L2 emptied before each call), a row "
                     "each"),
             "| rung | dtype, method | % of copy | Liger's | torch's | Liger's faster | torch's faster |",
             "|---|---|---:|---:|---:|---|---|"]
    for s in summary(d):
        untimed = f" ({len(s['not_timed'])} not timed)" if s["not_timed"] else ""
        lines.append(f"| {nowrap('`' + s['kernel'] + '`')} | {s['dtype']}, {s['method']} | {_range(s['pct'])}"
                     f"{untimed} | {_range(s['liger'])} | {_range(s['torch'])} | {_cells(s['slower_than_liger'])} | "
                     f"{_cells(s['slower_than_torch'])} |")
    return "\n".join(lines) + "\n"


def cells_table(dtype: str) -> str:
    d = load(BENCH)
    rows = newest_copy([r for r in _rows(d) if r["dtype"] == dtype and r["method"] == TABLE_METHOD]) if d else []
    if not rows:
        return MISSING.format(cmd=_CMD, file=BENCH.name)
    cell = {(r["kernel"], r["M"], r["N"]): r["pct_copy"] for r in rows}
    out = []
    for norm, trio in (("LayerNorm", TRIOS[0::2]), ("RMSNorm", TRIOS[1::2])):
        kernels = [trio[0][2], trio[0][1], trio[1][0], trio[0][0]]  # torch, Liger, Triton, CUDA
        out += [caption(f"% of copy, the whole {norm} backward, {dtype}, every cell of at least "
                        f"{grid.LARGE >> 20} MB (M × N)", rows_stamp(d, rows), TABLE_METHOD),
                "| M × N | " + " | ".join(f"`{k}`" for k in kernels) + " |", "|---|" + "---:|" * len(kernels)]
        for M, N in sorted(_large_cells(dtype), key=lambda s: (s[1], s[0])):
            vals = [f"{cell[(k, M, N)]:.0f}" if (k, M, N) in cell else "not timed" for k in kernels]
            out.append(f"| {M} × {N} | " + " | ".join(vals) + " |")
        out.append("")
    return "\n".join(out)


def probe_summary(d: dict) -> dict:
    """(setting, kernel, dtype) -> median % of copy over the cells every setting timed."""
    rows = [r for r in d["rows"] if r["setting"] and r["kernel"] in ("row_held", "rms_row_held")]
    settings = list(d["settings"])
    common = {(r["dtype"], r["M"], r["N"]) for r in rows}
    for s in settings:
        common &= {(r["dtype"], r["M"], r["N"]) for r in rows if r["setting"] == s}
    out: dict = {}
    for r in rows:
        if (r["dtype"], r["M"], r["N"]) in common:
            out.setdefault((r["setting"], r["kernel"], r["dtype"]), []).append(r["pct_copy"])
    return {k: median(v) for k, v in out.items()}


def probe_table() -> str:
    d = load(PROBE)
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/backward_probe.py results/backward_probe.json", file=PROBE.name)
    med = probe_summary(d)
    cells = sorted({(r["dtype"], r["M"], r["N"]) for r in d["rows"]})
    dtypes = list(dict.fromkeys(dt for dt, _, _ in cells))
    cols = [(k, dt) for k in ("row_held", "rms_row_held") for dt in dtypes]
    lines = [caption(f"Median % of copy of the CUDA backward (LN: `row_held`'s, RMS: `rms_row_held`'s) over the "
                     f"probe's cells that every setting holds "
                     f"({len(cells)} cells in all, rows of 128 to 65536; a setting whose layout cannot hold a row "
                     "skips it); the first setting is the one committed", d, "pipelined"),
             "| setting | prefetch | max threads a block | max elements a thread | "
             + " | ".join(f"{SHORT[k]} {dt}" for k, dt in cols) + " |",
             "|---|---|---:|---:|" + "---:|" * len(cols)]
    for name, s in d["settings"].items():
        prefetch = "yes" if "-DBACK_PREFETCH=1" in s["options"] else "no"
        lines.append(f"| `{name}` | {prefetch} | {s['max_block']} | {s['ept']} | "
                     + " | ".join(f"{med[(name, k, dt)]:.0f}" for k, dt in cols) + " |")
    return "\n".join(lines) + "\n"


def verdict() -> str:
    """Per rung, over every dtype and both methods: on how many cells of at least 32 MB Liger-Kernel's
    backward is faster, which ones, and its median % of copy against Liger's."""
    d = load(BENCH)
    if d is None or not _rows(d):
        return MISSING.format(cmd=_CMD, file=BENCH.name)
    out = []
    for ours, liger, _ in TRIOS:
        mine = [s for s in summary(d) if s["kernel"] == ours]
        if not mine:
            continue
        total = sum(s["large"] for s in mine)
        lost = [c for s in mine for c in s["slower_than_liger"]]
        runs = len(mine)  # (dtype, method) pairs
        shapes = sorted(set(lost), key=lambda c: (-lost.count(c), c[1], c[0]))
        where = ", ".join(f"{M} × {N} ({lost.count((M, N))} of {runs})" for M, N in shapes[:SHOWN_SHAPES])
        if len(shapes) > SHOWN_SHAPES:
            where += f" and {len(shapes) - SHOWN_SHAPES} more shapes"
        pct = [p for s in mine for p in s["pct"]]
        theirs = [p for s in mine for p in s["liger"]]
        out.append(f"- `{ours}`: at least as fast as `{liger}` in {total - len(lost)} of {total} measurements "
                   f"(cell × dtype × method, cells of at least {grid.LARGE >> 20} MB)"
                   + (f"; slower on {where} (of the {runs} dtype and method pairs)" if lost else "")
                   + f". Median % of copy {median(pct):.0f}, Liger's {median(theirs):.0f}."
                   + (f" Not timed in {untimed} measurements: rows past what the rung's backward holds."
                      if (untimed := sum(len(s["not_timed"]) for s in mine)) else ""))
    return "\n".join(out) + "\n"


def triton_resources_table() -> str:
    d = load(TRITON_RESOURCES)
    if d is None:
        return MISSING.format(cmd="python scripts/triton_backward_resources.py results/triton_backward_resources.json",
                              file=TRITON_RESOURCES.name)
    cell = {(r["block"], r["dtype"], r["kernel"]): r for r in d["rows"]}
    cols = [(dt, k) for dt in dict.fromkeys(r["dtype"] for r in d["rows"]) for k in ("triton_ln", "triton_rms")]
    lines = [f"*Registers / stack bytes a thread of the Triton backward's dX program (`ln_bwd_dx`), per tile (its "
             f"columns: rows of half a tile plus one to a whole tile) at the warps the rung uses; Triton "
             f"{d['triton']}, compiled for {d['target']}, read by cuobjdump -res-usage ({d['cuobjdump']}), "
             f"{d['date']}. A stack frame lives in local memory.*\n",
             "| tile | warps | " + " | ".join(f"{dt} {SHORT_TRITON[k]}" for dt, k in cols) + " |",
             "|---:|---:|" + "---:|" * len(cols)]
    for block in sorted({r["block"] for r in d["rows"]}):
        first = cell[(block, cols[0][0], cols[0][1])]
        vals = [f"{cell[(block, dt, k)]['registers']} / {cell[(block, dt, k)]['stack_bytes']}" for dt, k in cols]
        lines.append(f"| {block} | {first['num_warps']} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"
