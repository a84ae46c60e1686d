"""Build-time expansion of the docs' directives, so that what can drift is generated from its source:

    {% symbol NAME %}        upstream permalink + our-source link (from reference/upstream.json) and our
                             code, included by snippet section (never pasted)
    {% diagram NAME %}       an inline SVG from reimpl.docsite.diagrams
    {% parity %}             tables from the committed GPU summaries in results/
    {% numerics_example %}   results/numerics_example.json, or "not yet measured"
    {% symbol_index %}       every manifest symbol with its docs anchor, upstream lines and our file
    {% layers %}             the package's layers (reimpl/layers.py): folder, purpose, what each may import
    {% ladder_* ARG %}       the study ladder's tables and charts (reimpl/docsite/ladder_tables.py)
    {% releases %}, {% releases_gpu %}   the torch release matrix (reimpl/docsite/releases_table.py)
    {% host_overhead %}, {% host_profile %}   host time per call (reimpl/docsite/host_table.py)
    {% siblings_* %}, {% softmax_errors %}, {% batchnorm_errors %}, {% merge_order %}
                             BatchNorm's and softmax's pages (reimpl/docsite/siblings_tables.py)

Each directive sits alone on its line. An unknown directive is an error, so a typo fails the build.
"""
from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path

from ..layers import LAYERS
from ..upstream import manifest as manifest_mod
from . import host_table, ladder_tables, releases_table, siblings_tables
from .diagrams import DIAGRAMS

ROOT = manifest_mod.ROOT
RESULTS = ROOT / "results"
DIRECTIVE = re.compile(r"^\{% (\w+)(?: ([\w.]+))? %\}$", re.M)
LANG = {".py": "python", ".cu": "cuda", ".cuh": "cuda", ".h": "cuda"}


def source_page(file: str) -> str:
    """Docs path of the generated page that shows one of our source files (see docs_hooks)."""
    return f"source/{file}.md"


def rel(page: str, target: str) -> str:
    """Relative Markdown link from docs page `page` to docs path `target` (MkDocs resolves .md links)."""
    return posixpath.relpath(target, posixpath.dirname(page) or ".")


def symbol(m: dict, name: str, page: str) -> str:
    s = m["symbols"].get(name)
    if s is None:
        return (f'!!! note "Not mirrored yet"\n    `{name}` is not in `reference/upstream.json` yet, so this '
                "section has no code or upstream link; the explanation below describes upstream.\n")
    file, section = s["ours"].split(":")
    a, b = s["lines"]
    up = f"[`{posixpath.basename(s['file'])}` L{a}–L{b}]({manifest_mod.permalink(m, name)}){{ .upstream-link }}"
    ours = f"[`{file}`]({rel(page, source_page(file))}#{section}){{ .ours-link }}"
    lang = LANG[Path(file).suffix]
    return (f'<div class="symbol-links" markdown>Upstream at `{m["commit"][:10]}`: {up} · Ours: {ours}</div>\n\n'
            f'```{lang} title="{file} · {section}"\n--8<-- "{snippet_ref(file, section)}"\n```\n')


def snippet_ref(file: str, section: str) -> str:
    """pymdownx.snippets' reference to a section. Its section names must start with a letter, so for
    names like `_fused_rms_norm_cuda` we pass the section's line range, found from the markers now."""
    if re.fullmatch(r"[a-zA-Z][-_0-9a-zA-Z]*", section):
        return f"{file}:{section}"
    lines = (ROOT / file).read_text().splitlines()
    start = [i for i, l in enumerate(lines, 1) if re.search(rf"--8<-- \[start:{re.escape(section)}\]", l)]
    end = [i for i, l in enumerate(lines, 1) if re.search(rf"--8<-- \[end:{re.escape(section)}\]", l)]
    if len(start) != 1 or len(end) != 1 or end[0] <= start[0]:
        raise ValueError(f"{file}: no single section [start:{section}] ... [end:{section}]")
    return f"{file}:{start[0] + 1}:{end[0] - 1}"


def symbol_index(m: dict, page: str) -> str:
    rows = ["| upstream symbol | upstream lines | ours |", "|---|---|---|"]
    for name, s in m["symbols"].items():
        doc_page, anchor = s["docs"].split("#")
        file, section = s["ours"].split(":")
        a, b = s["lines"]
        rows.append(f"| [`{name}`]({rel(page, doc_page)}#{anchor}) | [`{posixpath.basename(s['file'])}` L{a}–L{b}]"
                    f"({manifest_mod.permalink(m, name)}) | [`{file}`]({rel(page, source_page(file))}#{section}) |")
    return "\n".join(rows) + "\n"


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
            out.append("\n" + _groups_table(d["parity_groups"], d.get("totals")))
        if "step_trace" in d:
            t = d["step_trace"]
            out.append(f"\nStep traces (`tests/test_trace_gpu.py`, see [Stepping through the kernels]"
                       f"(guide/stepping.md)): {t['cases']:,} cases, {t['records_compared']:,} GPU trace records "
                       f"compared with the emulator's, {t['mismatched_cases']:,} cases differing.\n")
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
            out.append(_bits_rows(d["diffs"][t]))
    return "".join(out)


def layers_table() -> str:
    rows = ["| layer | where | what it holds | may import |", "|---|---|---|---|"]
    for layer in LAYERS:
        may = ", ".join(layer.may_import) or "nothing else of reimpl"
        rows.append(f"| **{layer.name}** | `{layer.folder}` | {layer.purpose} | {may} |")
    return "\n".join(rows) + "\n"


def expand(markdown: str, page: str, root: str, m: dict | None = None) -> str:
    """Replace every directive in `markdown` (the text of docs page `page`; `root` is the relative URL
    from that page to the site root)."""
    m = m or manifest_mod.load()

    def one(match: re.Match) -> str:
        kind, arg = match.group(1), match.group(2)
        if kind == "symbol" and arg:
            return symbol(m, arg, page)
        if kind == "diagram" and arg in DIAGRAMS:
            return f'<div class="diagram-box">{DIAGRAMS[arg](root)}</div>'
        if kind == "parity" and not arg:
            return parity()
        if kind == "numerics_example" and not arg:
            return numerics_example()
        if kind == "host_overhead" and not arg:
            return host_table.host_table(host_table.load())
        if kind == "host_profile" and not arg:
            return host_table.host_profile(host_table.load())
        if kind == "symbol_index" and not arg:
            return symbol_index(m, page)
        if kind == "layers" and not arg:
            return layers_table()
        if kind == "ladder_errors" and arg:
            return ladder_tables.errors(arg)
        if kind == "ladder_bandwidth" and arg:
            return ladder_tables.bandwidth(arg)
        if kind == "ladder_training" and arg:
            return ladder_tables.training(arg)
        if kind == "ladder_chart" and arg:
            return f'<div class="diagram-box">{ladder_tables.chart(arg)}</div>'
        if kind == "ladder_stamp" and not arg:
            return ladder_tables.stamp()
        if kind == "releases" and not arg:
            return releases_table.summary()
        if kind == "releases_gpu" and not arg:
            return releases_table.gpu_families()
        if kind == "fast_bandwidth" and arg:
            return ladder_tables.fast_bandwidth(arg)
        if kind == "fast_chart" and arg:
            return ladder_tables.fast_chart(arg)
        if kind == "ladder_ncu" and arg in ladder_tables.NCU:
            return ladder_tables.ncu(arg)
        if kind == "fast_experiments" and not arg:
            return ladder_tables.fast_experiments()
        if kind == "fast_rows_sweep" and not arg:
            return ladder_tables.fast_rows_sweep()
        if kind == "fast_grad_bandwidth" and arg:
            return ladder_tables.fast_grad_bandwidth(arg)
        if kind == "fast_grad_chart" and arg:
            return ladder_tables.fast_grad_chart(arg)
        sibling = siblings_tables.expand(kind, arg)
        if sibling is not None:
            return sibling
        raise ValueError(f"{page}: unknown directive {match.group(0)!r}")

    return DIRECTIVE.sub(one, markdown)
