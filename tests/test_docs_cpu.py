"""CPU: the docs site and the manifest agree both ways, and the site builds strictly with no broken
internal link or anchor. Every manifest symbol needs (besides its mirror: test_manifest_cpu) a heading with its
docs anchor on the page its `docs` field names, that heading's `{% symbol %}` directive, and a valid
upstream range; the built section must link the upstream permalink and our source."""
import json
import re
from pathlib import Path

import pytest

from reimpl.docsite import parity_tables, source_links
from reimpl.docsite import render as docs_render
from reimpl.upstream import manifest
from reimpl.docsite.links import check_site, parse
from tests.site_helpers import ROOT, built_site

DOCS = ROOT / "docs"


def _anchors(page: Path) -> dict[str, str]:
    """heading id -> the Markdown that follows it, up to the next heading."""
    text = page.read_text()
    heads = list(re.finditer(r"^#+ .*\{ #([\w.-]+) \}\s*$", text, re.M))
    return {h.group(1): text[h.end():(heads[i + 1].start() if i + 1 < len(heads) else len(text))]
            for i, h in enumerate(heads)}


def test_every_symbol_has_mirror_docs_section_and_valid_range():
    m = manifest.load()  # the mirror side (sections and their comments) is tests/test_manifest_cpu.py's
    problems = []
    by_file: dict[str, list[tuple[int, int, str]]] = {}
    for name, s in m["symbols"].items():
        page, anchor = s["docs"].split("#")
        sections = _anchors(DOCS / page) if (DOCS / page).exists() else {}
        if anchor not in sections:
            problems.append(f"{name}: no heading with id {anchor} in docs/{page}")
        elif f"{{% symbol {name} %}}" not in sections[anchor]:
            problems.append(f"{name}: docs/{page}#{anchor} lacks its {{% symbol {name} %}} line")
        a, b = s["lines"]
        if s["file"] not in m["files"] or not (isinstance(a, int) and isinstance(b, int) and 1 <= a <= b):
            problems.append(f"{name}: bad upstream file or range {s['file']} {s['lines']}")
        by_file.setdefault(s["file"], []).append((a, b, name))
    for file, ranges in by_file.items():  # ranges of one file may nest (a struct in a namespace) but not overlap
        ranges.sort()
        for (a1, b1, n1), (a2, b2, n2) in zip(ranges, ranges[1:]):
            if a2 <= b1 < b2:
                problems.append(f"{file}: {n1} L{a1}-L{b1} overlaps {n2} L{a2}-L{b2}")
    assert problems == []


def test_fixed_point_falls_in_LayerNormKernelImplInternal():
    """torch's own error location layer_norm_kernel.cu:1093 is the grid check in LayerNormKernelImplInternal."""
    a, b = manifest.load()["symbols"]["LayerNormKernelImplInternal"]["lines"]
    assert a <= 1093 <= b


def test_site_builds_strict_with_no_broken_links():
    site = built_site()
    assert check_site(site) == []


def test_built_sections_link_upstream_and_our_source():
    m, site = manifest.load(), built_site()
    for name, s in m["symbols"].items():
        page, anchor = s["docs"].split("#")
        html = (site / page.removesuffix(".md") / "index.html").read_text()
        start = html.index(f'id="{anchor}"')
        nxt = re.search(r"<h[1-4] id=", html[start + 1:])
        section = html[start:start + 1 + nxt.start()] if nxt else html[start:]
        assert manifest.permalink(m, name) in section, name
        file, sec = s["ours"].split(":")
        assert f'source/{file}/#{sec}"' in section, name
        assert "highlight" in section, f"{name}: no code block"


def test_link_checker_catches_broken_links_and_anchors(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "index.html").write_text('<h2 id="here">x</h2><a href="a/">ok</a><a href="#here">ok</a>'
                                         '<a href="https://example.org/x">external</a>')
    (tmp_path / "a" / "index.html").write_text('<a href="../#here">ok</a><a href="../#gone">bad anchor</a>'
                                               '<a href="../b/">bad page</a><svg><a href="../#nope">svg</a></svg>')
    assert sorted(check_site(tmp_path)) == sorted([
        "a/index.html: ../#gone -> no id 'gone' in index.html",
        "a/index.html: ../b/ -> no file b/index.html",
        "a/index.html: ../#nope -> no id 'nope' in index.html"])
    assert "here" in parse(tmp_path / "index.html").ids


def test_unknown_directive_fails_the_build():
    with pytest.raises(ValueError, match="unknown directive"):
        docs_render.expand("text\n{% symbl cuWelfordCombine %}\n", "upstream/x.md", "../../")


def test_symbol_not_yet_in_manifest_renders_a_note_and_no_include():
    out = docs_render.expand("{% symbol not_a_symbol_yet %}", "upstream/layer_norm_kernel.md", "../../")
    assert "Not mirrored yet" in out and "--8<--" not in out


def test_snippet_reference_for_names_snippets_cannot_parse():
    """pymdownx.snippets' section names start with a letter; `_name` sections are included by line range."""
    ref = source_links.snippet_ref("reimpl/mirror/layer_norm_kernel.py", "_fused_rms_norm_cuda")
    file, a, b = ref.split(":")
    lines = (ROOT / file).read_text().splitlines()
    assert "[start:_fused_rms_norm_cuda]" in lines[int(a) - 2] and "[end:_fused_rms_norm_cuda]" in lines[int(b)]
    assert source_links.snippet_ref("reimpl/mirror/cuda/layer_norm_kernel.cu", "compute_stats").endswith(":compute_stats")
    with pytest.raises(ValueError):
        source_links.snippet_ref("reimpl/mirror/layer_norm_kernel.py", "_no_such_section")


def test_parity_page_renders_committed_numbers(monkeypatch, tmp_path):
    forward = json.loads((ROOT / "results/gpu_suite_forward.json").read_text())
    text = parity_tables.parity()
    assert f"{forward['totals']['elements_compared']:,}" in text and forward["device"] in text
    monkeypatch.setattr(parity_tables, "RESULTS", tmp_path)
    assert parity_tables.parity().count("Not yet measured") == 2


def test_numerics_example_renders_file_or_says_not_measured(monkeypatch, tmp_path):
    monkeypatch.setattr(parity_tables, "RESULTS", tmp_path)
    assert "Not yet measured" in parity_tables.numerics_example()
    row = {"index": 3, "aligned": "0x3f800000", "offset": "0x3f800001", "aligned_value": "1.0",
           "offset_value": "1.0000001", "x": "0.5"}
    (tmp_path / "numerics_example.json").write_text(json.dumps({
        "device": "GPU", "torch": "2.11.0", "date": "d", "seed": 7, "tries": 8, "shape": [1, 8], "dtype": "float32",
        "eps": 1e-5, "kernels": {"aligned": ["vectorized_layer_norm_kernel"], "offset": ["RowwiseMomentsCUDAKernel"]},
        "counts": {"out": 1, "mean": 0, "rstd": 0}, "numel": {"out": 8, "mean": 1, "rstd": 1},
        "diffs": {"out": [row], "mean": [], "rstd": []}}))
    text = parity_tables.numerics_example()
    assert "0x3f800001" in text and "seed 7" in text and "Not yet measured" not in text


# a path the prose names as it once was, saying so ("was `...`"), is history, not a pointer
_REPO_PATH = re.compile(r"(?<!was )`((?:reimpl|scripts|tests|results|reference)/[A-Za-z0-9_./-]+)`")


def test_every_repository_path_the_prose_names_exists():
    """A path in code quotes on a page or in the README (reimpl/..., scripts/..., tests/...,
    results/..., reference/...) names a file or folder of this repository."""
    root = DOCS.parent
    texts = {p.relative_to(root).as_posix(): p.read_text() for p in [*DOCS.rglob("*.md"), root / "README.md"]}
    missing = sorted({(name, m) for name, text in texts.items() for m in _REPO_PATH.findall(text)
                      if not (root / m.rstrip("/.")).exists()})
    assert not missing, missing
