"""Our code on the docs pages: the `<!-- code: ... -->` directive and the generated source pages of
the emulator and the trace tools.

    <!-- code: reimpl/emulator/welford.py WarpReduce -->
    <!-- code: reimpl/mirror/cuda/trace.cuh "#define REIMPL_TRACE(kind" "#endif" -->
        Our code, included by pymdownx.snippets by line range. The range is found now, when the site
        is built (a Python def or class by its dotted name, or from the first line containing the first
        text through the next line that starts with the second), so it cannot drift. A link to the file's
        generated source page sits above it.

The source pages (`extra_source_files`, `render_extra_source`) show the whole file with one heading per
top-level definition, so `source/reimpl/emulator/welford.py/#WarpReduce` is a stable link like the
ones the hooks make for the mirror.
"""
from __future__ import annotations

import ast
import shlex

from .source_links import LANG, ROOT, rel, source_page


def extra_source_files() -> list[str]:
    """Our files that have a generated source page besides the manifest's: the emulator, the CUDA
    trace header and the GPU trace reader (found now, so a new emulator module gets a page too)."""
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "reimpl" / "emulator").glob("*.py")
                   if p.name != "__init__.py")
    tracers = ("reimpl/mirror/cuda/trace.cuh", "reimpl/checks/gpu_trace.py")
    return ["reimpl/emulator/__init__.py"] + files + [f for f in tracers if (ROOT / f).exists()]


def _py_blocks(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of each top-level def/class, its decorators and the comment
    lines right above it included (1-based)."""
    lines = text.splitlines()
    out = []
    try:
        body = ast.parse(text).body
    except SyntaxError:   # a file being edited: the page shows it whole, without headings
        return []
    for node in body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        while start > 1 and lines[start - 2].startswith("#"):
            start -= 1
        out.append((node.name, start, node.end_lineno))
    return out


def render_extra_source(file: str) -> str:
    """A generated page with the whole file, in order; each top-level def/class of a Python file
    under a heading whose id is its name."""
    text = (ROOT / file).read_text()
    lang = LANG[file[file.rindex("."):]]
    out = [f"# `{file}`\n\nGenerated at build time from the file itself: every line, in order"
           + (", each top-level definition under its own heading.\n" if file.endswith(".py") else ".\n")]
    lines = text.splitlines()
    cuts = _py_blocks(text) if file.endswith(".py") else []
    pos = 1
    for name, a, b in cuts + [(None, len(lines) + 1, len(lines))]:
        if a > pos and any(l.strip() for l in lines[pos - 1:a - 1]):
            out.append(f'```{lang} linenums="{pos}"\n' + "\n".join(lines[pos - 1:a - 1]) + "\n```\n")
        if name is None:
            break
        out.append(f"## `{name}` {{ #{name} }}\n")
        out.append(f'```{lang} linenums="{a}"\n' + "\n".join(lines[a - 1:b]) + "\n```\n")
        pos = b + 1
    return "\n".join(out)


def _def_range(file: str, name: str) -> tuple[int, int]:
    """Lines of a (possibly dotted: Class.method) definition in a Python file, decorators included."""
    tree = ast.parse((ROOT / file).read_text())
    body, found = tree.body, None
    for part in name.split("."):
        found = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and n.name == part), None)
        if found is None:
            raise ValueError(f"{file}: no definition {name!r}")
        body = found.body
    return min([found.lineno] + [d.lineno for d in found.decorator_list]), found.end_lineno


def _text_range(file: str, first: str, last: str) -> tuple[int, int]:
    lines = (ROOT / file).read_text().splitlines()
    a = next((i for i, l in enumerate(lines, 1) if first in l), None)
    b = next((i for i, l in enumerate(lines, 1) if a and i >= a and l.strip().startswith(last)), None)
    if a is None or b is None:
        raise ValueError(f"{file}: no lines from {first!r} to {last!r}")
    return a, b


def code(args: str, page: str) -> str:
    """The Markdown that replaces one code directive (`args`: its text after `code:`) on docs page `page`."""
    parts = shlex.split(args)
    if len(parts) not in (2, 3) or not (ROOT / parts[0]).is_file():
        raise ValueError(f"{page}: bad code directive {args!r}")
    file = parts[0]
    if len(parts) == 2:
        a, b = _def_range(file, parts[1])
        what, anchor = parts[1], parts[1].split(".")[0]
    else:
        a, b = _text_range(file, parts[1], parts[2])
        what, anchor = parts[1], None
    if file in extra_source_files():
        target = source_page(file)
        if anchor and not file.endswith(".py"):
            anchor = None
    else:  # a manifest file: its page has no per-definition headings, link the page
        target, anchor = source_page(file), None
    link = f"[`{file}`]({rel(page, target)}{'#' + anchor if anchor else ''})"
    lang = LANG[file[file.rindex("."):]]
    return (f'<div class="symbol-links" markdown>Ours: {link} · `{what}` · lines {a}–{b}, included when the site '
            f'is built</div>\n\n```{lang} title="{file} · lines {a}–{b}" linenums="{a}"\n'
            f'--8<-- "{file}:{a}:{b}"\n```\n')
