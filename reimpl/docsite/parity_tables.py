"""The tables drawn from the GPU runs' committed summaries in results/:

    {% parity %}             the parity page: the forward and backward suites' groups and totals
    {% numerics_example %}   the numerics page: results/numerics_example.json, or "not yet measured"
"""
from __future__ import annotations

import json

from ..upstream import manifest as manifest_mod
from .ladder_tables import caption

RESULTS = manifest_mod.ROOT / "results"


def _load(name: str) -> dict | None:
    path = RESULTS / name
    return json.loads(path.read_text()) if path.exists() else None


def _stamp(d: dict) -> str:
    keys = ("device", "torch", "cuda", "cupy", "nvrtc", "driver", "date", "pytest")
    return "\n".join(f"- **{k}**: {d[k]}" for k in keys if k in d) + "\n"


def _groups_table(groups: dict, totals: dict | None) -> str:
    rows = ["| group | cases | mismatched cases | elements compared | mismatched elements |", "|---|--:|--:|--:|--:|"]
    items = list(groups.items()) + ([("**total**", totals)] if totals else [])
    for g, r in items:
        rows.append(f"| {g} | {r['cases']:,} | {r['mismatched_cases']:,} | {r['elements_compared']:,} "
                    f"| {r['mismatched_elements']:,} |")
    return "\n".join(rows) + "\n"


def parity() -> str:
    out = []
    for title, name in (("Forward", "gpu_suite_forward.json"), ("Backward", "gpu_suite_backward.json")):
        d = _load(name)
        out.append(f"### {title} {{ #parity-{title.lower()} }}\n")
        if d is None:
            out.append(f"Not yet measured: `results/{name}` is not in the repository yet.\n")
            continue
        out.append(f"From `results/{name}`" + (f": {d['what']}" if "what" in d else "") + "\n\n" + _stamp(d))
        if "parity_groups" in d:
            method = ("every element of the outputs compared with torch's as integer bit patterns, NaN by position, "
                      "by the GPU suite (`scripts/gpu/gpu_suite.sh`)")
            out.append("\n" + caption(f"{title}: cases and elements compared with torch per parity group, and how "
                                      "many differ (counts)", d, method)
                       + _groups_table(d["parity_groups"], d.get("totals")))
        if "step_trace" in d:
            t = d["step_trace"]
            out.append(f"\nStep traces (`tests/test_trace_gpu.py`, see [Stepping through the kernels]"
                       f"(guide/stepping.md)): {t['cases']:,} cases, {t['records_compared']:,} GPU trace records "
                       f"compared with the emulator's, {t['mismatched_cases']:,} cases differing.\n")
        for r in d.get("reruns", []):
            out.append(f"\nRe-run since: {r['what']}. Groups replaced above: "
                       f"{', '.join(f'`{g}`' for g in r['groups'])} ({r['pytest']}).\n")
        if "confirmed_by" in d:
            c = d["confirmed_by"]
            out.append(f"\nConfirmed by a rerun on {c.get('date', '?')}: {c.get('pytest', '')}"
                       + (f" ({c['note']})" if "note" in c else "") + ".\n")
    return "\n".join(out)


def _bits_rows(rows: list[dict]) -> str:
    lines = ["| index | input x | vectorized path | fallback path |", "|--:|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['index']} | `{r.get('x', '')}` | `{r['aligned']}` ({r['aligned_value']}) "
                     f"| `{r['offset']}` ({r['offset_value']}) |")
    return "\n".join(lines) + "\n"


def numerics_example() -> str:
    d = _load("numerics_example.json")
    if d is None:
        return ("!!! warning \"Not yet measured\"\n    `results/numerics_example.json` is not in the repository yet. "
                "It is written by `scripts/gpu/numerics_example.py` on a CUDA machine with torch 2.11.\n")
    out = [_stamp(d), f"- **input**: `{d['dtype']}`, shape `{d['shape']}`, `torch.randn` with seed {d['seed']} "
           f"(found after {d['tries']} seed(s)), eps {d['eps']}, no weight or bias\n",
           f"- **kernels, aligned input**: {', '.join(f'`{k}`' for k in d['kernels']['aligned'])}\n",
           f"- **kernels, input at storage offset 1**: {', '.join(f'`{k}`' for k in d['kernels']['offset'])}\n"]
    for t in ("mean", "rstd", "out"):
        n = d["counts"][t]
        out.append(f"\n**{t}**: {n} of {d['numel'][t]} element(s) differ"
                   + (f" (the first {len(d['diffs'][t])} shown)" if n > len(d["diffs"][t]) else "") + "\n\n")
        if d["diffs"][t]:
            out.append(caption(f"The elements of `{t}` that differ between the two paths: {d['dtype']} bits (hex) "
                               "and value of each path's result", d,
                               "`torch.native_layer_norm` on the same values, aligned and at storage offset 1, kernels "
                               "identified with the profiler (`scripts/gpu/numerics_example.py`)")
                       + _bits_rows(d["diffs"][t]))
    return "".join(out)
