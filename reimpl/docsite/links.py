"""Check a built site's internal links and anchors: every relative href (in HTML and inline SVG) must
name a page that exists and, when it has a #fragment, an id on that page. External links (with a
scheme) are not followed: the site must work offline, and the upstream permalinks are checked by
`python -m reimpl fetch-upstream` against the manifest instead.
"""
from __future__ import annotations

import posixpath
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        for key in ("href", "xlink:href"):
            if tag == "a" and a.get(key) is not None:
                self.hrefs.append(a[key])


def parse(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def _target(site: Path, page_rel: str, href: str) -> tuple[str, str] | None:
    """(target file relative to the site, fragment) for an internal href, or None for an external one."""
    u = urlsplit(href)
    if u.scheme or u.netloc:
        return None
    path = unquote(u.path)
    if not path:
        return page_rel, unquote(u.fragment)
    # an absolute path (MkDocs writes them in 404.html) starts at the site root
    base = "" if path.startswith("/") else posixpath.dirname(page_rel)
    joined = posixpath.normpath(posixpath.join(base, path.lstrip("/")))
    if path.endswith("/") or (site / joined).is_dir():
        joined = posixpath.normpath(posixpath.join(joined, "index.html"))
    return joined, unquote(u.fragment)


def check_site(site: Path) -> list[str]:
    """Problems: 'page: href -> why' for every broken internal link or anchor in the built site."""
    site = Path(site)
    pages = {str(p.relative_to(site)): parse(p) for p in site.rglob("*.html")}
    problems = []
    for rel, page in sorted(pages.items()):
        for href in page.hrefs:
            t = _target(site, rel, href)
            if t is None:
                continue
            file, frag = t
            if file.startswith(".."):
                problems.append(f"{rel}: {href} -> leaves the site")
            elif not (site / file).exists():
                problems.append(f"{rel}: {href} -> no file {file}")
            elif frag and file.endswith(".html") and frag not in pages[file].ids:
                problems.append(f"{rel}: {href} -> no id '{frag}' in {file}")
    return problems
