"""CPU: the bandwidth charts of the ladder's and reimpl.fast's pages (matplotlib at build time, inline
SVG) say what they plot, follow the page's palette, never put the copy's label on a bar, come out
the same bytes on every build, and carry their numbers in a <details> table under them; and every
table the ladder's and fast page's modules render opens with a caption line (unit, method, device,
date) and, where it was too wide for the text column, is split to fit."""
import json
import re
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from reimpl.docsite import backward_tables, fast_tables, ladder_tables, render
from tests.site_helpers import ROOT

# (directive, its page, the results file it reads, the kernels its legend must hold)
CHARTS = [(f"{{% ladder_chart {dt} %}}", "ladder/index.md", ladder_tables.BENCH, ("torch_layer_norm", "triton_ln"))
          for dt in ("fp32", "bf16")] + \
         [(f"{{% fast_chart {dt} %}}", "ladder/fast.md", fast_tables.FAST, ("torch_layer_norm", "fast_layer_norm"))
          for dt in ("fp32", "bf16")] + \
         [(f"{{% fast_grad_chart {dt} %}}", "ladder/fast.md", fast_tables.FAST_GRAD,
           ("torch_layer_norm_dx", "fast_layer_norm_dx")) for dt in ("fp32", "bf16")]
IDS = [c[0].strip("{}% ").replace(" ", "-") for c in CHARTS]


def _plotted(path, dtype: str) -> list[dict]:
    """The pipelined forward rows a chart of `path` plots for `dtype`: the ladder's, the grid's cells
    it shows, without the peers (they are in its page's table)."""
    rows = [r for r in json.loads(path.read_text())["rows"] if r["dtype"] == dtype
            and r.get("method", "pipelined") == "pipelined" and r.get("pass", "forward") == "forward"]
    if path == ladder_tables.BENCH:
        rows = [r for r in ladder_tables.newest_copy(rows) if (r["M"], r["N"]) in ladder_tables.shown_cells(dtype)
                and r["kernel"] in ladder_tables.ORDER]
    return rows


def _expand(directive: str, page: str) -> str:
    return render.expand(directive, page, "../")


def _stamp(d: dict, directive: str) -> dict:
    """The stamp a table or chart of `directive` shows: a record with per-row runs (the ladder's
    benchmark) is stamped by the runs of the pass it draws."""
    if "runs" not in d:
        return d
    from reimpl.docsite.ladder_tables import errors_stamp, rows_stamp
    if "ladder_errors " in directive:  # a rung's error rows come from one run
        rung = directive.split()[2]
        return errors_stamp(d, {r.get("run", 0) for r in d["rows"] if r["rung"] == rung})
    pass_ = "forward+backward" if "training" in directive else "backward" if "backward" in directive else "forward"
    return rows_stamp(d, [r for r in d["rows"] if r["pass"] == pass_])


def _texts(svg: str, gid: str) -> list[str]:
    """The text of every <text> under the group whose id is `gid` (the SVG parses as XML)."""
    group = ElementTree.fromstring(svg).find(f".//*[@id='{gid}']")
    assert group is not None, f"no group {gid}"
    return [t.text for t in group.iter("{http://www.w3.org/2000/svg}text")]


@pytest.mark.parametrize("directive,page,path,kernels", CHARTS, ids=IDS)
def test_chart_says_what_it_plots(directive, page, path, kernels):
    out = _expand(directive, page)
    assert out.count("<svg") == 1 and out.count("</svg>") == 1
    d = _stamp(json.loads(path.read_text()), directive)
    svg = out[out.index("<svg"):out.index("</svg>") + 6]
    name = re.search(r"data-diagram='([\w-]+)'", svg).group(1)
    dtype = directive.split()[2]
    title = " ".join(_texts(svg, f"{name}-title"))
    assert "LayerNorm" in title and dtype in title and "pipelined" in title and d["device"] in title, title
    assert ("dX" in title) == (path == fast_tables.FAST_GRAD)
    assert re.search(r"<title id='[\w-]+'>[^<]*pipelined[^<]*</title>", svg)  # for screen readers
    [xlabel], [ylabel] = _texts(svg, f"{name}-xlabel"), _texts(svg, f"{name}-ylabel")
    assert "M x N" in xlabel and "GB/s" in ylabel, (xlabel, ylabel)
    legend = _texts(svg, f"{name}-legend")
    assert set(kernels) <= set(legend) and any(t.startswith("copy") for t in legend), legend
    # the shapes on the axis and the copy's level of each, from the JSON
    rows = _plotted(path, dtype)
    if path == ladder_tables.BENCH:
        assert {(r["M"], r["N"]) for r in rows} == set(ladder_tables.shown_cells(dtype))
    for r in rows:
        assert f">{r['M']} x {r['N']}<" in svg
        if r["kernel"] == "copy":
            assert f">copy {r['gbps']:.0f}<" in svg


@pytest.mark.parametrize("directive,page,path,kernels", CHARTS, ids=IDS)
def test_chart_follows_the_palette(directive, page, path, kernels):
    """Text, axes and the copy's line are currentColor: the colour of the page's text, dark on the
    light palette and light on slate. The background is transparent, and nothing is drawn black or
    white, which would vanish on one of the two."""
    svg = _expand(directive, page)
    texts = re.findall(r"<text [^>]*>", svg)
    assert texts and all("fill: currentColor" in t for t in texts)
    assert "stroke: currentColor" in svg
    low = svg.lower()
    for colour in ("#000000", "#ffffff", "#010203", "fill: white", "fill: black"):
        assert colour not in low, colour
    assert "<style" not in svg  # matplotlib's page-wide `*{stroke-linejoin...}` would restyle other SVGs
    assert "<?xml" not in svg and "<metadata" not in svg and "<!DOCTYPE" not in svg


@pytest.mark.parametrize("directive,page,path,kernels", CHARTS, ids=IDS)
def test_copy_label_is_above_every_bar_of_its_group(directive, page, path, kernels):
    """Each 'copy N' label sits above every bar it spans (SVG y grows downward)."""
    svg = _expand(directive, page)
    bars = []
    for d in re.findall(r'<path d="([^"]+)" clip-path="url\(#\w+\)" style="fill: #', svg):
        nums = [float(v) for v in re.findall(r"-?[\d.]+", d)]
        xs, ys = nums[0::2], nums[1::2]
        bars.append((min(xs), max(xs), min(ys)))
    assert len(bars) >= 20
    labels = re.findall(r'<text style="font-size: ([\d.]+)px[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(copy \d+)</text>',
                        svg)
    assert len(labels) == len({(r["M"], r["N"]) for r in _plotted(path, directive.split()[2])})
    for size, x, y, text in labels:
        half = 0.35 * float(size) * len(text)  # generous: DejaVu's average advance is under 0.62 em
        over = [b for b in bars if b[0] < float(x) + half and b[1] > float(x) - half]
        assert over and all(top >= float(y) for _, _, top in over), (text, y, over)


@pytest.mark.parametrize("directive,page,path,kernels", CHARTS, ids=IDS)
def test_chart_is_the_same_bytes_twice_and_its_data_table_follows(directive, page, path, kernels):
    first, second = _expand(directive, page), _expand(directive, page)
    assert first == second
    assert not re.search(r"\n\s*\n", first)  # one raw HTML block: Markdown would end it at a blank line
    after = first[first.index("</svg>") + 6:]
    assert after.startswith("<details class='abstract chart-data'><summary>Data</summary>"), after[:80]
    table = after[:after.index("</details>")]
    d = _stamp(json.loads(path.read_text()), directive)
    caption = re.search(r"<p><em>(.*?)</em></p>", table).group(1)
    assert "GB/s" in caption and "pipelined" in caption and d["device"] in caption and d["date"] in caption
    for r in _plotted(path, directive.split()[2]):
        assert f"<code>{r['kernel']}</code>" in table and f">{r['gbps']:.0f}</td>" in table, r
    # charts in a diagram box, ids unique across the page (matplotlib's own "figure_1" would repeat)
    assert first.startswith('<div class="diagram-box"><svg') and first.endswith("</details></div>")
    ids = re.findall(r'\bid=["\']([^"\']+)', first)
    assert len(ids) == len(set(ids))
    name = re.search(r"data-diagram='([\w-]+)'", first).group(1)
    assert all(i.startswith(name) or re.fullmatch(r"[mp][0-9a-f]{10}", i) for i in ids), ids


def test_chart_bytes_do_not_depend_on_the_process():
    """A fresh interpreter renders the same bytes: no date, no per-process salt."""
    code = "from reimpl.docsite import fast_tables; import sys; sys.stdout.write(fast_tables.fast_chart('bf16'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out == fast_tables.fast_chart("bf16")


def test_charts_on_one_page_share_no_id():
    page = "\n\n".join(c[0] for c in CHARTS if c[1] == "ladder/fast.md")
    ids = re.findall(r'\bid=["\']([^"\']+)', _expand(page, "ladder/fast.md"))
    assert len(ids) == len(set(ids))


# every table directive of the two modules, and what its caption must name besides device and date
TABLES = [("{% ladder_bandwidth fp32 %}", "ladder/index.md", ladder_tables.BENCH, ("GB/s", "pipelined")),
          ("{% ladder_training bf16 %}", "ladder/index.md", ladder_tables.BENCH, ("GB/s", "pipelined")),
          ("{% ladder_errors apex %}", "ladder/rungs.md", ladder_tables.ERRORS, ("relative", "float64")),
          ("{% rung_index %}", "ladder/rungs.md", ladder_tables.BENCH, ("% of copy", "pipelined")),
          ("{% ladder_backward_grid %}", "ladder/index.md", ladder_tables.BENCH, ("% of copy", "pipelined", "flushed")),
          ("{% ladder_backward bf16 %}", "ladder/index.md", ladder_tables.BENCH, ("% of copy", "pipelined")),
          ("{% backward_probe %}", "ladder/rungs.md", backward_tables.PROBE, ("% of copy", "pipelined")),
          ("{% fast_bandwidth fp32 %}", "ladder/fast.md", fast_tables.FAST, ("GB/s", "pipelined")),
          ("{% fast_bandwidth bf16 flushed %}", "ladder/fast.md", fast_tables.FAST, ("GB/s", "L2 flushed")),
          ("{% fast_grad_bandwidth fp32 flushed %}", "ladder/fast.md", fast_tables.FAST_GRAD,
           ("GB/s", "L2 flushed")),
          ("{% ladder_ncu forward %}", "ladder/fast.md", fast_tables.NCU["forward"],
           ("%", "Nsight Compute", "flushed")),
          ("{% ladder_ncu l2 %}", "ladder/fast.md", fast_tables.NCU["l2"],
           ("%", "Nsight Compute", "cache-control none")),
          ("{% fast_experiments %}", "ladder/fast.md", fast_tables.FAST_TRIED, ("Percent", "L2 not flushed")),
          ("{% fast_rows_sweep %}", "ladder/fast.md", fast_tables.FAST_ROWS, ("% of copy", "L2 not flushed"))]


@pytest.mark.parametrize("directive,page,path,words", TABLES, ids=[t[0].strip("{}% ") for t in TABLES])
def test_every_table_opens_with_its_caption(directive, page, path, words):
    out = _expand(directive, page)
    d = _stamp(json.loads(path.read_text()), directive)
    lines = out.splitlines()
    starts = [i for i, line in enumerate(lines)
              if line.startswith("|") and (i == 0 or not lines[i - 1].startswith("|"))]
    assert starts
    for i in starts:
        before = [line for line in lines[:i] if line.strip()]
        assert before and lines[i - 1] == "", (directive, lines[i])  # a paragraph, then the table
        cap = before[-1]
        assert cap.startswith("*") and cap.endswith("*"), cap
        assert d["device"] in cap and d["date"] in cap, cap
        for w in words:
            assert w in cap, (w, cap)


@pytest.mark.parametrize("what", sorted(fast_tables.NCU))
def test_ncu_tables_fit_the_text_column(what):
    """Nsight Compute's eleven columns ran past the text column and read as clipped: two tables of at
    most six columns, each row of one kernel and case, every case in both."""
    out = fast_tables.ncu(what)
    heads = [line for line in out.splitlines() if line.startswith("| kernel |")]
    assert len(heads) == 2 and all(h.count("|") - 1 <= 6 for h in heads), heads
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| kernel |")]
    d = json.loads(fast_tables.NCU[what].read_text())
    assert len(rows) == 2 * len(d["cases"])
