"""CPU: the glossary and the home page's routes. The hover definitions come from one snippet,
docs/includes/abbreviations.md, that pymdownx.snippets appends to every page (mkdocs.yml `auto_append`)
and Python-Markdown's `abbr` turns into `<abbr title=...>`. Every term defined there is also in the
glossary page; the built site really shows the definitions; and the home page links, in one click,
every page of the "Reading guide" section of the nav and the glossary."""
from __future__ import annotations

import re

from reimpl.docsite.links import parse
from tests.site_helpers import ROOT, built_site

ABBREVIATIONS = ROOT / "docs" / "includes" / "abbreviations.md"
GLOSSARY = ROOT / "docs" / "glossary.md"
DEFINITION = re.compile(r"^\*\[(?P<key>[^\]]+)\]:[ ]*(?P<title>.*)$")


def _abbreviations() -> dict[str, str]:
    out: dict[str, str] = {}
    for no, line in enumerate(ABBREVIATIONS.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        m = DEFINITION.match(line)
        assert m, f"abbreviations.md:{no} is not a '*[term]: definition' line: {line!r}"
        assert m["key"] not in out, f"abbreviations.md:{no}: {m['key']!r} defined twice"
        out[m["key"]] = m["title"].strip()
    return out


def _nav_section(title: str) -> list[str]:
    """The .md paths listed under the top-level nav entry `title`, by a plain text parse of mkdocs.yml
    (it may carry python tags that yaml.safe_load refuses)."""
    lines = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").splitlines()
    start = next(i for i, l in enumerate(lines) if re.match(rf"^(\s*)- {re.escape(title)}:\s*$", l))
    indent = len(lines[start]) - len(lines[start].lstrip())
    pages = []
    for line in lines[start + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        m = re.search(r":\s*([\w./-]+\.md)\s*$", line)
        if m:
            pages.append(m.group(1))
    return pages


def _page_url(md: str) -> str:
    """docs-relative .md path -> the directory URL MkDocs writes for it, relative to the site root."""
    return "" if md == "index.md" else md.removesuffix(".md").removesuffix("/index") + "/"


def test_every_term_has_a_definition_and_a_glossary_entry():
    abbrs = _abbreviations()
    assert len(abbrs) >= 25
    for core in ("warp", "Welford", "Chan", "FTZ", "FMA", "FFMA", "SASS", "PTX", "NVRTC", "ULP",
                 "GammaBeta", "SM", "T_ACC", "eps", "rstd", "dX", "rsqrtf", "occupancy", "L2"):
        assert core in abbrs, core
    glossary = " ".join(GLOSSARY.read_text(encoding="utf-8").split())  # a term may wrap across lines
    missing = [k for k in abbrs if not re.search(rf"(?<![\w.]){re.escape(k)}(?![\w])", glossary, re.I)]
    assert missing == [], f"terms defined for hovering but absent from docs/glossary.md: {missing}"
    short = [k for k, t in abbrs.items() if len(t.split()) < 6 or "`" in t or "**" in t]
    assert short == [], f"definitions too short, or with markup a title attribute would show raw: {short}"


def test_the_appended_snippet_is_wired_in_mkdocs_yml():
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^\s*- abbr\s*$", text, re.M)
    assert re.search(r"auto_append:\s*\n\s*- docs/includes/abbreviations\.md", text)
    assert "glossary.md" in _nav_all(text)


def _nav_all(text: str) -> str:
    return text[text.index("\nnav:"):]


def test_built_pages_show_hover_definitions():
    site, abbrs = built_site(), _abbreviations()
    assert not (site / "includes").exists(), "docs/includes/ must not be built as pages"
    pages = {
        "numerics/index.html": ["FFMA", "NVRTC", "Welford"],
        "guide/reductions/index.html": ["warp", "Welford", "shuffle"],
        "guide/judge/index.html": ["flush-to-zero", "ULP", "rstd"],
        "ladder/fast/index.html": ["occupancy", "L2", "dX", "SM"],
    }
    for page, terms in pages.items():
        html = (site / page).read_text(encoding="utf-8")
        for term in terms:
            title = abbrs[term].replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
            assert f'<abbr title="{title}">{term}</abbr>' in html, f"{page}: no hover definition of {term}"
        # code is left alone: no abbr inside a code span or block
        for code in re.findall(r"<code\b.*?</code>", html, re.S):
            assert "<abbr" not in code, f"{page}: an abbreviation inside code"
    # the definition lines themselves never reach a page
    for page in site.rglob("*.html"):
        assert "*[FTZ]" not in page.read_text(encoding="utf-8"), page


def test_home_page_routes_reach_every_reading_guide_page_and_the_glossary():
    site = built_site()
    guide = _nav_section("Reading guide")
    assert len(guide) >= 7 and "guide/judge.md" in guide
    routes = guide + ["glossary.md", "upstream/layer_norm_kernel.md", "numerics.md", "parity.md",
                      "releases.md", "ladder/index.md", "ladder/rungs.md", "ladder/fast.md",
                      "ladder/pattern.md", "ladder/batchnorm.md", "ladder/softmax.md"]
    home = parse(site / "index.html")
    article = (site / "index.html").read_text(encoding="utf-8")
    article = article[article.index('<article'):article.index('</article>')]  # not the nav sidebar
    hrefs = {h.split("#")[0] for h in re.findall(r'<a [^>]*href="([^"]+)"', article)}
    assert set(hrefs) <= {h.split("#")[0] for h in home.hrefs}
    missing = [md for md in routes if _page_url(md) not in hrefs]
    assert missing == [], f"the home page's own text does not link: {missing}"
    for md in routes:
        assert (site / _page_url(md) / "index.html").exists(), md
    assert 'class="grid cards"' in article
