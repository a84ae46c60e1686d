"""Headline figures read off Nsight Compute's text report (`ncu --section ...` printed to stdout):
each profiled launch's header line `  void name<...>(...) (grid)x(block), ...`, then metric lines
`Name  [unit]  value`. The probes that profile a kernel store these figures beside their timings."""
from __future__ import annotations

import re

FIGURES = {"duration_us": "Duration", "dram_throughput_pct": "DRAM Throughput",
           "compute_throughput_pct": "Compute (SM) Throughput", "achieved_occupancy_pct": "Achieved Occupancy",
           "registers": "Registers Per Thread", "waves_per_sm": "Waves Per SM",
           "warp_cycles_per_issued_instruction": "Warp Cycles Per Issued Instruction"}
_HEADER = re.compile(r"^\s+void ((?:[\w<>]+::)*(\w+)<[^>]*>)\(.*?\) \(([\d, ]+)\)x\(([\d, ]+)\)", re.M)


def figures(section: str) -> dict:
    """FIGURES of one launch's part of a report (those it holds)."""
    out = {}
    for key, name in FIGURES.items():
        m = re.search(r"^\s*" + re.escape(name) + r"\s+(?:\S+\s+)?([0-9.,]+)\s*$", section, re.M)
        if m:
            out[key] = float(m[1].replace(",", ""))
    return out


def launches(text: str) -> list[dict]:
    """Each profiled launch of a report: its kernel (name with template arguments), short name, grid,
    block and FIGURES."""
    heads = list(_HEADER.finditer(text))
    out = []
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out.append({"kernel": h[1], "name": h[2], "grid": h[3].replace(" ", ""), "block": h[4].replace(" ", ""),
                    **figures(text[h.end():end])})
    return out


def split_args(args: list[str]) -> tuple[list[str], list[str] | None]:
    """A probe's command line without `--ncu FILE DTYPE M N`, and those four (None where absent)."""
    if "--ncu" not in args:
        return args, None
    i = args.index("--ncu")
    return args[:i] + args[i + 5:], args[i + 1:i + 5]
