"""Links from the docs to upstream and to our source, and our code included by snippet section:

    {% symbol NAME %}        upstream permalink + our-source link (from reference/upstream.json) and our
                             code, included by snippet section (never pasted)
    {% symbol_index %}       every manifest symbol with its docs anchor, upstream lines and our file

`source_page` and `rel` are the paths every generated link to one of our files goes through.
"""
from __future__ import annotations

import posixpath
import re
from pathlib import Path

from ..upstream import manifest as manifest_mod

ROOT = manifest_mod.ROOT
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
