"""The "Which torch releases give these bits" page's tables, rendered at build time from
reference/torch_versions.json (the wheels' kernels) and results/torch_versions_gpu.json (the GPU runs).
Each table opens with its caption: what it holds, how it was made, and the stamp (device, torch,
date) of the file it is drawn from; the host tables, read from source, name their file and its date.

    {% releases %}           per release: kernels, removals, signature changes, SASS and FP sequences
                             identical to the pin's, GPU families identical, doctor's verdict
    {% releases_gpu %}       per release and kernel family: cases, mismatches, absent kernels
"""
from __future__ import annotations

import json

from ..checks import doctor
from ..upstream import releases


def _load(path):
    return json.loads(path.read_text()) if path.is_file() else None


def _gpu(d: dict) -> str:
    """A GPU run's stamp: device, versions, date."""
    return f"{d['device']}, torch {d['torch']}" + (f", CuPy {d['cupy']}" if "cupy" in d else "") + f", {d['date']}"


def _read(h: dict) -> str:
    """The stamp of reference/host_dispatch.json, which is read from source, not run."""
    return f"`reference/host_dispatch.json`, {h['date']}"


def summary() -> str:
    m, g = _load(releases.JSON), _load(doctor.GPU_MATRIX) or {}
    if m is None:
        return "*Not made yet: run `python scripts/torch_versions.py`.*\n"
    gpu = f"GPU runs: {g['method']}; {_gpu(g)}" if g else "GPU runs: none yet"
    lines = [f"*Per release, its {m['arch']} LayerNorm kernels against the pin's ({m['pin']}): kernels, removed, "
             "signatures changed, SASS and floating-point sequences identical (counts); kernel families giving the "
             f"mirror's bits on the GPU; the doctor's verdict. Method: the wheels' cubins read by `{m['made_by']}` "
             f"(`reference/torch_versions.json`, {m['date']}). {gpu}.*\n",
             "| release | git | kernels | removed | signatures changed | SASS identical | FP sequence identical "
             "| GPU: families with the mirror's bits | verdict |", "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for v, e in m["releases"].items():
        c = e["versus_pin"]
        runs = g.get("releases", {}).get(v, {})
        fams = {**runs.get("forward", {}), **runs.get("backward", {})}
        gpu = f"{sum(not r['mismatched_cases'] and not r.get('absent') for r in fams.values())} of {len(fams)}" if fams else "not run"
        verdict = doctor.verdict(e["version"], e["git"], m, g)[0]
        lines.append(f"| {v} | `{(e['git'] or '?')[:10]}` | {c['kernels']} | {len(c['removed'])} | "
                     f"{len(c['signature_changed'])} | {c['sass_identical']} of {c['common']} | "
                     f"{c['fp_identical']} of {c['common']} | {gpu} | {verdict} |")
    return "\n".join(lines) + "\n"


def gpu_families() -> str:
    g = _load(doctor.GPU_MATRIX)
    if g is None:
        return "*Not measured yet: tests/gpu/test_releases_gpu.py with REIMPL_RELEASES_OUT set.*\n"
    lines = [f"*Per release and kernel family: cases, mismatched cases and elements, kernels absent (counts). "
             f"Method: {g['method']}. {_gpu(g)}.*\n",
             "| release | compared with | family | cases | mismatched cases | mismatched elements | absent |",
             "|---|---|---|---:|---:|---:|---:|"]
    for v, r in g["releases"].items():
        for part, against in (("control_against_torch", "torch itself"), ("forward", "the mirror"),
                              ("backward", "the mirror")):
            for fam, x in r.get(part, {}).items():
                lines.append(f"| {v} | {against} | {fam} | {x['cases']} | {x['mismatched_cases']} | "
                             f"{x['mismatched_elements']} | {x.get('absent', 0)} |")
    return "\n".join(lines) + "\n"


# ---- the host dispatch of newer releases (reference/host_dispatch.json) ------------------------------
def host_copies() -> str:
    from ..upstream.dispatch import host_facts
    h = host_facts()
    if h is None:
        return "*reference/host_dispatch.json is missing.*\n"
    rows = [f"*The copies of `layer_norm_kernel.cu` read: fork, commit, how it is dated, the release it stands for. "
            "Method: each copy read in full at its commit against the pin, from source (no GPU run). "
            f"{_read(h)}.*", "",
            "| copy | commit | dated by its changes | stands for | how sure | why |", "|---|---|---|---|---|---|"]
    for c in h["copies"]:
        link = f"https://github.com/{c['repo']}/blob/{c['commit']}/aten/src/ATen/native/cuda/layer_norm_kernel.cu"
        rows.append(f"| {c['repo'].split('/')[0]} | [`{c['commit'][:8]}`]({link}) | {c['dated']} | "
                    f"{c['stands_for'] or '-'} | {c['confidence'] or '-'} | {c['why']} |")
    return "\n".join(rows) + "\n"


def _code(entry: dict) -> str:
    """A short mark for a function's change in one copy: '=' none, 'R' ROCm only, '**!**' alters NVIDIA."""
    effect = entry["nvidia_effect"].lower()
    if effect.startswith("none") or effect.startswith("no "):
        return "R" if entry["rocm_only"] or "rocm" in entry["change"].lower() else "="
    return "**!**"


def host_functions() -> str:
    from ..upstream.dispatch import host_facts
    h = host_facts()
    if h is None:
        return ""
    keys = [c["key"] for c in h["copies"]]
    names = {c["key"]: c["repo"].split("/")[0] for c in h["copies"]}
    rows = [f"*Each host function's line range in the pin (2.11) and in each copy, marked by what its change does. "
            "Method: the copies above, read function by function against the pin (no GPU run). "
            f"{_read(h)}.*", "",
            "| function | 2.11 lines | " + " | ".join(names[k] for k in keys) + " |",
            "|---|---|" + "---|" * len(keys)]
    for name, f in h["functions"].items():
        pin = f"{f['pin'][0]}-{f['pin'][1]}" if f["pin"] else "(new)"
        cells = []
        for k in keys:
            e = f["copies"].get(k)
            cells.append("-" if e is None else f"{e['lines'][0]}-{e['lines'][1]} {_code(e)}")
        rows.append(f"| `{name}` | {pin} | " + " | ".join(cells) + " |")
    return ("\n".join(rows) + "\n\n*Line ranges in each copy; `=` no change that reaches an NVIDIA launch, `R` a "
            "change under `USE_ROCM` only, **!** a change that alters a launch, an allocation or a result on NVIDIA "
            "(below).*\n")


def host_changes() -> str:
    from ..upstream.dispatch import host_facts
    h = host_facts()
    if h is None:
        return ""
    rows = [f"*The changes in the copies that alter a launch, an allocation or a result on NVIDIA GPUs, with their "
            "condition and the switch that reproduces each. Method: the copies above, read against the pin (no GPU run). "
            f"{_read(h)}.*", "",
            "| change | in the copies | when it matters on NVIDIA | what it does | reproduced by |", "|---|---|---|---|---|"]
    for c in h["launch_altering_on_nvidia"]:
        rows.append(f"| {c['name']} ({c['kind']}) | {', '.join(c['copies'])} | {c['condition']} | {c['effect']} | "
                    f"{c['switch']} |")
    rows.append("")
    rows.append("Changes that reach no NVIDIA launch:")
    rows.append("")
    rows += [f"- {t}" for t in h["not_launch_altering_on_nvidia"]]
    return "\n".join(rows) + "\n"


def release_table() -> str:
    from ..upstream.dispatch import RELEASES, host_facts, large_tensor_results
    h, m, big = host_facts(), _load(releases.JSON), large_tensor_results()
    sources = "; ".join(s for s in (
        f"read, from source: {_read(h)}" if h else "",
        f"inferred, from the wheels' SASS: `reference/torch_versions.json`, {m['date']}" if m else "",
        f"measured: `results/large_tensor.json`, {_gpu(big)}" if big else "") if s)
    rows = ["*Per release: the host dispatch it runs and what it returns on inputs past 2^32 elements, each with how "
            f"it is known (`reimpl/upstream/dispatch.py`). Sources: {sources or 'none committed yet'}.*", "",
            "| release | host dispatch | how known | inputs past 2^32 elements | how known |", "|---|---|---|---|---|"]
    for v, ((host, hh), (large, lh)) in RELEASES.items():
        rows.append(f"| {v} | {host} | {hh} | {large} | {lh} |")
    return "\n".join(rows) + "\n"


def large_tensor() -> str:
    from ..upstream.dispatch import large_tensor_results
    d = large_tensor_results()
    if d is None:
        return "*Not measured yet: `REIMPL_LARGE_OUT=results/large_tensor.json pytest tests/gpu/test_large_tensor_gpu.py`.*\n"
    shapes = sorted({r["shape"] for r in d["records"]})
    impls = list(dict.fromkeys(r["implementation"] for r in d["records"]))
    by = {(r["shape"], r["implementation"]): r for r in d["records"]}
    head = "| implementation | " + " | ".join(
        f"{s.replace('_', ' ')} ({by[(s, impls[0])]['M']:,} x {by[(s, impls[0])]['N']}): out, dX" for s in shapes) + " |"
    rows = ["*Rows that come out right, of the rows checked, per implementation and input size: forward out, then dX. "
            f"Method: {d['what']}; the rows checked are both ends, each side of element 2^31 and 2^32, and the middle "
            f"(`tests/gpu/test_large_tensor_gpu.py`). {_gpu(d)}.*", "",
            head, "|---|" + "---|" * len(shapes)]
    for impl in impls:
        cells = []
        for s in shapes:
            r = by[(s, impl)]
            n = len(r["rows_checked"])
            cells.append(f"{n - len(r['forward_rows_wrong'])} of {n} rows right, "
                         f"{n - len(r['dx_rows_wrong'])} of {n} rows right")
        rows.append(f"| {impl} | " + " | ".join(cells) + " |")
    wrong = by[(shapes[-1], "torch 2.11")]["forward_rows_wrong"]
    return ("\n".join(rows) + "\n\nThe wrong rows past 2^32 are rows "
            f"{', '.join(f'{r:,}' for r in wrong)}: every checked row that starts at element 2^32 or later.\n")
