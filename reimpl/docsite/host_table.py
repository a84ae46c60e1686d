"""The training guide's host-cost tables, drawn at build time from results/host_overhead.json
(written on the GPU machine by scripts/gpu/host_bench.py)."""
from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "results"
MISSING = "*Not measured yet: run `python scripts/gpu/host_bench.py results/host_overhead.json` on a GPU.*\n"

# (torch's call, ours) in table order
PAIRS = (("F.layer_norm", "reimpl.layer_norm"), ("aten.native_layer_norm", "reimpl.native_layer_norm"),
         ("F.rms_norm", "reimpl.rms_norm"), ("aten.native_layer_norm", "torch.ops.reimpl.native_layer_norm"),
         ("torch LayerNorm module, grad", "reimpl LayerNorm module, grad"),
         ("torch LayerNorm fwd+bwd", "reimpl LayerNorm fwd+bwd"))


def load(path: Path = RESULTS / "host_overhead.json") -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def host_table(d: dict | None) -> str:
    if d is None:
        return MISSING
    h, full = d["host_us"], d["host_us_without_plans"]
    M, N = d["shape"]
    rows = [f"*{d['device']}, torch {d['torch']}, CUDA {d['cuda']}, {d['date']}; {M} x {N} {d['dtype']}. "
            f"{d['method']}.*", "",
            "| torch's call | us | ours | us | ours / torch | ours, every call in full (no plan) |",
            "|---|--:|---|--:|--:|--:|"]
    for theirs, ours in PAIRS:
        no_plan = f"{full[ours]:.1f}" if ours in full else "–"
        rows.append(f"| `{theirs}` | {h[theirs]:.1f} | `{ours}` | {h[ours]:.1f} | {h[ours] / h[theirs]:.2f} "
                    f"| {no_plan} |")
    pipe = d["pipelined_4096x1024_us"]
    rows += ["", f"Pipelined at 4096 x 1024 fp32 (per call, back to back, then one synchronize): "
                 f"`F.layer_norm` {pipe['F.layer_norm']:.1f} us, `reimpl.layer_norm` {pipe['reimpl.layer_norm']:.1f} us."]
    return "\n".join(rows) + "\n"


def host_profile(d: dict | None) -> str:
    if d is None:
        return MISSING
    return "```text\n" + d["cprofile_reimpl_layer_norm"] + "\n```\n"
