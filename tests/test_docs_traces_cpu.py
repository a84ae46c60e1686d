"""CPU: the kernel pages' traces are generated when the site is built (reimpl/docs_traces.py), not
pasted. The Markdown holds only the directives; the built pages hold the tables and the tree SVGs;
every number in a table equals a fresh emulation's, bit for bit and as printed; the tree's edges are
the trace's own partner and slot fields; the guide's code is included from our files by line range."""
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from reimpl import docs_traces, emulator
from reimpl.emulator import trace
from tests.site_helpers import ROOT, built_site

PAGES = {"upstream/layer_norm_kernel": 5, "upstream/block_reduce": 2}   # page -> trace directives on it


class _Boxes(HTMLParser):
    """The trace boxes of a built page: directive, table cells, tree edges and nodes."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.boxes, self.depth, self._row, self._cell, self._text = [], 0, None, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and "trace-box" in (a.get("class") or "").split():
            self.boxes.append({"directive": a["data-directive"], "case": a["data-case"], "cells": [], "edges": [],
                               "nodes": [], "svg": 0})
            self.depth = 1
            return
        if not self.depth:
            return
        if tag == "div":
            self.depth += 1
        box = self.boxes[-1]
        if tag == "tr" and "data-kind" in a:
            self._row = (a["data-kind"], int(a["data-pos"]), int(a["data-thread"]))
        elif tag == "td" and "data-field" in a and self._row:
            self._cell = (*self._row, a["data-field"], a["data-bits"])
        elif tag == "code" and self._cell:
            self._text = ""
        elif tag == "svg":
            box["svg"] += 1
        elif tag == "g" and "trt-edge" in (a.get("class") or ""):
            box["edges"].append((a["data-kind"], int(a["data-pos"]), int(a["data-from"]), int(a["data-to"]),
                                 a["data-edge"]))
        elif tag == "g" and "trt-node" in (a.get("class") or ""):
            box["nodes"].append((a["data-kind"], int(a["data-thread"])))

    def handle_data(self, data):
        if self._text is not None:
            self._text += data

    def handle_endtag(self, tag):
        if not self.depth:
            return
        if tag == "code" and self._text is not None:
            self.boxes[-1]["cells"].append((*self._cell, self._text))
            self._text, self._cell = None, None
        elif tag == "tr":
            self._row = None
        elif tag == "div":
            self.depth -= 1


def _boxes(page: str) -> list[dict]:
    p = _Boxes()
    p.feed((built_site() / page / "index.html").read_text())
    return p.boxes


def _fresh(directive: str):
    """The steps of the directive's kernel and block, from an emulation made here (not docs_traces')."""
    opts = docs_traces.parse_directive(directive)
    case = docs_traces.case_of(opts)
    x, w, b = case.make_inputs("cpu")
    with trace.recording() as tr:
        emulator.run_case(case, x, w, b)
    block = int(opts.get("block", 0))
    return case, [s for s in tr.steps if s.kernel.split("<")[0] == opts["kernel"] and s.block == block]


def test_built_pages_show_trace_tables_and_trees():
    for page, n in PAGES.items():
        boxes = _boxes(page)
        assert len(boxes) == n, page
        assert all(b["cells"] for b in boxes), page
    lnk = _boxes("upstream/layer_norm_kernel")
    stats = next(b for b in lnk if "kinds=online,shfl_down" in b["directive"])
    assert stats["svg"] == 1 and stats["edges"] and {c[0] for c in stats["cells"]} == {
        "online", "shfl_down", "smem_write", "smem_combine", "stats"}
    assert sum(b["svg"] for b in lnk) >= 3 and sum(b["svg"] for b in _boxes("upstream/block_reduce")) == 2
    html = (built_site() / "upstream/layer_norm_kernel/index.html").read_text()
    assert "computed when this page was built" in html and "python -m reimpl trace --op layer_norm" in html


def test_markdown_holds_directives_not_numbers():
    for page in PAGES:
        md = (ROOT / "docs" / f"{page}.md").read_text()
        assert md.count("<!-- trace: ") == PAGES[page]
        assert "trace-box" not in md and "data-bits" not in md
        bits = {c[4] for b in _boxes(page) for c in b["cells"] if c[4].strip("0")}
        assert len(bits) > 50
        assert not [v for v in bits if v in md], page   # no value's bits appear in the source
        values = {c[5] for b in _boxes(page) for c in b["cells"] if len(c[5]) > 6}
        assert not [v for v in values if v in md], page  # nor its decimal form


def test_table_numbers_equal_a_fresh_emulation():
    checked = 0
    for page in PAGES:
        for box in _boxes(page):
            case, steps = _fresh(box["directive"])
            assert case.id == box["case"]
            for kind, pos, thread, name, bits, text in box["cells"]:
                assert steps[pos].kind == kind
                v = steps[pos].values[name][thread]
                assert docs_traces.bits_hex(v) == bits, (page, kind, pos, thread, name)
                back = np.asarray(int(text) if np.issubdtype(v.dtype, np.integer) else float(text), v.dtype)
                assert back == v or (np.isnan(back) and np.isnan(v)), (page, kind, pos, thread, name, text)
                checked += 1
    assert checked > 300


def test_tree_edges_are_the_traces_partner_and_slot_fields():
    for page in PAGES:
        for box in _boxes(page):
            if not box["svg"]:
                continue
            _, steps = _fresh(box["directive"])
            partner = 0
            for kind, pos, src, dst, edge in box["edges"]:
                s = steps[pos]
                assert s.kind == kind and s.active[dst]
                if edge == "partner":
                    assert int(s.aux[dst]) == src, (box["directive"], kind, pos, dst)
                    partner += 1
                elif edge in ("slot", "hop"):   # the step before wrote the slot this thread read, from `src`
                    w = steps[pos - 1]
                    assert docs_traces._aux(w.kind) == "slot" and w.index == s.index
                    assert w.active[src] and int(w.aux[src]) == int(s.aux[dst]), (box["directive"], kind, pos, dst)
                else:
                    assert edge == "own" and src == dst
            assert partner >= 5


def test_tree_of_a_1x64_row_links_lane_0_to_lane_16_then_8_4_2_1():
    """N = 64: only lanes 0..15 of warp 0 hold elements. The tree still has lane 0 take lane 16 in the
    round with offset 16 (an empty state, drawn as a grey dot), then lanes 8, 4, 2, 1."""
    _, steps = _fresh("op=layer_norm dtype=fp32 shape=1,64 kernel=vectorized_layer_norm_kernel")
    svg = docs_traces.tree(steps)
    edges = re.findall(r"data-kind='shfl_down' data-index='(\d)' data-pos='\d+' data-from='(\d+)' data-to='0' "
                       r"data-edge='partner'", svg)
    assert sorted((int(i), int(f)) for i, f in edges) == [(0, 16), (1, 8), (2, 4), (3, 2), (4, 1)]
    assert "thread 16 held an empty state" in svg
    nodes = [int(t) for t in re.findall(r"data-thread='(\d+)' data-kind='leaf'", svg)]
    assert sorted(nodes) == list(range(16))    # the 16 lanes that read a vector; the rest are empty


def test_tables_render_any_kind_generically(monkeypatch):
    """A kind the renderer has never seen (as the backward's will be) renders with its own aux and fields."""
    monkeypatch.setitem(trace.KINDS, "made_up", (99, "someDeviceFunction", "column", ("alpha", "beta")))
    s = trace.Step("k<float>", 0, "made_up", 2, "j = 7", np.array([True, True, False]), np.array([5, 6, -1]),
                   {"alpha": np.float32([1.5, 2.5, 0]), "beta": np.float64([0.25, -1, 0])})
    html = docs_traces.table("made_up", [s], [0, 1, 2], (3, 1, 1))
    assert "<th>column</th>" in html and "<th>alpha</th>" in html and "<th>beta</th>" in html
    assert 'data-thread="2"' not in html and 'data-bits="3fc00000"' in html and 'data-bits="3fd0000000000000"' in html


def test_directive_errors_fail_the_build():
    with pytest.raises(ValueError, match="unknown"):
        docs_traces.expand("<!-- trace: op=layer_norm dtype=fp32 shape=1,64 kernel=vectorized_layer_norm_kernel "
                           "colour=red -->\n", "x.md")
    with pytest.raises(ValueError, match="not among"):
        docs_traces.expand("<!-- trace: op=layer_norm dtype=fp32 shape=1,64 kernel=vectorized_layer_norm_kernel "
                           "kinds=reduce -->\n", "x.md")
    with pytest.raises(ValueError, match="runs no"):
        docs_traces.expand("<!-- trace: op=layer_norm dtype=fp32 shape=1,64 kernel=RowwiseMomentsCUDAKernel -->\n",
                           "x.md")
    with pytest.raises(ValueError, match="malformed"):
        docs_traces.expand("<!-- trace op=layer_norm -->\n", "x.md")


def test_code_directive_includes_our_lines_by_range():
    out = docs_traces.expand("<!-- code: reimpl/emulator/welford.py WarpReduce -->\n", "guide/stepping.md")
    a, b = map(int, re.search(r'--8<-- "reimpl/emulator/welford.py:(\d+):(\d+)"', out).groups())
    lines = (ROOT / "reimpl/emulator/welford.py").read_text().splitlines()
    assert lines[a - 1].startswith("def WarpReduce(") and lines[b - 1].strip() == "return val"
    assert "../source/reimpl/emulator/welford.py.md#WarpReduce" in out
    out = docs_traces.expand('<!-- code: reimpl/cuda/trace.cuh "#define REIMPL_TRACE(kind" "#endif" -->\n', "g.md")
    a, b = map(int, re.search(r'--8<-- "reimpl/cuda/trace.cuh:(\d+):(\d+)"', out).groups())
    lines = (ROOT / "reimpl/cuda/trace.cuh").read_text().splitlines()
    assert lines[a - 1].startswith("#define REIMPL_TRACE(kind") and lines[b - 1].startswith("#endif")
    guide = (ROOT / "docs/guide/stepping.md").read_text()
    assert "def WarpReduce" not in guide and "--8<--" in guide   # included, not pasted


def test_guide_and_emulator_source_pages_are_built():
    site = built_site()
    guide = (site / "guide/stepping/index.html").read_text()
    assert "WARP_SHFL_DOWN" in guide and "REIMPL_TRACE" in guide and "KINDS" in guide
    page = (site / "source/reimpl/emulator/welford.py/index.html").read_text()
    assert 'id="WarpReduce"' in page and 'id="BlockReduce"' in page
    assert (site / "source/reimpl/cuda/trace.cuh/index.html").exists()
