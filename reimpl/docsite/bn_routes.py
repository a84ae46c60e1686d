"""The BatchNorm page's route table: for channels-last input, the split's three launches against the
resident kernel's one launch, forward and backward, per dtype and shape, drawn at build time from
results/bn_resident.json (scripts/gpu/bn_probe.py, settings `split_columns` and `resident_always`),
with the route that reimpl/ladder/batchnorm_split.py's size rule (RESIDENT_FROM_BYTES) takes.

    {% bn_routes DTYPE %}     the table for one dtype
    {% bn_route_rule %}       how far the size rule's choice is from the faster route, over every cell
    {% bn_resident_reads %}   what the resident forward read from DRAM against two reads of x
                              (results/ncu_siblings.json, Nsight Compute, caches flushed first)
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from .ladder_tables import ITEMSIZE, caption

RESULTS = Path(__file__).resolve().parents[2] / "results"
MISSING = ("*Not measured yet: run `python scripts/gpu/bn_probe.py results/bn_resident.json plans fp32,bf16,fp16 "
           "default,split_columns,resident_always` on a GPU.*\n")
ROUTES = {"split_columns": "three launches", "resident_always": "one launch"}


RESIDENT_KERNEL = "ladder::bn_forward_cl_resident"


def load(path: Path = RESULTS / "bn_resident.json") -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def cells(d: dict) -> dict:
    """(dtype, shape) -> {setting: {"forward": us, "backward": us}} for channels-last input."""
    out: dict = {}
    for r in d["rows"]:
        if r["layout"] == "channels_last" and r["setting"] in ROUTES:
            out.setdefault((r["dtype"], tuple(r["shape"])), {})[r["setting"]] = {
                "forward": r["forward_us"], "backward": r["backward_us"]}
    return out


def chosen(dtype: str, shape: tuple, direction: str) -> str:
    """The setting whose route batchnorm_split's rule takes for x of this dtype and shape."""
    from ..ladder.batchnorm_split import takes_resident
    size = ITEMSIZE[dtype]
    return "resident_always" if takes_resident(direction, math.prod(shape) * size, size) else "split_columns"


def rule_cost(d: dict) -> float:
    """The largest ratio, over every cell and direction, of the chosen route's time to the faster's."""
    return max(c[chosen(dt, sh, w)][w] / min(c[s][w] for s in ROUTES)
               for (dt, sh), c in cells(d).items() for w in ("forward", "backward"))


def route_rule(d: dict | None) -> str:
    if d is None:
        return MISSING
    n = len(cells(d))
    return (f"Over all {n} channels-last cells of the three dtypes, the route the size rule takes is at most "
            f"{100 * (rule_cost(d) - 1):.1f}% slower than the faster of the two, forward or backward.\n")


def routes(d: dict | None, dtype: str) -> str:
    if d is None:
        return MISSING
    from ..ladder.batchnorm_split import RESIDENT_FROM_BYTES
    frm = {w: RESIDENT_FROM_BYTES[w][ITEMSIZE[dtype]] >> 20 for w in ("forward", "backward")}
    when = {w: f"from {mb} MiB of x {w}" if mb else f"at every size {w}" for w, mb in frm.items()}
    lines = [caption(f"{dtype}, channels-last: µs per call of the split's three launches and of the resident "
                     f"kernel's one, forward and backward; in bold, the route taken (one launch "
                     f"{when['forward']}, {when['backward']})", d,
                     "pipelined (median of CUDA-event times, L2 not flushed)"),
             "| N x C x H x W | x (MiB) | forward: three / one | backward: three / one |", "|---|--:|--:|--:|"]
    for (dt, shape), c in cells(d).items():
        if dt != dtype:
            continue
        row = [" x ".join(map(str, shape)), f"{math.prod(shape) * ITEMSIZE[dt] / 2**20:.1f}"]
        for w in ("forward", "backward"):
            take = chosen(dt, shape, w)
            row.append(" / ".join(f"**{c[s][w]:.1f}**" if s == take else f"{c[s][w]:.1f}" for s in ROUTES))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def resident_reads(ncu: dict | None) -> str:
    """One sentence per profiled resident forward: DRAM bytes read against x's, and the share of
    the second read of x that the L2 served."""
    cases = [c for c in (ncu or {}).get("cases", []) if c["launched"] == RESIDENT_KERNEL]
    if not cases:
        return "*Not profiled yet: run `OUT=dir bash scripts/gpu/ncu_siblings.sh` on a GPU.*\n"
    out = []
    for c in cases:
        x_mb = math.prod(c["shape"]) * ITEMSIZE[c["dtype"]] / 1e6
        served = 100 * (2 * x_mb - c["dram_read_mb"]) / x_mb
        out.append(f"- {c['dtype']} {' x '.join(map(str, c['shape']))}, channels-last: {c['dram_read_mb']:.0f} MB "
                   f"read from DRAM for {x_mb:.0f} MB of x, so the L2 served {served:.0f}% of the second read "
                   f"({ncu['device']}, Nsight Compute, caches flushed before the kernel).")
    return "\n".join(out) + "\n"


def expand(kind: str, arg: str | None) -> str | None:
    if kind == "bn_routes" and arg in ITEMSIZE:
        return routes(load(), arg)
    if kind == "bn_route_rule" and not arg:
        return route_rule(load())
    if kind == "bn_resident_reads" and not arg:
        return resident_reads(load(RESULTS / "ncu_siblings.json"))
    return None
