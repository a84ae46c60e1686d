"""The built site holds nothing raw: no unrendered directive or template tag, no snippet marker or
trace comment, no markdown that failed to render (bold markers, links to .md files, code fences,
heading hashes), in the text a reader sees (code blocks and scripts excluded). A strict build does
not catch these: they are valid HTML text."""
from __future__ import annotations

import html
import re

from tests.site_helpers import built_site

RESIDUE = {
    "an unrendered directive": re.compile(r"\{%|%\}"),
    "a template tag": re.compile(r"\{\{|\}\}"),
    "a snippet marker": re.compile(r"--8<--"),
    "a trace or code comment": re.compile(r"<!-- (?:trace|code)\b"),
    "bold markers": re.compile(r"\*\*[^*\s][^*]*\*\*"),
    "a markdown link": re.compile(r"\]\((?:\.\.?/|[\w/-]+\.md)"),
    "a code fence": re.compile(r"```"),
    "heading hashes": re.compile(r"^\s*#{1,6} \w", re.M),
}


def visible_text(page: str) -> str:
    body = re.sub(r"<(pre|code|script|style|svg)\b.*?</\1>", " ", page, flags=re.S)
    body = re.sub(r"<!--(?! (?:trace|code)\b).*?-->", " ", body, flags=re.S)  # keep the residue comments
    return html.unescape(re.sub(r"<(?!!--)[^>]+>", " ", body))


def test_no_page_shows_raw_source():
    site = built_site()
    found = []
    for f in sorted(site.rglob("*.html")):
        text = visible_text(f.read_text(encoding="utf-8"))
        for what, pat in RESIDUE.items():
            hits = pat.findall(text)
            if hits:
                found.append(f"{f.relative_to(site)}: {what} ({len(hits)}x, e.g. {hits[0]!r})")
    assert not found, "\n".join(found)


def test_no_glossary_hover_inside_a_drawing():
    """The glossary's abbreviations are applied to every page's text; inside an inline SVG (a chart,
    a thread diagram, a tree) an <abbr> is not drawn, and the words it wraps vanish from the picture."""
    site = built_site()
    for path in sorted(site.rglob("*.html")):
        for svg in re.findall(r"<svg\b.*?</svg>", path.read_text(), re.S):
            assert "<abbr" not in svg, f"{path.relative_to(site)}: a glossary term inside a drawing"


def test_the_residue_check_finds_residue():
    page = "<p>{% fast_bandwidth fp32 flushed %}</p><p>see [x](../a.md) and **bold**</p><pre>{% ok %}</pre>"
    text = visible_text(page)
    assert RESIDUE["an unrendered directive"].search(text) and RESIDUE["a markdown link"].search(text)
    assert RESIDUE["bold markers"].search(text) and "ok" not in text
