"""CPU: the in-page trace player's data (reimpl/docsite/stepper.py). The JSON each preset exports is the
emulator's trace, checked against a fresh emulation bit for bit; each step kind maps to the source line
of the statement its REIMPL_TRACE records, found in the file itself; the page carries the same data."""
from __future__ import annotations

import html as H
import json
import re
import shutil

import numpy as np
import pytest

from reimpl import emulator
from reimpl.docsite import stepper as S
from reimpl.docsite import trace_tree_svg
from reimpl.docsite.links import check_site
from reimpl.docsite.trace_tables import bits_hex
from reimpl.emulator import merge_order
from reimpl.emulator import trace as T
from reimpl.emulator.trace import KINDS
from tests.site_helpers import ROOT, built_site

# the statement each step kind records, as it reads in our CUDA source
STATEMENT = {
    "online": "wd = cuWelfordOnlineSum<acc_t, rms_norm>(static_cast<acc_t>(data.val[ii]), wd);",
    "shfl_down": "wd = cuWelfordCombine<rms_norm>(wd, wdB);",
    "smem_write": "countbuf[wrt_y] = wd.count;",
    "smem_combine": "wd = cuWelfordCombine<rms_norm>(wd, wdB);",
    "stats": "WelfordDataLN wd = compute_stats<T, rms_norm>(block_row, N, s_data);",
    "rstd": "T_ACC rstd_val = c10::cuda::compat::rsqrt(wd.sigma2 + eps);",
    "reduce": "val = welford_op.reduce(val, static_cast<T_ACC>(X[index]), index);",
    "warp_reduce": "val = op.combine(val, op.warp_shfl_down(val, offset));",
    "block_write": "shared[wid] = val;",
    "block_read": "val = (tid < B::Warps()) ? shared[lid] : identity_element;",
    "moments": "rstd[i] = c10::cuda::compat::rsqrt(m2 + eps);",
}
# the function whose body is tinted while the step is shown
CALLEE = {"online": "cuWelfordOnlineSum(", "shfl_down": "cuWelfordCombine(", "smem_combine": "cuWelfordCombine(",
          "reduce": "reduce(acc_t acc", "warp_reduce": "combine(acc_t a, acc_t b)"}


def fresh(name: str):
    """The preset emulated again, here: (steps of block 0 of the first kernel, outputs)."""
    x, offsets = S.inputs(name)
    with T.recording() as tr:
        outs = emulator.native_layer_norm(x, (x.shape[-1],), None, None, 1e-5, offsets=offsets)
    kernel = tr.steps[0].kernel
    return [s for s in tr.steps if s.kernel == kernel and s.block == 0], outs


def line(file: str, n: int) -> str:
    return (ROOT / file).read_text().splitlines()[n - 1]


@pytest.mark.parametrize("name", list(S.PRESETS))
def test_exported_steps_are_the_emulators_trace(name):
    data = S.export(name)
    steps, (out, mean, rstd) = fresh(name)
    end = max(i for i, s in enumerate(steps) if s.kind in S.STATS_END)
    steps = steps[:end + 1]
    assert len(data["steps"]) == len(steps) > 10
    assert data["mean"] == bits_hex(mean.reshape(-1)[0]) and data["rstd"] == bits_hex(rstd.reshape(-1)[0])
    shown = set(data["tracked"])
    for got, s in zip(data["steps"], steps):
        names = KINDS[s.kind][3]
        assert (got["kind"], got["index"], got["detail"], got["func"], got["fields"]) == \
               (s.kind, s.index, s.detail, KINDS[s.kind][1], list(names))
        act = np.flatnonzero(s.active)
        assert got["n_active"] == len(act)
        assert [t for a, b in got["active"] for t in range(a, b + 1)] == act.tolist()
        # every shown thread that executed the step, with its aux and every value bit for bit
        assert [r[0] for r in got["rows"]] == [t for t in act.tolist() if t in shown]
        for r in got["rows"]:
            t = r[0]
            assert r[1] == int(s.aux[t])
            for k, enc in zip(names, r[2:]):
                v = s.values[k][t]
                assert enc == (str(int(v)) if np.issubdtype(v.dtype, np.integer) else bits_hex(v)), (s.kind, t, k)
        if got["regs"]:   # the threads left out hold an empty state
            for t in act:
                if t not in shown:
                    assert all(float(s.values[k][t]) == 0 for k in names), (s.kind, t)
        if "all" in got:
            assert all(got["all"] == [bits_hex(s.values[k][t]) for k in names] for t in act)


def test_presets_are_the_documented_inputs():
    a, o = S.export("path_aligned"), S.export("path_offset")
    assert a["kernel"].startswith("vectorized_layer_norm_kernel<float") and a["blockDim"] == [32, 4, 1]
    assert o["kernel"].startswith("RowwiseMomentsCUDAKernel<float") and o["blockDim"] == [512, 1, 1]
    assert a["N"] == o["N"] == 64
    np.testing.assert_array_equal(S.inputs("path_aligned")[0], S.inputs("path_offset")[0])
    assert a["mean"] != o["mean"]           # the same values, two paths, two roundings of the mean
    m = S.export("merge_order")
    row = merge_order.make_row(merge_order.demo()["seed"])
    np.testing.assert_array_equal(S.inputs("merge_order")[0][0], row)
    tm, tv = merge_order.torch_tree(row)
    assert m["mean"] == bits_hex(tm) and m["N"] == 16
    stats = next(s for s in m["steps"] if s["kind"] == "stats")
    assert stats["all"] == [bits_hex(tm), bits_hex(tv)]
    assert m["tracked"] == [0, 1, 2, 3]     # four threads fold four values each


@pytest.mark.parametrize("base", list(S.EXCERPTS))
def test_each_kind_maps_to_the_statement_its_trace_records(base):
    smap = S.source_map(base)
    kinds = {s["kind"] for n in S.PRESETS if S.run(n).base == base for s in S.export(n)["steps"]}
    assert kinds and kinds <= set(STATEMENT)
    for k in kinds:
        m = smap[k]
        a, b = m["stmt"]
        text = " ".join(line(m["file"], n).strip() for n in range(a, b + 1))
        assert STATEMENT[k] in text, (k, text)
        assert f"REIMPL_TRACE({k}," in line(m["file"], m["site"][0])
        assert m["site"][0] == b + 1            # the trace call follows the statement
        if k in CALLEE:
            assert any(CALLEE[k] in line(f, lo) for f, lo, hi in m["callee"]), (k, m["callee"])
        else:
            assert m["callee"] == []


def test_the_map_is_read_from_the_file(tmp_path, monkeypatch):
    """Lines added to the CUDA source move the map with them: nothing is a hard-coded line number."""
    before = S.source_map("vectorized_layer_norm_kernel")
    src = ROOT / "reimpl/mirror/cuda/layer_norm_kernel.cu"
    copy = tmp_path / "reimpl/mirror/cuda/layer_norm_kernel.cu"
    copy.parent.mkdir(parents=True)
    shutil.copy(src, copy)
    copy.write_text("// one\n// two\n// three\n" + src.read_text())
    monkeypatch.setattr(S, "ROOT", tmp_path)
    S.section.cache_clear()
    S.source_map.cache_clear()
    try:
        after = S.source_map("vectorized_layer_norm_kernel")
        for k in ("online", "shfl_down", "smem_combine", "stats", "rstd"):
            assert after[k]["stmt"] == [n + 3 for n in before[k]["stmt"]]
            assert after[k]["site"] == [n + 3 for n in before[k]["site"]]
    finally:
        monkeypatch.undo()
        S.section.cache_clear()
        S.source_map.cache_clear()


def test_player_html():
    html = S.stepper("path_aligned merge_order", "../../")
    assert html.count('assets/stepper.css"') == 1 and html.count('assets/stepper.js"') == 1
    assert html.count('class="stepper"') == 1 and '<select class="stepper-preset">' in html
    # every source line its own element, with its line number and its text
    chunks = html.split('<div class="stepper-sec" ')[1:]
    heads = [re.match(r'data-file="([^"]+)" data-section="(\w+)"', c).groups() for c in chunks]
    assert [h[1] for h in heads] == ["cuWelfordOnlineSum", "cuWelfordCombine", "compute_stats",
                                     "vectorized_layer_norm_kernel_impl"]
    for (file, _), chunk in zip(heads, chunks):
        rows = re.findall(r'data-line="(\d+)"><span class="ln">\d+</span><code>(.*?)</code></div>', chunk)
        assert len(rows) > 10
        for n, code in rows:
            text = H.unescape(re.sub(r"<[^>]+>", "", code))
            assert text == (line(file, int(n)) or " "), (file, n)
    assert "--8<--" not in html and "</script" not in html.split('class="stepper-data">')[1].split("</script>")[0]
    with pytest.raises(ValueError, match="unknown preset"):
        S.stepper("no_such_preset", "../")


def test_tree_fills_in_as_merges_happen():
    for name in S.PRESETS:
        svg = S.tree_svg(S.run(name))
        data = S.export(name)
        nodes = [int(p) for p in re.findall(r"class='stt-node' data-thread='\d+' data-kind='\w+' data-pos='(-?\d+)'",
                                            svg)]
        assert nodes and min(nodes) >= 0
        merge = [i for i, s in enumerate(data["steps"]) if s["aux"] in ("partner", "slot") and "write" not in s["kind"]]
        filled = [sum(p <= k for p in nodes) for k in range(len(data["steps"]))]
        assert filled == sorted(filled) and filled[-1] == len(nodes)
        for k in merge:   # each merge step fills at least one node in (the root's chain goes through all)
            assert filled[k] > (filled[k - 1] if k else 0), (name, k)


def test_tree_is_the_trace_pages_tree():
    """The player draws its tree with trace_tree_svg.draw: the same nodes, values and edges as the trace
    pages' drawing of the same steps (focus warp 0); only the leaves' data-pos differs, the step their
    values come from rather than -1."""
    node = re.compile(r"class='(?:stt|trt)-node' data-thread='(\d+)' data-kind='(\w+)' data-pos='-?\d+' "
                      r"data-row='(\d+)' data-bits='([^']*)'")
    edge = re.compile(r"class='(?:stt|trt)-edge' (data-kind=[^>]*)>")
    for name in S.PRESETS:
        r = S.run(name)
        ours, theirs = S.tree_svg(r), trace_tree_svg.tree(r.steps, 0, focus=0)
        assert node.findall(ours) == node.findall(theirs) and node.findall(ours)
        assert edge.findall(ours) == edge.findall(theirs)
        assert "class='stt-" in ours and "trt-" not in ours


def test_the_built_pages_carry_the_players():
    site = built_site()
    page = (site / "guide/stepping/index.html").read_text()
    assert page.count('assets/stepper.js"') == 1 and page.count('assets/stepper.css"') == 1
    payload = json.loads(re.search(r'<script type="application/json" class="stepper-data">(.*?)</script>', page,
                                   re.S).group(1))
    assert list(payload["presets"]) == ["path_aligned", "path_offset", "merge_order"]
    for name, d in payload["presets"].items():
        assert d == json.loads(json.dumps(S.export(name)))
    assert (site / "assets/stepper.js").exists() and (site / "assets/stepper.css").exists()
    assert 'data-presets="path_aligned path_offset"' in (site / "guide/reductions/index.html").read_text()


def test_the_upstream_page_carries_a_player_whose_links_resolve():
    """On the page of the kernel it steps, under compute_stats, the player's links (source, "explained",
    which point back into this page) resolve from that page's folder to a page and an id."""
    site = built_site()
    rel = "upstream/layer_norm_kernel/index.html"
    page = (site / rel).read_text()
    assert page.count('class="stepper"') == 1 and 'data-presets="path_aligned"' in page
    at = page.index('class="stepper"')
    assert re.findall(r'<h3 id="(\w+)"', page[:at])[-1] == "compute_stats"
    hrefs = re.findall(r'href="([^"]+)"', page[at:page.index('class="stepper-data"', at)])
    assert "../../upstream/layer_norm_kernel/#cuWelfordCombine" in hrefs and "id=\"cuWelfordCombine\"" in page
    assert any(h.startswith("../../source/reimpl/mirror/cuda/layer_norm_kernel.cu/#") for h in hrefs)
    assert [p for p in check_site(site) if p.startswith(rel + ":")] == []
