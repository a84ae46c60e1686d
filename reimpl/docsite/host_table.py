"""The training guide's host-cost tables, drawn at build time from results/host_overhead.json
(written on the GPU machine by scripts/gpu/host_bench.py)."""
from __future__ import annotations

import re

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
    rows = [f"*Host time per call in µs at {M} x {N} {d['dtype']}: torch's call beside ours, with the recorded launch "
            f"plans and, last, without them. Method: {d['method']}. {d['device']}, torch {d['torch']}, CUDA {d['cuda']}, "
            f"{d['date']}.*", "",
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


# cProfile rows: ncalls tottime percall cumtime percall filename:lineno(function)
_ROW = re.compile(r"^\s*(\d+)(?:/\d+)?\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+(.*)$")
# the stages of a call, by where the time is spent (first match wins)
STAGES = (
    ("launch (CuPy's driver call and our launcher)", ("launchKernel", "runtime.py")),
    ("allocation of the outputs (torch.empty)", ("torch.empty",)),
    ("tensor queries (data_ptr, device, contiguity)", ("data_ptr", "get_device", "is_contiguous", "_cuda_getDevice")),
    ("replaying the recorded launch plan", ("replay.py",)),
    ("the public API and the plan lookup", ("api.py", "functional.py")),
)


def _where(location: str) -> str:
    """A profile row's function without the machine's path: reimpl/api.py:80(_plan_call) stays
    'reimpl/api.py (_plan_call)'; built-ins keep their name."""
    m = re.search(r"(reimpl/[\w/]+\.py):\d+\((\w+)\)", location)
    if m:
        return f"{m.group(1)} ({m.group(2)})"
    name = location.strip("{}").replace("built-in method ", "")
    m = re.match(r"method '(\w+)' of '([\w.]+)' objects", name)
    return f"{m.group(2).replace('torch._C.TensorBase', 'Tensor')}.{m.group(1)}" if m else name


def host_profile(d: dict | None) -> str:
    """The cProfile of `reimpl.layer_norm` as a table by stage: own time per call in each, and the
    functions it holds (machine paths dropped)."""
    if d is None:
        return MISSING
    rows = [m.groups() for line in d["cprofile_reimpl_layer_norm"].splitlines() if (m := _ROW.match(line))]
    calls = max(int(n) for n, _, cum, loc in rows if "layer_norm" in loc and "functional" in loc)
    stages: dict[str, list] = {name: [] for name, _ in STAGES}
    stages["other"] = []
    for n, tottime, _, loc in rows:
        stage = next((name for name, keys in STAGES if any(k in loc for k in keys)), "other")
        stages[stage].append((float(tottime), _where(loc)))
    M, N = d["shape"]
    out = [f"*Own time per call in µs of `reimpl.layer_norm` by stage, with the functions each holds. Method: cProfile "
           f"of {calls} calls at {M} x {N} {d['dtype']}, its 15 costliest functions, own time only (the profiler "
           f"inflates every entry). {d['device']}, torch {d['torch']}, {d['date']}.*\n",
           "| stage | µs per call | functions |", "|---|---:|---|"]
    for name, items in stages.items():
        if items:
            us = sum(t for t, _ in items) * 1e6 / calls
            out.append(f"| {name} | {us:.1f} | {', '.join(w for _, w in sorted(items, reverse=True))} |")
    return "\n".join(out) + "\n"
