"""The fast forward's knobs on its page, rendered at build time from the committed probes
(results/fast_forward_probe.json, results/lane_probe.json, results/lane_rows_probe.json;
scripts/gpu/forward_probe.py): the stream kernel's chunk and stash, the group kernel's sets of rows,
the register kernel against the stream kernel, the lane kernel against the kernels its rows took
before, and Nsight Compute on the register kernel where rows are few and on the lane kernel.

    {% fast_probe PART KERNEL ... %}  % of copy per cell of the probe's PART (stream, wide, route, group,
                                      lane, lane_rows), pipelined, one column per KERNEL as the probe
                                      names it; each row's best in bold
    {% fast_probe_ncu %}              the register kernel profiled on one few-row wide shape
    {% lane_ncu %}                    the lane kernel and the warp kernel before it, profiled on one shape
    {% lane_gain %}                   the cells of at least 32 MB the lane kernel takes: % of copy before
                                      it and with it, per dtype width and op, both methods
"""
from __future__ import annotations

import re

from ..checks import fast_routes, grid
from .ladder_tables import ITEMSIZE, MISSING, RESULTS, caption, load

PROBE = RESULTS / "fast_forward_probe.json"
LANE_PROBES = (RESULTS / "lane_probe.json", RESULTS / "lane_rows_probe.json")
_MISSING = MISSING.format(cmd="python scripts/gpu/forward_probe.py results/fast_forward_probe.json", file=PROBE.name)
OPS = {"layer_norm": "LayerNorm", "rms_norm": "RMSNorm"}


def label(kernel: str, part: str = "") -> str:
    """A column's heading: stream_U16_B2 -> "U 16, stash for 2"; stream_U16_B0 -> "U 16, no stash";
    group_K4 -> "K 4"; fast_plan -> what the plan ran when the probe ran (in `route`, the register
    kernel on every cell)."""
    m = re.fullmatch(r"stream_U(\d+)_B(\d+)", kernel)
    if m:
        return f"U {m[1]}, " + (f"stash for {m[2]}" if m[2] != "0" else "no stash")
    m = re.fullmatch(r"group_K(\d+)", kernel)
    if m:
        return f"K {m[1]}"
    if kernel == "fast_plan":
        return "register kernel" if part == "route" else "plan then"
    m = re.fullmatch(r"lane_W(\d+)(?:_S(\d+))?", kernel)
    if m:
        return f"lane, W {m[1]}" + (f", S {m[2]}" if m[2] else "")
    if kernel == "before":
        return "before (group or warp kernel)"
    return kernel


# what a column's knob means, for the columns a table shows
KNOBS = (("stream", "U is the stream kernel's chunk (vectors a thread loads at once), \"stash for B\" its shared "
                    "memory sized for B blocks per SM"),
         ("group", "K is the group kernel's sets of rows a warp"),
         ("lane", "W is the lane kernel's warps a block (S: sets of 32 rows a warp, where not 1)"))


def record_of(part: str) -> dict | None:
    """The committed probe that holds `part`, or the main probe (None where it is missing)."""
    for path in LANE_PROBES:
        d = load(path)
        if d is not None and part in d["parts"]:
            return d
    return load(PROBE)


def cells(d: dict, part: str, method: str = "pipelined") -> dict:
    """(dtype, op, M, N) -> {kernel: % of copy} of one part of the probe, for one timing method."""
    out: dict = {}
    for r in d["parts"][part]["rows"]:
        if r["method"] == method:
            out.setdefault((r["dtype"], r["op"], r["M"], r["N"]), {})[r["kernel"]] = r["pct_copy"]
    return out


def fast_probe(arg: str) -> str:
    part, *kernels = arg.split()
    d = record_of(part)
    if d is None:
        return _MISSING
    if part not in d["parts"] or not kernels:
        raise ValueError(f"fast_probe: a part of {sorted(d['parts'])} and kernels, not {arg!r}")
    knobs = [text for prefix, text in KNOBS if any(k.startswith(prefix) for k in kernels)]
    lines = [caption(f"% of copy, forward, one column per variant: {d['parts'][part]['note']}. "
                     + "".join(f"{text}; " for text in knobs)
                     + "the row's best in bold; out, mean and rstd of every variant equal torch's", d,
                     d["methods"]["pipelined"]),
             "| dtype, op | M×N | " + " | ".join(label(k, part) for k in kernels) + " |",
             "|---|---|" + "--:|" * len(kernels)]
    for (dtype, op, M, N), c in cells(d, part).items():
        missing = [k for k in kernels if k not in c]
        if missing:
            raise ValueError(f"fast_probe {part}: {dtype} {op} {M}x{N} has no {missing}")
        best = max(round(c[k]) for k in kernels)  # every cell that rounds to the best is bold
        vals = [f"**{c[k]:.0f}**" if round(c[k]) == best else f"{c[k]:.0f}" for k in kernels]
        lines.append(f"| {dtype}, {OPS[op]} | {M}×{N} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def fast_probe_ncu() -> str:
    d = load(PROBE)
    if d is None:
        return _MISSING
    n = d["ncu"]
    return (caption(f"Nsight Compute on {n['kernel']}, {n['shape']}", d, f"`{n['command']}`")
            + "| duration | DRAM throughput | compute (SM) throughput | achieved occupancy | registers | waves per SM "
              "| warp cycles per issued instruction |\n|--:|--:|--:|--:|--:|--:|--:|\n"
            + f"| {n['duration_us']:.1f} µs | {n['dram_throughput_pct']:.1f}% | {n['compute_throughput_pct']:.1f}% | "
              f"{n['achieved_occupancy_pct']:.1f}% | {n['registers']:.0f} | {n['waves_per_sm']:.2f} | "
              f"{n['warp_cycles_per_issued_instruction']:.1f} |\n")


def lane_ncu() -> str:
    d = load(LANE_PROBES[0])
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/forward_probe.py results/lane_probe.json lane", file="lane_probe.json")
    profiles = d["ncu"]
    rows = (("duration", lambda n: f"{n['duration_us']:.1f} µs"),
            ("instructions executed (warp)", lambda n: f"{n['executed_instructions'] / 1e6:.1f} M"),
            ("DRAM throughput, % of peak", lambda n: f"{n['dram_throughput_pct']:.1f}%"),
            ("compute (SM) throughput, % of peak", lambda n: f"{n['compute_throughput_pct']:.1f}%"),
            ("achieved occupancy", lambda n: f"{n['achieved_occupancy_pct']:.1f}%"),
            ("registers per thread", lambda n: f"{n['registers']:.0f}"),
            ("warp cycles per issued instruction", lambda n: f"{n['warp_cycles_per_issued_instruction']:.1f}"))
    heads = [n["kernel"].split("<")[0].replace("fast_layer_norm_", "").replace("_", " ") for n in profiles]
    commands = [n["command"] for n in profiles]
    shared = commands[-1]  # the lane kernel's; the others differ by a word appended
    method = f"`{shared}`" + "".join(f", and with `{c[len(shared):].strip()}` appended for the {h}"
                                     for c, h in zip(commands[:-1], heads) if c.startswith(shared) and c != shared)
    if not all(c.startswith(shared) for c in commands):
        method = "; ".join(f"`{c}`" for c in commands)
    lines = [caption(f"Nsight Compute on the kernel the rows took before the lane kernel and on the lane kernel, "
                     f"{profiles[0]['shape']}; the instances: "
                     + ", ".join(f"`{n['kernel']}`" for n in profiles), d, method),
             "| | " + " | ".join(heads) + " |", "|---|" + "--:|" * len(profiles)]
    lines += [f"| {name} | " + " | ".join(fmt(n) for n in profiles) + " |" for name, fmt in rows]
    return "\n".join(lines) + "\n"


def lane_gain_cells(method: str) -> dict:
    """(16-bit or fp32, op) -> [(before, lane)] % of copy, over the cells of at least 32 MB of both lane
    probes that the plan now gives the lane kernel (on the probes' 132 SMs), the plan's W."""
    out: dict = {}
    for path in LANE_PROBES:
        d = load(path)
        for part in (d or {"parts": {}})["parts"]:
            for (dtype, op, M, N), c in cells(d, part, method).items():
                width = ITEMSIZE[dtype]
                if not grid.large(M, N, width) or not fast_routes.takes_lanes(dtype, op, M, N, 132):
                    continue
                key = ("16-bit" if width == 2 else "fp32", OPS[op])
                out.setdefault(key, []).append((c["before"], c[f"lane_W{fast_routes.lane_warps()}"]))
    return out


def _span(values: list) -> str:
    low, high = f"{min(values):.0f}", f"{max(values):.0f}"
    return f"{low}%" if low == high else f"{low}–{high}%"


def lane_gain() -> str:
    d = load(LANE_PROBES[0])
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/forward_probe.py results/lane_probe.json lane", file="lane_probe.json")
    lines = [caption("% of copy on the probes' cells of at least 32 MB that the plan gives the lane kernel: the "
                     "kernel those rows took before it, and the lane kernel (lowest to highest)", d,
                     "both, pipelined and L2 flushed"),
             "| rows | method | cells | before | lane kernel |", "|---|---|--:|--:|--:|"]
    for method in ("pipelined", "flushed"):
        for (width, op), pairs in sorted(lane_gain_cells(method).items()):
            b, lane = [p[0] for p in pairs], [p[1] for p in pairs]
            lines.append(f"| {width} {op} | {method} | {len(pairs)} | {_span(b)} | {_span(lane)} |")
    return "\n".join(lines) + "\n"


def expand(kind: str, arg: str) -> str | None:
    """The directive's Markdown, or None where `kind` is not this module's."""
    if kind == "fast_probe" and arg:
        return fast_probe(arg)
    if kind == "fast_probe_ncu" and not arg:
        return fast_probe_ncu()
    if kind == "lane_ncu" and not arg:
        return lane_ncu()
    if kind == "lane_gain" and not arg:
        return lane_gain()
    return None
