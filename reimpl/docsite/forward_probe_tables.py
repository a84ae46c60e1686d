"""The fast forward's knobs on its page, rendered at build time from the committed probe
(results/fast_forward_probe.json, scripts/gpu/forward_probe.py): the stream kernel's chunk and
stash, the group kernel's sets of rows, the register kernel against the stream kernel, and Nsight
Compute on the register kernel where rows are few.

    {% fast_probe PART KERNEL ... %}  % of copy per cell of the probe's PART (stream, wide, route, group),
                                      pipelined, one column per KERNEL as the probe names it; each row's
                                      best in bold
    {% fast_probe_ncu %}              the register kernel profiled on one few-row wide shape
"""
from __future__ import annotations

import re

from .ladder_tables import MISSING, RESULTS, caption, load

PROBE = RESULTS / "fast_forward_probe.json"
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
    return kernel


def cells(d: dict, part: str, method: str = "pipelined") -> dict:
    """(dtype, op, M, N) -> {kernel: % of copy} of one part of the probe, for one timing method."""
    out: dict = {}
    for r in d["parts"][part]["rows"]:
        if r["method"] == method:
            out.setdefault((r["dtype"], r["op"], r["M"], r["N"]), {})[r["kernel"]] = r["pct_copy"]
    return out


def fast_probe(arg: str) -> str:
    d = load(PROBE)
    if d is None:
        return _MISSING
    part, *kernels = arg.split()
    if part not in d["parts"] or not kernels:
        raise ValueError(f"fast_probe: a part of {sorted(d['parts'])} and kernels, not {arg!r}")
    lines = [caption(f"% of copy, forward, one column per variant: {d['parts'][part]['note']}. U is the stream "
                     f"kernel's chunk (vectors a thread loads at once), \"stash for B\" its shared memory sized for B "
                     f"blocks per SM, K the group kernel's sets of rows a warp; the row's best in bold; out, mean and "
                     f"rstd of every variant equal torch's", d, d["methods"]["pipelined"]),
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


def expand(kind: str, arg: str) -> str | None:
    """The directive's Markdown, or None where `kind` is not this module's."""
    if kind == "fast_probe" and arg:
        return fast_probe(arg)
    if kind == "fast_probe_ncu" and not arg:
        return fast_probe_ncu()
    return None
