"""reimpl.fast's fused backward on its page, rendered at build time from the plan's constants and the
committed probe (results/fused_backward_probe.json, scripts/gpu/fused_probe.py and fused_ncu.py).

    {% fused_route %}          the inputs the fused route takes, as the probe recorded reimpl/fast/backward.py's plan
    {% fused_probe %}          kernel times per shape: torch, the route of two kernels, the fused kernel
    {% fused_ncu %}            Nsight Compute on both routes of one shape
"""
from __future__ import annotations

from .ladder_tables import MISSING, RESULTS, caption, load

PROBE = RESULTS / "fused_backward_probe.json"
_MISSING = MISSING.format(cmd="python scripts/gpu/fused_probe.py results/fused_backward_probe.json", file=PROBE.name)
ROUTES = ("torch", "fast_two_kernels", "fast_fused")


def fused_route() -> str:
    d = load(PROBE)
    if d is None:
        return _MISSING
    r = d["route"]
    return (f"The fused route takes a backward with a weight, rows of {r['min_width']} to {r['max_width']} elements and "
            f"at least {r['min_elements']:,} elements in all (`reimpl/fast/backward.py`: `MIN_WIDTH`, `MIN_ELEMENTS` "
            f"and the plan's longest row, as the probe recorded them); every other backward keeps the route of two "
            f"kernels.\n")


def probe_cells(d: dict) -> dict:
    """(dtype, M, N) -> {route: row} of the probe."""
    out: dict = {}
    for r in d["rows"]:
        out.setdefault((r["dtype"], r["M"], r["N"]), {})[r["route"]] = r
    return out


def fused_wins(d: dict) -> list[tuple]:
    """The probe's shapes where the fused kernel and its finish take less time than the two kernels."""
    return [k for k, c in probe_cells(d).items() if c["fast_fused"]["total_us"] < c["fast_two_kernels"]["total_us"]]


def fused_probe() -> str:
    d = load(PROBE)
    if d is None:
        return _MISSING
    lines = [caption("LayerNorm backward, kernel time in µs (all gradients): torch, reimpl.fast's two kernels (fast dX, "
                     "torch's GammaBeta) and its fused kernel with the finish, taken here on every width; the last "
                     "column says whether all three routes gave the same bits", d, d["method"]),
             "| dtype | M×N | torch | two kernels | fused | fused / two kernels | same bits |",
             "|---|---|--:|--:|--:|--:|---|"]
    for (dtype, M, N), c in sorted(probe_cells(d).items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
        t, two, fused = (c[r]["total_us"] for r in ROUTES)
        same = all(c[r]["bit_identical"] for r in ROUTES)
        lines.append(f"| {dtype} | {M}×{N} | {t:.1f} | {two:.1f} | {fused:.1f} | {fused / two:.2f} | "
                     f"{'yes' if same else 'no'} |")
    return "\n".join(lines) + "\n"


def fused_ncu() -> str:
    d = load(PROBE)
    if d is None or "ncu" not in d:
        return _MISSING
    n = d["ncu"]
    lines = [caption(f"Nsight Compute, LayerNorm backward {n['dtype']} {n['M']}×{n['N']}, each kernel of both routes "
                     f"({n['profile']}; `{d['ncu_command']}`)", d, "one launch each after warm-up"),
             "| route | kernel | µs | DRAM % of peak | L2 hit % | achieved occupancy % | registers | grid |",
             "|---|---|--:|--:|--:|--:|--:|--:|"]
    for k in n["kernels"]:
        lines.append(f"| {k['route']} | `{k['kernel']}` | {k['us']:.1f} | {k['dram_pct']:.1f} | {k['l2_hit_pct']:.1f} | "
                     f"{k['achieved_occupancy_pct']:.1f} | {k['registers']} | {k['grid']} |")
    return "\n".join(lines) + "\n"


def expand(kind: str, arg: str) -> str | None:
    """The page text for a fused_* tag, or None for another tag."""
    if arg:
        return None
    return {"fused_route": fused_route, "fused_probe": fused_probe, "fused_ncu": fused_ncu}.get(kind, lambda: None)()
