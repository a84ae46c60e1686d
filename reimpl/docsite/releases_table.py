"""The "Which torch releases give these bits" page's tables, rendered at build time from
reference/torch_versions.json (the wheels' kernels) and results/torch_versions_gpu.json (the GPU runs).

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


def summary() -> str:
    m, g = _load(releases.JSON), _load(doctor.GPU_MATRIX) or {}
    if m is None:
        return "*Not made yet: run `python scripts/torch_versions.py`.*\n"
    lines = [f"*{m['made_by']}, {m['date']}, {m['arch']} cubins. GPU runs: {g.get('device', 'none yet')}"
             f"{', torch ' + g['torch'] + ', ' + g['date'] if g else ''}.*\n",
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
    lines = [f"*{g['device']}, torch {g['torch']}, CuPy {g.get('cupy', '?')}, {g['date']}: {g['method']}.*\n",
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
    rows = ["| copy | commit | dated by its changes | stands for | how sure | why |", "|---|---|---|---|---|---|"]
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
    rows = ["| function | 2.11 lines | " + " | ".join(names[k] for k in keys) + " |",
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
    rows = ["| change | in the copies | when it matters on NVIDIA | what it does | reproduced by |", "|---|---|---|---|---|"]
    for c in h["launch_altering_on_nvidia"]:
        rows.append(f"| {c['name']} ({c['kind']}) | {', '.join(c['copies'])} | {c['condition']} | {c['effect']} | "
                    f"{c['switch']} |")
    rows.append("")
    rows.append("Changes that reach no NVIDIA launch:")
    rows.append("")
    rows += [f"- {t}" for t in h["not_launch_altering_on_nvidia"]]
    return "\n".join(rows) + "\n"


def release_table() -> str:
    from ..upstream.dispatch import RELEASES
    rows = ["| release | host dispatch | how known | inputs past 2^32 elements | how known |", "|---|---|---|---|---|"]
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
    rows = [head, "|---|" + "---|" * len(shapes)]
    for impl in impls:
        cells = []
        for s in shapes:
            r = by[(s, impl)]
            n = len(r["rows_checked"])
            cells.append(f"{n - len(r['forward_rows_wrong'])} of {n} rows right, "
                         f"{n - len(r['dx_rows_wrong'])} of {n} rows right")
        rows.append(f"| {impl} | " + " | ".join(cells) + " |")
    wrong = by[(shapes[-1], "torch 2.11")]["forward_rows_wrong"]
    return ("\n".join(rows) + f"\n\n*bf16, on an {d['device']}, torch {d['torch']}, {d['date']}. Rows checked: both ends, "
            "each side of element 2^31 and 2^32, the middle. The wrong rows past 2^32 are rows "
            f"{', '.join(f'{r:,}' for r in wrong)}: every checked row that starts at element 2^32 or later.*\n")
