"""CPU: the built site in headless Chromium (Debian's /usr/bin/chromium, driven by Playwright), served
from 127.0.0.1 with every other host blocked, as on a machine with no network. Every page is visited:
no console errors, no request leaves the machine, every internal link and anchor resolves in the
rendered DOM, diagrams are drawn as SVG, and search finds cuWelfordCombine. A missing chromium is a
failure, not a skip: scripts/test.sh installs it."""
import os
import tempfile
from urllib.parse import urldefrag, urlsplit

import pytest

from tests.site_helpers import CHROMIUM, CHROMIUM_ARGS, built_site, serve


@pytest.fixture(scope="module")
def browser_report():
    assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing: apt-get install -y chromium (scripts/test.sh does)"
    from playwright.sync_api import sync_playwright
    site = built_site()
    pages = sorted(str(p.relative_to(site).parent) for p in site.rglob("index.html"))
    report = {"errors": [], "external": [], "ids": {}, "links": set(), "diagrams": {}, "search": []}
    with serve(site) as base, sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(tempfile.mkdtemp(prefix="reimpl-chromium-"),
                                                    executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            def route(r):
                if urlsplit(r.request.url).netloc == urlsplit(base).netloc:
                    return r.continue_()
                report["external"].append(r.request.url)
                return r.abort()
            ctx.route("**/*", route)
            page = ctx.new_page()
            page.on("console", lambda m: m.type == "error" and report["errors"].append(f"{page.url}: {m.text}"))
            page.on("pageerror", lambda e: report["errors"].append(f"{page.url}: {e}"))
            for rel in pages:
                url = f"{base}/" if rel == "." else f"{base}/{rel}/"
                page.goto(url, wait_until="networkidle")
                report["ids"][url] = set(page.eval_on_selector_all("[id]", "els => els.map(e => e.id)"))
                hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href.baseVal ?? e.href)")
                report["links"] |= {(url, h) for h in hrefs if h.startswith(base)}
                report["diagrams"][url] = page.eval_on_selector_all(
                    ".diagram-box > svg", "els => els.map(e => [e.dataset.diagram, e.getBoundingClientRect().width,"
                                          " e.getBoundingClientRect().height,"
                                          " e.querySelectorAll('rect,circle,path').length])")  # matplotlib's bars are paths
            page.goto(f"{base}/", wait_until="networkidle")
            page.keyboard.press("/")  # Material's search shortcut; typing fires the input events it listens to
            page.keyboard.type("cuWelfordCombine", delay=20)
            page.wait_for_selector(".md-search-result__item", timeout=15000)
            report["search"] = page.eval_on_selector_all(".md-search-result__item a", "els => els.map(e => e.href)")
        finally:
            ctx.close()
    report["base"] = base
    return report


def test_no_console_errors_and_nothing_leaves_the_machine(browser_report):
    assert browser_report["errors"] == []
    assert browser_report["external"] == []


def test_every_page_visited_and_every_internal_link_resolves(browser_report):
    ids = browser_report["ids"]
    assert len(ids) >= 12
    broken = []
    for page, href in sorted(browser_report["links"]):
        target, frag = urldefrag(href)
        if target not in ids:
            if not target.endswith((".json", ".css", ".js", ".xml", ".gz")):
                broken.append(f"{page}: {href} -> no page")
        elif frag and frag not in ids[target]:
            broken.append(f"{page}: {href} -> no id {frag}")
    assert broken == []


def test_diagrams_are_rendered_svg(browser_report):
    drawn = {d[0]: d for ds in browser_report["diagrams"].values() for d in ds}
    assert set(drawn) >= {"dispatch", "warp_shuffle", "interwarp", "ladder-fp32", "fast-bf16", "fast-dx-fp32"}
    for name, width, height, shapes in drawn.values():
        assert width > 200 and height > 100 and shapes >= 6, name


def test_search_finds_cuWelfordCombine(browser_report):
    hits = browser_report["search"]
    assert any("upstream/layer_norm_kernel/" in h and h.endswith("#cuWelfordCombine") for h in hits), hits
