"""MkDocs hooks (mkdocs.yml `hooks:`): generate what must not drift, at build time.

- on_files: one page per source file of ours that mirrors upstream (`source/<file>.md`), showing the
  whole file in order, each snippet section under a heading whose id is the section name, so that
  `source/reimpl/mirror/cuda/layer_norm_kernel.cu/#cuWelfordCombine` is a stable link to our code.
  on_config lists those pages in the nav.
- on_page_markdown: expand the `{% ... %}` directives (reimpl.docsite.render), after the trace and
  code directives (reimpl.docsite.traces: tiny examples emulated at build time).
- The emulator and trace tools get generated source pages too (reimpl.docsite.code_excerpts.extra_source_files).
"""
from __future__ import annotations

import re

from mkdocs.structure.files import File

from reimpl.docsite import code_excerpts, traces
from reimpl.upstream import manifest as manifest_mod
from reimpl.docsite.render import expand
from reimpl.docsite.source_links import LANG, source_page

_MARK = re.compile(r"--8<-- \[(start|end):([\w.]+)\]")


def _chunks(text: str):
    """(section or None, first line number, lines) runs of a source file, marker lines dropped."""
    cur, start, buf = None, 1, []
    for no, line in enumerate(text.splitlines(), 1):
        m = _MARK.search(line)
        if m:
            if buf:
                yield cur, start, buf
            cur, start, buf = (m.group(2) if m.group(1) == "start" else None), no + 1, []
        else:
            buf.append(line)
    if buf:
        yield cur, start, buf


def render_source(file: str) -> str:
    text = (manifest_mod.ROOT / file).read_text()
    lang = LANG[file[file.rindex("."):]]
    out = [f"# `{file}`\n\nGenerated at build time from the file itself: every line, in order. Sections that "
           "mirror an upstream symbol have their own heading; the explanation is linked from each.\n"]
    for section, start, lines in _chunks(text):
        if not any(l.strip() for l in lines):
            continue
        if section:
            out.append(f"## {section} {{ #{section} }}\n")
        out.append(f'```{lang} linenums="{start}"\n' + "\n".join(lines) + "\n```\n")
    return "\n".join(out)


def source_files(m: dict) -> list[str]:
    return sorted({s["ours"].split(":")[0] for s in m["symbols"].values()})


def on_config(config):
    """Expand the nav entry `Our source: source/index.md` into the index plus one entry per file."""
    files = source_files(manifest_mod.load()) + code_excerpts.extra_source_files()
    for i, item in enumerate(config["nav"]):
        if isinstance(item, dict) and item.get("Our source") == "source/index.md":
            config["nav"][i] = {"Our source": ["source/index.md"] + [{f: source_page(f)} for f in files]}
    return config


def on_files(files, config):
    m = manifest_mod.load()
    listing = ["# Our source\n", "The files of this repository that mirror upstream, rendered whole:\n"]
    for file in source_files(m):
        files.append(File.generated(config, source_page(file), content=render_source(file)))
        listing.append(f"- [`{file}`]({file}.md)")
    listing.append("\nThe CPU emulator and the step-trace tools (see [stepping through the kernels](../guide/stepping.md)):\n")
    for file in code_excerpts.extra_source_files():
        files.append(File.generated(config, source_page(file), content=code_excerpts.render_extra_source(file)))
        listing.append(f"- [`{file}`]({file}.md)")
    files.append(File.generated(config, "source/index.md", content="\n".join(listing) + "\n"))
    return files


def on_page_markdown(markdown, page, config, files):
    root = "../" * page.url.count("/")
    markdown = traces.expand(markdown, page.file.src_uri, root)
    return expand(markdown, page.file.src_uri, root)
