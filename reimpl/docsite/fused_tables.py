"""reimpl.fast's fused backward on its page, rendered at build time from the plan's constants and the
committed probe (results/fused_backward_probe.json, scripts/gpu/fused_probe.py and fused_ncu.py).

    {% fused_probe %}          kernel times per shape: torch, the route of two kernels, the fused kernel
    {% fused_ncu %}            Nsight Compute on both routes of one shape
    {% fused_sweep %}          the sweep of one input, step by step: the rows read for dX, the tiles the
                               chains walk after them (`sweep`, the kernel's loop written out)
"""
from __future__ import annotations

from .ladder_tables import MISSING, RESULTS, caption, load

PROBE = RESULTS / "fused_backward_probe.json"
_MISSING = MISSING.format(cmd="python scripts/gpu/fused_probe.py results/fused_backward_probe.json", file=PROBE.name)
ROUTES = ("torch", "fast_two_kernels", "fast_fused")
# fast_backward.cu's shape, written here because the site does not import the kernels (tests hold them
# equal to reimpl/fast/backward.py): warps a block, warp-units a warp, columns a unit
WARPS, CHAIN_UNITS, SLAB = 4, 2, 128
# the input the sweep table follows: bf16 16384 x 4096 LayerNorm on 132 SMs, whose plan launches 528
# blocks (four an SM) with 256-row tiles (Y = 32)
SWEEP_M, SWEEP_N, SWEEP_Y, SWEEP_BLOCKS = 16384, 4096, 32, 528
SWEEP_SHOWN = 4  # steps shown at each end of the table


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


def sweep(M: int, Y: int, blocks: int):
    """The fused kernel's loop, step j by step: (j, first and last row read for dX at that step (block b
    takes row b + blocks j), the sweep's front (every row below it has been read), the tiles of 8 Y rows
    every block's chains walk after the step: [first, end))."""
    rows_a_tile = 8 * Y
    tiles = -(-M // rows_a_tile)
    next_tile, j = 0, 0
    while True:
        first = blocks * j
        front = min(M, blocks * (j + 1)) if first < M else M
        passed = tiles if front >= M else front // rows_a_tile
        yield j, first, min(M, first + blocks) - 1, front, next_tile, passed
        next_tile = passed
        if front >= M:
            return
        j += 1


def unit_owner(u: int, blocks: int) -> tuple[int, int, int]:
    """(block, warp, q) of warp-unit u: units are dealt over the blocks, then the warps, then a warp's
    CHAIN_UNITS slots."""
    return u % blocks, (u // blocks) % WARPS, u // (blocks * WARPS)


def fused_sweep() -> str:
    M, N, Y, G = SWEEP_M, SWEEP_N, SWEEP_Y, SWEEP_BLOCKS
    units = -(-N // SLAB) * Y
    last = unit_owner(units - 1, G)
    lines = [f"*The sweep of a {M}×{N} bf16 backward on 132 SMs: {G} blocks, tiles of {8 * Y} rows "
             f"({-(-M // (8 * Y))} in all), {units} chain units ({N // SLAB} slabs of {SLAB} columns × {Y} chains): "
             f"unit u belongs to block u mod {G}, warp u div {G}, so the last, unit {units - 1}, to block {last[0]}, "
             f"warp {last[1]}.*\n",
             "| step j | rows read for dX (row b + j·G in block b) | every row below | tiles the chains walk next |",
             "|--:|---|--:|---|"]
    steps = list(sweep(M, Y, G))
    for k, (j, first, end, front, t0, t1) in enumerate(steps):
        if SWEEP_SHOWN <= k < len(steps) - SWEEP_SHOWN:
            if k == SWEEP_SHOWN:
                lines.append("| … | | | |")
            continue
        walk = "none yet" if t1 == t0 else (f"tile {t0}" if t1 == t0 + 1 else f"tiles {t0}–{t1 - 1}")
        rows = f"rows {8 * Y * t0}–{min(M, 8 * Y * t1) - 1}" if t1 > t0 else ""
        lines.append(f"| {j} | {first}–{end} | {front} | {walk}{f' ({rows})' if rows else ''} |")
    return "\n".join(lines) + "\n"


def expand(kind: str, arg: str) -> str | None:
    """The page text for a fused_* tag, or None for another tag."""
    if arg:
        return None
    return {"fused_probe": fused_probe, "fused_ncu": fused_ncu, "fused_sweep": fused_sweep}.get(kind, lambda: None)()
