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
