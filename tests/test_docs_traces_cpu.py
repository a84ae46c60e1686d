"""CPU: the kernel pages' traces are generated when the site is built (reimpl/docsite/traces.py), not
pasted. The Markdown holds only the directives; the built pages hold the tables and the tree SVGs;
every number in a table equals a fresh emulation's, bit for bit and as printed; the tree's edges are
the trace's own partner and slot fields; the guide's code is included from our files by line range.
The backward kernels' directives (backward=1) run the backward emulator; compute_gI's two
BlockReduceSum calls are two trees, each from its own leaves."""
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from reimpl.docsite import trace_collect, trace_tables, trace_tree_svg, trace_trees
from reimpl.docsite import traces as docs_traces
from reimpl import emulator
from reimpl.checks.cases_backward import BackwardCase
from reimpl.emulator import api, trace
from tests.site_helpers import ROOT, built_site

PAGES = {"upstream/layer_norm_kernel": 9, "upstream/block_reduce": 4}   # page -> trace directives on it
BACKWARD = {"upstream/layer_norm_kernel": 4, "upstream/block_reduce": 2}


class _Boxes(HTMLParser):
    """The trace boxes of a built page: directive, table cells, tree edges and nodes."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.boxes, self.depth, self._row, self._cell, self._text = [], 0, None, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and "trace-box" in (a.get("class") or "").split():
            self.boxes.append({"directive": a["data-directive"], "case": a["data-case"], "cells": [], "edges": [],
                               "nodes": [], "svg": 0, "trees": [], "notes": []})
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
            box["trees"].append({"call": int(a["data-call"]), "leaves": a["data-leaves"], "edges": [], "nodes": []})
        elif tag == "g" and "trt-edge" in (a.get("class") or ""):
            box["edges"].append((a["data-kind"], int(a["data-pos"]), int(a["data-from"]), int(a["data-to"]),
                                 a["data-edge"]))
            box["trees"][-1]["edges"].append(box["edges"][-1])
        elif tag == "g" and "trt-node" in (a.get("class") or ""):
            box["nodes"].append((a["data-kind"], int(a["data-thread"])))
            box["trees"][-1]["nodes"].append((a["data-kind"], int(a["data-thread"]), int(a["data-pos"]),
                                              dict(kv.split(":") for kv in a["data-bits"].split(";"))))
        elif tag == "p" and "trace-note" in (a.get("class") or ""):
            box["notes"].append("note")

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


def _fresh_backward(case):
    """(trace, outputs) of the case's backward made here: the case's grad_out, x, weight, bias; mean
    and rstd from the emulated forward, untraced."""
    dy, x, _, _, w, b = case.make_args("cpu")
    stats = emulator.run_case(case, x, w, b)[1:]
    mean, rstd = stats if case.op == "layer_norm" else (None, stats[0])
    ns = case.normalized_shape
    arr = {k: None if t is None else api.as_storage(t, case.dtype).reshape(case.shape if k in "dx" else ns)
           for k, t in dict(d=dy, x=x, w=w, b=b).items()}
    with trace.recording() as tr:
        if case.op == "layer_norm":
            outs = api.native_layer_norm_backward(arr["d"], arr["x"], ns, mean, rstd, arr["w"], arr["b"],
                                                  case.output_mask, offsets=(case.dy_offset, case.x_offset,
                                                                             case.w_offset, case.b_offset))
        else:
            outs = api.fused_rms_norm_backward(arr["d"], arr["x"], ns, rstd, arr["w"], case.output_mask,
                                               offsets=(case.dy_offset, case.x_offset, case.w_offset))
    return tr, outs


def _fresh(directive: str):
    """The steps of the directive's kernel and block, from an emulation made here (not trace_collect's)."""
    opts = trace_collect.parse_directive(directive)
    case = trace_collect.case_of(opts)
    if isinstance(case, BackwardCase):
        tr, _ = _fresh_backward(case)
    else:
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
    assert sum(b["svg"] for b in lnk) >= 6 and sum(b["svg"] for b in _boxes("upstream/block_reduce")) == 5
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
                assert trace_tables.bits_hex(v) == bits, (page, kind, pos, thread, name)
                back = np.asarray(int(text) if np.issubdtype(v.dtype, np.integer) else float(text), v.dtype)
                assert back == v or (np.isnan(back) and np.isnan(v)), (page, kind, pos, thread, name, text)
                checked += 1
    assert checked > 600


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
                elif edge in ("slot", "hop"):
                    # the slot this thread read was last written, before this read, by `src`
                    slot = int(s.aux[dst])
                    w = next(steps[j] for j in range(pos - 1, -1, -1) if trace_collect.aux_of(steps[j].kind) == "slot"
                             and steps[j].kind != kind and (steps[j].active & (steps[j].aux == slot)).any())
                    assert slot != trace.AUX_NONE and w.active[src] and int(w.aux[src]) == slot, \
                        (box["directive"], kind, pos, dst)
                else:
                    assert edge == "own" and src == dst
            assert partner >= 5


def test_tree_of_a_1x64_row_links_lane_0_to_lane_16_then_8_4_2_1():
    """N = 64: only lanes 0..15 of warp 0 hold elements. The tree still has lane 0 take lane 16 in the
    round with offset 16 (an empty state, drawn as a grey dot), then lanes 8, 4, 2, 1."""
    _, steps = _fresh("op=layer_norm dtype=fp32 shape=1,64 kernel=vectorized_layer_norm_kernel")
    svg = trace_tree_svg.tree(steps)
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
    html = trace_tables.table("made_up", [s], [0, 1, 2], (3, 1, 1))
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
    out = docs_traces.expand('<!-- code: reimpl/mirror/cuda/trace.cuh "#define REIMPL_TRACE(kind" "#endif" -->\n', "g.md")
    a, b = map(int, re.search(r'--8<-- "reimpl/mirror/cuda/trace.cuh:(\d+):(\d+)"', out).groups())
    lines = (ROOT / "reimpl/mirror/cuda/trace.cuh").read_text().splitlines()
    assert lines[a - 1].startswith("#define REIMPL_TRACE(kind") and lines[b - 1].startswith("#endif")
    guide = (ROOT / "docs/guide/stepping.md").read_text()
    assert "def WarpReduce" not in guide and "--8<--" in guide   # included, not pasted


def test_guide_and_emulator_source_pages_are_built():
    site = built_site()
    guide = (site / "guide/stepping/index.html").read_text()
    assert "WARP_SHFL_DOWN" in guide and "REIMPL_TRACE" in guide and "KINDS" in guide
    page = (site / "source/reimpl/emulator/welford.py/index.html").read_text()
    assert 'id="WarpReduce"' in page and 'id="BlockReduce"' in page
    assert (site / "source/reimpl/mirror/cuda/trace.cuh/index.html").exists()


# ---- backward ----------------------------------------------------------------------------------------------

def _backward_boxes():
    return [(page, b) for page in PAGES for b in _boxes(page) if "backward=1" in b["directive"]]


def test_backward_directives_run_the_backward_emulator():
    boxes = _backward_boxes()
    assert len(boxes) == sum(BACKWARD.values())
    for page, box in boxes:
        opts = trace_collect.parse_directive(box["directive"])
        case = trace_collect.case_of(opts)
        assert isinstance(case, BackwardCase) and case.id == box["case"] and "-bwd-" in case.id
        assert {c[0] for c in box["cells"]} <= set(trace.KINDS) and all(trace.KINDS[c[0]][0] >= 20 for c in box["cells"])
    kernels = {trace_collect.parse_directive(b["directive"])["kernel"] for _, b in boxes}
    assert kernels == {"layer_norm_grad_input_kernel", "layer_norm_grad_input_kernel_vectorized",
                       "GammaBetaBackwardCUDAKernelTemplate"}
    assert any("op=rms_norm" in b["directive"] for _, b in boxes)
    html = (built_site() / "upstream/layer_norm_kernel/index.html").read_text()
    assert "python -m reimpl trace --op layer_norm --dtype fp32" in html and "--backward --mask" in html
    assert "layer_norm_grad_input_kernel&lt;float, float, false&gt;" in html or \
        "layer_norm_grad_input_kernel<float, float, false>" in html


def test_backward_outputs_are_the_backward():
    """The glue feeds the backward the right inputs, mean and rstd: its grad_input is torch's (CPU)
    to rounding for LayerNorm, and the textbook formula's for RMSNorm (torch has no CPU kernel)."""
    for directive in ("backward=1 op=layer_norm dtype=fp32 shape=2,402 kernel=layer_norm_grad_input_kernel",
                      "backward=1 op=rms_norm dtype=fp32 shape=3,64 weight=0 kernel=layer_norm_grad_input_kernel"):
        case = trace_collect.case_of(trace_collect.parse_directive(directive))
        ex = trace_collect.emulate(case)
        _, fresh = _fresh_backward(case)
        assert len(ex.outputs) == len(fresh)
        for a, b in zip(ex.outputs, fresh):
            assert (a is None) == (b is None) and (a is None or np.array_equal(a.view(np.uint32), b.view(np.uint32)))
        args = case.make_args("cpu")
        if case.op == "layer_norm":
            ref = case.run_torch(*args)[0].numpy()
        else:
            x64, g = args[1].double().numpy(), args[0].double().numpy()
            r = 1 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + case.eps)
            xh = x64 * r
            ref = r * (g - xh * (g * xh).mean(-1, keepdims=True))
        np.testing.assert_allclose(ex.outputs[0], ref, rtol=1e-4, atol=1e-5)


def test_grad_input_reduction_calls_are_drawn_separately():
    """compute_gI's BlockReduceSum(stats_x1) and BlockReduceSum(stats_x2) are two trees: each one's
    edges lie within its own call's steps, and each one's leaves are its own sums, not the other
    call's result."""
    directive = "backward=1 op=layer_norm dtype=fp32 shape=1,512 kernel=layer_norm_grad_input_kernel_vectorized"
    _, steps = _fresh(directive)
    cs = trace_trees.calls(steps)
    assert len(cs) == 2 and cs[0][1] < cs[1][0]
    sums = next(s for s in steps if s.kind == "gi_sums")
    for k, (first, last) in enumerate(cs, 1):
        assert steps[first].kind == "sum_shfl_down" and steps[last].kind == "sum_shfl_down"
        svg = trace_tree_svg.tree(steps, call=k, focus=0)
        assert f"data-call='{k}'" in svg and f"data-leaves='gi_sums.stats_x{k}'" in svg
        pos = {int(p) for p in re.findall(r"class='trt-edge' data-kind='\w+' data-index='\d+' data-pos='(\d+)'", svg)}
        assert pos and min(pos) >= first and max(pos) <= last
        leaves = re.findall(r"data-thread='(\d+)' data-kind='leaf' data-pos='-1' data-row='\d+' data-bits='val:(\w+)'", svg)
        assert len(leaves) == 32
        for t, bits in leaves:
            assert bits == trace_tables.bits_hex(sums.values[f"stats_x{k}"][int(t)])
        root = re.search(r"data-thread='0' data-kind='sum_shfl_down' data-pos='(\d+)' data-row='\d+' "
                         r"data-bits='val:(\w+)'><title>[^<]*</title><circle class='trt-root'", svg)
        assert int(root.group(1)) == last and root.group(2) == trace_tables.bits_hex(steps[last].values["val"][0])
    with pytest.raises(ValueError, match="call=1"):
        trace_trees.build_tree(steps)
    # the page: two trees, one per call, with disjoint steps
    box = next(b for b in _boxes("upstream/block_reduce") if "sum_smem_write,sum_smem_read" in b["directive"])
    assert [t["call"] for t in box["trees"]] == [1, 2]
    assert [t["leaves"] for t in box["trees"]] == ["gi_sums.stats_x1", "gi_sums.stats_x2"]
    for t, (first, last) in zip(box["trees"], cs):
        assert t["edges"] and all(first <= e[1] <= last for e in t["edges"])
        assert {e[0] for e in t["edges"]} == {"sum_shfl_down", "sum_smem_read"}


def test_reduction_calls_of_each_kernel():
    """One call for the forward kernels, BlockReduce and GammaBeta (whose columns each start from a
    shared-memory read); two for LayerNorm's grad input, one for RMSNorm's."""
    expect = {"op=layer_norm dtype=fp32 shape=1,512 kernel=vectorized_layer_norm_kernel": 1,
              "op=layer_norm dtype=fp32 shape=1,512 x_offset=1 kernel=RowwiseMomentsCUDAKernel": 1,
              "backward=1 op=layer_norm dtype=fp32 shape=2,402 kernel=layer_norm_grad_input_kernel": 2,
              "backward=1 op=rms_norm dtype=bf16 shape=2,512 kernel=layer_norm_grad_input_kernel_vectorized": 1,
              "backward=1 op=layer_norm dtype=fp32 shape=64,32 kernel=GammaBetaBackwardCUDAKernelTemplate": 1,
              "backward=1 op=rms_norm dtype=fp16 shape=3,40 kernel=GammaBetaBackwardCUDAKernelTemplate": 0}
    for directive, n in expect.items():
        _, steps = _fresh(directive)
        assert len(trace_trees.calls(steps)) == n, directive


def test_gamma_beta_tree_is_one_columns_sum():
    """Tile <32, 8, 64>: column 0's tree has the 8 threads (0, y) as leaves (their gb_sums), each moved
    unchanged through shared memory into lane y of warp 0 (a hop), then XOR rounds delta 4, 2, 1 into
    lane 0, whose state is what gb_out writes."""
    box = next(b for b in _boxes("upstream/layer_norm_kernel")
               if "GammaBeta" in b["directive"] and "shape=64,32" in b["directive"])
    _, steps = _fresh(box["directive"])
    (t,) = box["trees"]
    sums = next(s for s in steps if s.kind == "gb_sums")
    leaves = {n[1]: n[3] for n in t["nodes"] if n[0] == "leaf"}
    assert sorted(leaves) == [32 * y for y in range(8)] and t["leaves"] == "gb_sums"
    for th, bits in leaves.items():
        assert bits == {"dg": trace_tables.bits_hex(sums.values["dg_sum"][th]),
                        "db": trace_tables.bits_hex(sums.values["db_sum"][th])}
    hops = sorted((e[2], e[3]) for e in t["edges"] if e[4] == "hop")
    assert hops == [(32 * y, y) for y in range(8)]
    xor = sorted((steps[e[1]].index, e[2], e[3]) for e in t["edges"] if e[4] == "partner")
    assert [(i, f) for i, f, to in xor if to == 0] == [(0, 4), (1, 2), (2, 1)]
    out = next(s for s in steps if s.kind == "gb_out")
    root = next(n for n in t["nodes"] if n[1] == 0 and n[0] == "gb_shfl_xor" and n[2] == max(e[1] for e in t["edges"]))
    assert root[3] == {"dg": trace_tables.bits_hex(out.values["dg"][0]), "db": trace_tables.bits_hex(out.values["db"][0])}


def test_tile_without_a_reduction_says_so():
    box = next(b for b in _boxes("upstream/layer_norm_kernel") if "shape=3,40" in b["directive"])
    assert box["svg"] == 0 and box["notes"] and {c[0] for c in box["cells"]} == {"gb_sums", "gb_out"}


def test_rerun_command_prints_the_same_steps(capsys):
    """The caption's CLI command (here a backward one) prints every value the box shows; so does
    `python -m reimpl.docsite.traces '<directive>'`."""
    import html as html_mod
    import shlex
    from reimpl.cli import main as cli_main
    directive = ("backward=1 op=layer_norm dtype=fp32 shape=64,32 kernel=GammaBetaBackwardCUDAKernelTemplate "
                 "kinds=gb_out threads.gb_out=0,32")
    html = docs_traces.trace_block(directive)
    cmd = html_mod.unescape(re.search(r"<code>(python -m reimpl trace .*?)</code>", html).group(1))
    assert "--backward --mask 1,1,1" in cmd and "--kind gb_out" in cmd
    bits = set(re.findall(r'data-bits="(\w+)"', html))
    assert bits
    assert cli_main(shlex.split(cmd)[3:] + ["--warp", "all"]) == 0
    text = capsys.readouterr().out
    assert all(b in text for b in bits)
    assert docs_traces.main([directive]) == 0
    text = capsys.readouterr().out
    assert all(b in text for b in bits)


def test_backward_options_need_backward():
    with pytest.raises(ValueError, match="backward=1"):
        trace_collect.parse_directive("op=layer_norm dtype=fp32 shape=2,8 kernel=x mask=1,0,0")
    with pytest.raises(ValueError, match="call=3"):
        docs_traces.trace_block("backward=1 op=layer_norm dtype=fp32 shape=2,8 "
                                "kernel=layer_norm_grad_input_kernel_vectorized call=3")
