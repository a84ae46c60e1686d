"""reimpl.fast's chains kernel and the backward's choice of route on the fast page, rendered at build
time from results/chains_probe.json (scripts/gpu/chains_probe.py and chains_ncu.py).

    {% backward_routes %}      the route the plan takes for each input, from the constants of
                               reimpl/fast/backward.py as the probe recorded them
    {% chains_probe DTYPE %}   kernel times per shape and route, the plan's own route measured too
    {% chains_summary %}       how near the plan's route is to the fastest measured one, and its gain
    {% chains_choices %}       the plan's three choices (fused, chains, torch's tile; the ring's depth), as measured
    {% chains_ncu %}           Nsight Compute: torch's GammaBeta tile beside the chains kernel on one shape
    {% rows_from_last %}       the backward with the fast dX kernel's rows in order and from the last up
                               (results/rows_from_last_probe.json, scripts/gpu/rows_from_last_probe.py)
"""
from __future__ import annotations

from .ladder_tables import MISSING, RESULTS, caption, load

PROBE = RESULTS / "chains_probe.json"
ORDER_PROBE = RESULTS / "rows_from_last_probe.json"
_MISSING = MISSING.format(cmd="python scripts/gpu/chains_probe.py results/chains_probe.json", file=PROBE.name)
OPS = {"layer_norm": "LayerNorm", "rms_norm": "RMSNorm"}
ITEMSIZE = {"fp32": 4, "bf16": 2, "fp16": 2}


def cells(d: dict) -> dict:
    """(op, dtype, M, N) -> {route: row} of the probe."""
    out: dict = {}
    for r in d["rows"]:
        out.setdefault((r["op"], r["dtype"], r["M"], r["N"]), {})[r["route"]] = r
    return out


def taken(row: dict) -> str:
    """Which route a measured call took, from the kernels it launched."""
    names = " ".join(row["kernels_us"])
    return "fused" if "fused_kernel" in names else "chains" if "chains_kernel" in names else "two kernels"


def nearest(cell: dict) -> tuple[float, str]:
    """(time, route) of the fastest route measured in a cell, the plan's own call aside."""
    return min((r["total_us"], name) for name, r in cell.items() if name != "plan")


def backward_routes() -> str:
    d = load(PROBE)
    if d is None:
        return _MISSING
    r = d["route"]
    return (f"For dgamma and dbeta the plan (`reimpl/fast/backward.py`) takes, on an input with a weight: the fused "
            f"kernel for rows of at least {r['min_row_bytes']:,} bytes and at most {r['max_width']:,} elements, on "
            f"inputs of at least {r['min_elements']:,} elements; otherwise, after the fast dX kernel, the chains "
            f"kernel on inputs of at least {r['chains_min_elements']:,} elements, with a ring of "
            f"{r['chain_stage']} stages, or of {r['chain_stages'][-1]} where its grid has at most "
            f"{r['deep_ring_blocks_per_sm']} blocks an SM ({r['deep_ring_blocks_per_sm'] * r['sms']} on "
            f"{r['sms']} SMs), but not for float rows longer than {r['torch_tile_float_bytes']:,} bytes; "
            f"everything else keeps torch's GammaBeta tile. (As the probe below recorded them.)\n")


def chains_probe(dtype: str) -> str:
    d = load(PROBE)
    if d is None:
        return _MISSING
    stages = d["route"]["chain_stages"]
    mine = ["two_kernels"] + [f"chains_S{s}" for s in stages] + ["fused"]
    head = ["torch", "two kernels"] + [f"chains S = {s}" for s in stages] + ["fused"]
    lines = [caption(f"{dtype} backward, kernel time in µs (every gradient): torch; the fast dX kernel then torch's "
                     f"GammaBeta tile (two kernels), then the chains kernel with each ring (forced), and the fused "
                     f"kernel (where it takes the rows, its floor set aside); last, the plan's own call and the "
                     f"route it took. Bold: the fastest route measured", d, d["method"]),
             "| op | M×N | " + " | ".join(head) + " | plan (route) | plan / fastest | same bits |",
             "|---|---|" + "--:|" * (len(head) + 2) + "---|"]
    for (op, dt, M, N), c in sorted(cells(d).items(), key=lambda kv: (kv[0][1], kv[0][3], kv[0][2], kv[0][0])):
        if dt != dtype:
            continue
        best, _ = nearest(c)
        fields = []
        for name in ("torch", *mine):
            if name not in c:
                fields.append("–")
                continue
            t = c[name]["total_us"]
            fields.append(f"**{t:.1f}**" if t == best else f"{t:.1f}")
        plan = c["plan"]
        same = all(r["bit_identical"] for r in c.values())
        lines.append(f"| {OPS[op]} | {M}×{N} | {' | '.join(fields)} | {plan['total_us']:.1f} ({taken(plan)}) | "
                     f"{plan['total_us'] / best:.2f} | {'yes' if same else 'no'} |")
    return "\n".join(lines) + "\n"


def summary(d: dict) -> dict:
    """The figures the page's prose reads: the plan's route against the fastest measured, and the
    chains route against torch's two kernels where the plan takes it."""
    cs = cells(d)
    ratio = {k: c["plan"]["total_us"] / nearest(c)[0] for k, c in cs.items()}
    worst = max(ratio, key=ratio.get)
    chained = {k: c["torch"]["total_us"] / c["plan"]["total_us"] for k, c in cs.items() if taken(c["plan"]) == "chains"}
    narrow = {k: v for k, v in chained.items() if k[3] * ITEMSIZE[k[1]] < d["route"]["min_row_bytes"]}
    return {"shapes": len(cs), "within": ratio[worst], "worst": worst,
            "fastest": sum(1 for k, c in cs.items() if c["plan"]["total_us"] <= nearest(c)[0] * 1.01),
            "chains_cells": len(chained), "narrow_gain": (min(narrow.values()), max(narrow.values())),
            "same_bits": all(r["bit_identical"] for c in cs.values() for r in c.values())}


def chains_summary() -> str:
    d = load(PROBE)
    if d is None:
        return _MISSING
    s = summary(d)
    op, dt, M, N = s["worst"]
    lo, hi = s["narrow_gain"]
    return (f"On the {s['shapes']} probed cells (shape, dtype, op) the plan's own call took at most "
            f"{s['within']:.2f}× the fastest route measured ({OPS[op]} {dt} {M}×{N}), and within 1% of it on "
            f"{s['fastest']}. Where it takes the chains kernel on rows under "
            f"{d['route']['min_row_bytes']:,} bytes, the backward's kernels take {1 / hi:.2f}-{1 / lo:.2f}× torch's "
            f"time. Every route gave torch's bits on every cell: "
            f"{'yes' if s['same_bits'] else 'no'}. ({d['device']}, torch {d['torch']}, {d['date']}.)\n")


def grid_blocks(dtype: str, M: int, N: int) -> int:
    """The chains kernel's grid: Y thread rows of torch's tile (from M) times slabs of 32 words."""
    Y = 1 if M < 64 else 8 if M < 128 else 16 if M < 256 else 32
    return -(-(N * ITEMSIZE[dtype] // 4) // 32) * Y


def choices(d: dict) -> dict:
    """Per choice the plan makes, the cells that bear on it and how they came out."""
    r, cs = d["route"], cells(d)
    deep, shallow = f"chains_S{r['chain_stages'][-1]}", f"chains_S{r['chain_stage']}"
    big = {k: c for k, c in cs.items() if k[2] * k[3] >= r["chains_min_elements"]}
    rb = {k: k[3] * ITEMSIZE[k[1]] for k in big}

    def versus(keys, a, b):
        """(cells where a took less time than b, cells, largest b / a - 1 where a won, largest a / b - 1)."""
        ratios = [big[k][a]["total_us"] / big[k][b]["total_us"] for k in keys]
        return (sum(x < 1 for x in ratios), len(ratios), max([1 / x - 1 for x in ratios if x < 1], default=0),
                max([x - 1 for x in ratios], default=0))
    fused = [k for k in big if rb[k] >= r["min_row_bytes"] and "fused" in big[k]]
    chains = [k for k in big if rb[k] < r["min_row_bytes"]]
    wide = [k for k in big if k[1] == "fp32" and rb[k] > r["torch_tile_float_bytes"]]
    few = r["deep_ring_blocks_per_sm"] * r["sms"]
    small = [k for k in big if shallow in big[k] and grid_blocks(k[1], k[2], k[3]) <= few]
    large = [k for k in big if shallow in big[k] and k not in small]

    def best_of(keys, route):
        gaps = [big[k][route]["total_us"] / nearest(big[k])[0] - 1 for k in keys]
        return sum(g <= 0 for g in gaps), len(gaps), max(gaps)
    plan_ring = {k: deep if k in small else shallow for k in chains}
    chain_gaps = [big[k][plan_ring[k]]["total_us"] / nearest(big[k])[0] - 1 for k in chains]
    return {"fused": best_of(fused, "fused"),
            "chains": (sum(g <= 0 for g in chain_gaps), len(chain_gaps), max(chain_gaps)),
            "torch_tile": versus(wide, "two_kernels", shallow),
            "deep_small": versus(small, deep, shallow), "deep_large": versus(large, deep, shallow)}


def chains_choices() -> str:
    d = load(PROBE)
    if d is None:
        return _MISSING
    r, c = d["route"], choices(d)
    fw, fn, fg = c["fused"]
    cw, cn, cg = c["chains"]
    tw, tn, tgain, _ = c["torch_tile"]
    sw, sn, sgain, _ = c["deep_small"]
    lw, ln, _, lloss = c["deep_large"]
    return (f"On the cells of at least {r['chains_min_elements']:,} elements: from rows of {r['min_row_bytes']:,} "
            f"bytes up, the fused kernel was the fastest route on {fw} of {fn} cells and within {100 * fg:.1f}% of "
            f"it on the rest. Below that, the chains kernel with the plan's ring was the fastest on {cw} of {cn} "
            f"and within {100 * cg:.1f}% of it on the rest. For float rows longer than "
            f"{r['torch_tile_float_bytes']:,} bytes, torch's own tile took less time than the chains kernel on "
            f"{tw} of {tn} cells, by up to {100 * tgain:.0f}%. Where the grid has at most "
            f"{r['deep_ring_blocks_per_sm']} blocks an SM, the ring of {r['chain_stages'][-1]} stages took less "
            f"time than the ring of {r['chain_stage']} on {sw} of {sn} cells (up to {100 * sgain:.0f}% less); on "
            f"larger grids it did on {lw} of {ln}, and took up to {100 * lloss:.0f}% more.\n")


def chains_ncu() -> str:
    d = load(PROBE)
    if d is None or "ncu" not in d:
        return _MISSING
    n = d["ncu"]
    lines = [caption(f"Nsight Compute, {n['shape']}: torch's GammaBeta tile and the chains kernel, each after the "
                     f"fast dX kernel (`{n['command']}`; caches flushed before each kernel, ncu's default)", d,
                     "one launch of each after warm-up"),
             "| kernel | grid × block | µs | DRAM % of peak | achieved occupancy % | waves per SM | registers | "
             "warp cycles per issued instruction |",
             "|---|---|--:|--:|--:|--:|--:|--:|"]
    for k in n["kernels"]:
        lines.append(f"| `{k['kernel']}` | ({k['grid']}) × ({k['block']}) | {k['duration_us']:.1f} | "
                     f"{k['dram_throughput_pct']:.1f} | {k['achieved_occupancy_pct']:.1f} | {k['waves_per_sm']:.2f} | "
                     f"{k['registers']:.0f} | {k['warp_cycles_per_issued_instruction']:.2f} |")
    return "\n".join(lines) + "\n"


def row_order(d: dict) -> dict:
    """(dtype, M, N) -> (route taken, fastest of each setting's runs in order, from the last up)."""
    out: dict = {}
    for r in d["rows"]:
        key = (r["dtype"], r["M"], r["N"])
        route, first, last = out.get(key, (taken(r), float("inf"), float("inf")))
        if r["rows_from_last"]:
            last = min(last, r["total_us"])
        else:
            first = min(first, r["total_us"])
        out[key] = (route, first, last)
    return out


def rows_from_last() -> str:
    d = load(ORDER_PROBE)
    if d is None:
        return MISSING.format(cmd="python scripts/gpu/rows_from_last_probe.py results/rows_from_last_probe.json",
                              file=ORDER_PROBE.name)
    lines = [caption("LayerNorm backward, kernel time in µs (every gradient) on the plan's route, the fast dX kernel's "
                     "rows in order and from the last up (the faster of two runs each); the fused kernel does not use "
                     "that kernel, so its rows are a control", d, d["method"]),
             "| dtype | M×N | route | rows in order | from the last up | ratio | same bits |",
             "|---|---|---|--:|--:|--:|---|"]
    same = {}
    for r in d["rows"]:
        key = (r["dtype"], r["M"], r["N"])
        same[key] = same.get(key, True) and r["bit_identical"]
    for (dt, M, N), (route, first, last) in row_order(d).items():
        lines.append(f"| {dt} | {M}×{N} | {route} | {first:.1f} | {last:.1f} | {last / first:.3f} | "
                     f"{'yes' if same[(dt, M, N)] else 'no'} |")
    return "\n".join(lines) + "\n"


def expand(kind: str, arg: str) -> str | None:
    """The page text for a chains_* or backward_routes tag, or None for another tag."""
    if kind == "chains_probe" and arg in ITEMSIZE:
        return chains_probe(arg)
    if arg:
        return None
    return {"backward_routes": backward_routes, "chains_summary": chains_summary, "chains_choices": chains_choices,
            "chains_ncu": chains_ncu, "rows_from_last": rows_from_last}.get(kind, lambda: None)()
