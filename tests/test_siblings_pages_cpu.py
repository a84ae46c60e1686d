"""CPU: the sibling pages' sentences that state a fact of the profile, checked against the committed
Nsight Compute data (results/ncu_siblings.json), so a page cannot keep a claim the data no longer
backs: the one-read kernels read the row from DRAM once, the fused cross-entropy reads the logits
once and writes only the gradient, and torch's BatchNorm forward is cuDNN's for float32 input and its
own two kernels for 16-bit input."""
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NCU = json.loads((ROOT / "results" / "ncu_siblings.json").read_text())
ITEMSIZE = {"fp32": 4, "bf16": 2, "fp16": 2}


def _page(name: str) -> str:
    return " ".join((ROOT / "docs" / "ladder" / name).read_text().split())


def _row_mb(c: dict) -> float:
    n = 1
    for s in c["shape"]:
        n *= s
    return n * ITEMSIZE[c["dtype"]] / 1e6


def test_one_read_reads_the_row_once():
    assert "That is the one idea of `one_read`: read each element once" in _page("softmax.md")
    cases = [c for c in NCU["cases"] if c["kernel"] == "one_read"]
    assert cases
    for c in cases:  # within 2% of the row's bytes: one read from DRAM, the rest from L2 or not at all
        assert c["dram_read_mb"] <= 1.02 * _row_mb(c), c


def test_the_two_pass_kernels_read_long_rows_more_than_once():
    """The page's reason for the one-read kernel: where a row does not stay in the L2 between passes,
    the three-pass kernel reads it from DRAM again."""
    long = [c for c in NCU["cases"] if c["kernel"] == "three_pass" and c["shape"][1] >= 131072]
    assert long and all(c["dram_read_mb"] >= 2.5 * _row_mb(c) for c in long), long


def test_fused_cross_entropy_reads_the_logits_once_and_writes_only_the_gradient():
    assert "The probabilities are never stored, and the logits are read once." in _page("softmax.md")
    fused = [c for c in NCU["cases"] if c["kernel"] == "cross_entropy_fused" and c["launched"].startswith("ladder::")]
    assert fused
    for c in fused:
        assert c["dram_read_mb"] <= 1.02 * _row_mb(c) and c["dram_write_mb"] <= 1.02 * _row_mb(c), c
    torch = [c for c in NCU["cases"] if c["kernel"] == "torch_cross_entropy"]
    for shape, dtype in {(tuple(c["shape"]), c["dtype"]) for c in fused}:
        read = sum(c["dram_read_mb"] for c in torch if tuple(c["shape"]) == shape and c["dtype"] == dtype)
        assert read > 1.5 * _row_mb({"shape": shape, "dtype": dtype})


def test_torch_batchnorm_forward_kernels_are_as_the_page_says():
    assert ("Torch's forward is cuDNN's for float32 input and its own two kernels (statistics, then transform) "
            "for 16-bit input") in _page("batchnorm.md")
    torch = [c for c in NCU["cases"] if c["kernel"].startswith("torch_batch_norm") and c["us"] >= 5]
    assert torch
    for c in torch:
        if c["dtype"] == "fp32":
            assert c["launched"].startswith("cudnn::"), c
        else:
            assert c["launched"].startswith("native::batch_norm_"), c


def test_profile_rows_of_an_earlier_plan_are_marked():
    """A profiled one-read or cross-entropy row whose kernel is not the one the plan launches today is
    named as an earlier plan's on the page, beside today's kernel; the others are not marked."""
    from reimpl.docsite import siblings_bench_tables as t
    for op in ("softmax", "cross_entropy"):
        table = t.ncu_table(NCU, op)
        for c in NCU["cases"]:
            now = t._launched_now(c)
            if now is None or t._ncu_op(c["kernel"]) != op or c["us"] < t.NCU_MIN_US:
                continue
            shape = "&nbsp;x&nbsp;".join(map(str, c["shape"]))
            row = next(line for line in table.split("\n") if f"| {c['dtype']} | {shape} |" in line
                       and c["kernel"] in line and "ladder::" in line)
            assert ("earlier plan" in row) == (now != c["launched"]), (c, row)


def test_long_16bit_rows_are_latency_bound_as_the_page_says():
    assert ("On 16-bit rows of 131072 `one_read` reaches 90% of a copy or more in the benchmark's cells of 256 "
            "rows and more; on rows of 262144, 16 blocks a row, it stays below.") in _page("softmax.md")
    bench = json.loads((ROOT / "results" / "siblings_bench.json").read_text())
    timed = {N: [r for r in bench["rows"] if r["op"] == "softmax" and r["kernel"] == "one_read" and r["dtype"] != "fp32"
                 and r["shape"][1] == N and r["shape"][0] >= 256] for N in (131072, 262144)}
    assert timed[131072] and all(r["pct_copy"] >= 90 for r in timed[131072]), timed[131072]
    assert timed[262144] and all(r["pct_copy"] < 90 for r in timed[262144]), timed[262144]
    from reimpl.ladder.launch import regs_plan
    assert regs_plan(262144, 2).cluster == 16
    long = [c for c in NCU["cases"] if c["kernel"] == "one_read" and c["dtype"] != "fp32" and c["shape"][1] >= 131072]
    assert long
    for c in long:
        assert c["bound"] == "latency" and c["dram_pct"] < 60 and c["sm_sol_pct"] < 60, c


def test_the_word_drawing_is_the_plan():
    """The one-read word drawing (diagrams.one_read_words), read back from its data-* attributes: each
    row's own elements sit once each in its words; a word is drawn whole exactly where all its slots are
    the row's, partial where some are, and its lane is the plan's (word k of a row: lane k mod lanes)."""
    import xml.etree.ElementTree as ET
    from reimpl.docsite.diagrams import one_read_words
    from reimpl.ladder.launch import regs_plan
    N = 10
    plan = regs_plan(N, 4)
    svg = ET.fromstring(one_read_words("../", N, 3))
    rects = list(svg.iter("{http://www.w3.org/2000/svg}rect"))
    for r in range(3):
        slots = [e for e in rects if e.get("data-row") == str(r) and e.get("data-element") is not None]
        own = sorted(int(e.get("data-element")) for e in slots if e.get("data-element") != "-1")
        assert own == list(range(N)), (r, own)
        for w in (e for e in rects if e.get("data-row") == str(r) and e.get("data-kind")):
            k = int(w.get("data-word"))
            mine = [e.get("data-element") != "-1" for e in slots if e.get("data-word") == str(k)]
            assert len(mine) == plan.vec
            want = "whole" if all(mine) else "partial" if any(mine) else "none"
            assert w.get("data-kind") == want and int(w.get("data-lane")) == k % plan.lanes, (r, k)
    assert any(e.get("data-kind") == "partial" for e in rects)  # N = 10 rows do leave the word grid


def test_batchnorm_held_constants_as_the_page_says():
    """The held kernels' reach as batchnorm.md states it: the constants and the SM fraction."""
    from reimpl.ladder import batchnorm_split as bs
    text = _page("batchnorm.md")
    t = bs.CHANNEL_THREADS
    assert (f"`ONE_BLOCK_VALUES` ({bs.ONE_BLOCK_VALUES} values, {bs.ONE_BLOCK_VALUES // t} for each of a block's "
            f"{t} threads)") in text
    assert f"`HELD_FORWARD_VALUES` ({bs.HELD_FORWARD_VALUES}, {bs.HELD_FORWARD_VALUES // t} a thread)" in text
    assert "(up to 64 values a thread forward; backward, 16 of x and 16 of dy)" in text
    assert bs.HELD_FORWARD_VALUES // t == 64 and bs.ONE_BLOCK_VALUES // t == 16
    assert "C at least nine tenths of the SM count" in text
    assert bs.one_block_per_channel(1, 119, 1, False, 132) and not bs.one_block_per_channel(1, 118, 1, False, 132)


def test_batchnorm_chart_marks_the_small_cells_as_the_page_says():
    """batchnorm.md says a * marks the shapes whose forward moves under 32 MB: the chart's ticks, in
    every pass's panel, carry it exactly where the benchmark's forward row of that shape counts fewer."""
    from reimpl.docsite import siblings_bench_tables as sbt
    assert "A * after a shape marks one whose forward (x read, y written) moves under 32 MB" in _page("batchnorm.md")
    d = json.loads((ROOT / "results" / "siblings_bench.json").read_text())
    forward = {(r["dtype"], tuple(r["shape"]), r["layout"]): sbt.nbytes(r) for r in d["rows"]
               if r["op"] == "batchnorm" and r["pass"] == "forward" and r["method"] == "pipelined"}
    cells = sbt._cells(d, "batchnorm")
    marked = 0
    for dtype in ("fp32", "bf16"):
        for pass_ in ("forward", "forward_backward", "backward"):
            xs, _ = sbt._positions(d, "batchnorm", dtype, pass_)
            assert xs
            for _, label, tick in xs:
                row = next(iter(cells[dtype, "pipelined", label].values()))
                small = forward[dtype, tuple(row["shape"]), row["layout"]] < sbt.BIG
                assert tick.endswith(" *") == small, (label, tick)
                marked += small
    assert marked


def test_one_read_kernel_names_as_the_page_says():
    """softmax.md names one_read's kernels, and the one the profile shows."""
    assert ("(Its kernels are `softmax_online_regs` and, for rows staged in shared memory, `softmax_online_smem`; "
            "the profile shows the first.)" in _page("softmax.md"))
    launched = {c["launched"] for c in NCU["cases"] if c["kernel"] == "one_read"}
    assert launched == {"ladder::softmax_online_regs"}, launched


def test_profile_tables_pair_their_rows_and_fit_the_text_column():
    """The Nsight Compute numbers are two tables of at most eight columns whose rows pair by number."""
    from reimpl.docsite import siblings_bench_tables as t
    for op in ("softmax", "cross_entropy", "batchnorm"):
        text = t.ncu_table(NCU, op)
        heads = [line for line in text.splitlines() if line.startswith("| # |")]
        assert len(heads) == 2 and all(h.count("|") - 1 <= 8 for h in heads), heads
        numbered = [line.split("|")[1].strip() for line in text.splitlines()
                    if line.startswith("| ") and not line.startswith("| # |")]
        n = len(numbered) // 2
        assert n > 0 and numbered[:n] == numbered[n:] == [str(i) for i in range(1, n + 1)]


# The bandwidth charts' data tables (siblings_bench_tables._table), as the pages draw them.
BANDWIDTH = {"softmax": ("fp32", "bf16", "fp16"), "cross_entropy": ("bf16",), "batchnorm": ("fp32", "bf16", "fp16")}
# At most 7 columns and 96 characters a table. A character here is about 7 px: Chromium at a 1280 px
# window drew these tables at 6.8 to 7.05 px per character so counted, and the text column is 686 px
# wide, so 96 characters take at most 677 px. Seven columns is what the widest of them has (the key
# columns and four kernels, or BatchNorm's three keys, three kernels and the copy); the single tables
# that scrolled had 8 (BatchNorm) and 10 (softmax) columns, and cross-entropy's 7 ran to 121 characters.
MAX_COLUMNS, MAX_CHARS = 7, 96


def _chars(text: str) -> float:
    """A cell's width in characters of about 7 px: markup dropped, a space counted half."""
    import re
    t = re.sub(r"<[^>]+>", "", text).replace("&nbsp;", " ").replace("`", "")
    return len(t) - t.count(" ") / 2


def _tables(markdown: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """(caption, header, rows) of each Markdown table, its cells stripped."""
    from tests.test_captions_cpu import captions
    out, lines = [], markdown.splitlines()
    caps = iter(captions(markdown))
    for i, line in enumerate(lines):
        if line.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|-"):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip()[1:-1].split("|")])
            out.append((next(caps), [c.strip() for c in line.strip()[1:-1].split("|")], rows))
    return out


def _too_wide(header: list[str], rows: list[list[str]]) -> str:
    """Why a table would not fit the text column, or ""."""
    width = sum(max(map(_chars, col)) + 3 for col in zip(header, *rows))  # 3: the cell's padding
    return f"{len(header)} columns, {width} characters" if len(header) > MAX_COLUMNS or width > MAX_CHARS else ""


def test_bandwidth_data_tables_fit_the_text_column_and_keep_every_number():
    """Each chart's data is in tables of at most MAX_COLUMNS columns and MAX_CHARS characters, each
    with its caption; every kernel's pipelined / flushed % of copy (the copy's GB/s) of every cell is
    in exactly one of them, in its kernel's column and its shape's row; tables that share their rows
    number them 1..n and list the same shapes; and the pages say how the tables are laid out."""
    from reimpl.docsite import siblings_bench_tables as sbt
    d = json.loads((ROOT / "results" / "siblings_bench.json").read_text())
    assert ("opens the numbers of every cell, both methods, in two tables whose rows pair by number"
            in _page("softmax.md"))
    assert "opens the numbers of every cell, both methods, in a table per pass." in _page("batchnorm.md")
    for op, dtypes in BANDWIDTH.items():
        for dtype in dtypes:
            tables = _tables(sbt._table(d, op, dtype))
            for cap, header, rows in tables:
                assert not _too_wide(header, rows), (op, dtype, header, _too_wide(header, rows))
                assert d["device"] in cap and d["date"] in cap and op in cap and dtype in cap, cap
                # no column of dashes only: a kernel not timed in these rows has no column
                assert all(any(v != "— / —" for v in col) for col in list(zip(*rows))[1:]), (op, dtype, header)
            # the tables of one set of rows (BatchNorm: one pass) pair by number
            sets: dict = {}
            for cap, header, rows in tables:
                where = cap.split(":")[0].removesuffix(", the same rows by number").strip("*")
                sets.setdefault(where, []).append((header, rows))
            if op == "batchnorm":
                assert sorted(sets) == sorted(f"{op}, {dtype}, {sbt.PASS_TITLE[p]}" for p in sbt.PASSES), sets.keys()
            else:  # as softmax.md says: two tables whose rows pair by number
                assert list(sets) == [f"{op}, {dtype}"] and len(sets[f"{op}, {dtype}"]) == 2, sets.keys()
            for where, group in sets.items():
                if len(group) > 1:
                    keys = [[r[:header.index("shape") + 1] for r in rows]
                            for header, rows in group]
                    assert all(h[0] == "#" for h, _ in group), where
                    assert all(k == keys[0] for k in keys), where
                    assert [k[0] for k in keys[0]] == [str(i) for i in range(1, len(keys[0]) + 1)], where
                else:
                    assert group[0][0][0] != "#", where
            found = _numbers(tables)
            want: dict = {}
            for r in d["rows"]:
                if r["op"] == op and r["dtype"] == dtype:
                    key = (r.get("pass", ""), sbt.LAYOUT.get(r.get("layout"), ""), " x ".join(map(str, r["shape"])),
                           r["kernel"])
                    want.setdefault(key, {})[r["method"]] = f"{r['gbps' if r['kernel'] == 'copy' else 'pct_copy']:.0f}"
            methods = list(dict.fromkeys(r["method"] for r in d["rows"] if r["op"] == op))
            assert methods == ["pipelined", "flushed"]
            for key, by in want.items():
                assert found.get(key) == " / ".join(by.get(m, "—") for m in methods), (op, dtype, key, found.get(key))
            assert all(v == "— / —" for k, v in found.items() if k not in want), (op, dtype)


def _numbers(tables) -> dict:
    """(pass, layout, shape, kernel) -> its cell, from the tables of one chart; each key once."""
    from reimpl.docsite import siblings_bench_tables as sbt
    found: dict = {}
    for cap, header, rows in tables:
        pass_ = next((p for p in sbt.PASSES if cap.split(":")[0].endswith(sbt.PASS_TITLE[p])), "")
        for row in rows:
            shape = row[header.index("shape")].replace("&nbsp;", " ")
            layout = row[header.index("layout")] if "layout" in header else ""
            for name, value in zip(header, row):
                if name.startswith("`"):
                    key = (pass_, layout, shape, name.split("`")[1])
                    assert key not in found, key
                    found[key] = value
    return found


def test_one_table_of_every_kernel_would_not_fit():
    """The width check fails the layout these tables replaced: one table of a chart's every cell and
    kernel (BatchNorm's with a pass column), put back together from the tables drawn now."""
    from reimpl.docsite import siblings_bench_tables as sbt
    d = json.loads((ROOT / "results" / "siblings_bench.json").read_text())
    for op, dtypes in BANDWIDTH.items():
        found = _numbers(_tables(sbt._table(d, op, dtypes[0])))
        kernels = list(dict.fromkeys(k[3] for k in found))
        rows = [[*(p for p in where if p), *(found.get((*where, k), "— / —") for k in kernels)]
                for where in dict.fromkeys(k[:3] for k in found)]
        header = (["pass", "layout"] if op == "batchnorm" else []) + ["shape"] + [f"`{k}`" for k in kernels]
        assert _too_wide(header, rows), (op, header)
        assert not _too_wide(header[:3], [r[:3] for r in rows])  # and the check passes a narrow one


def test_batchnorm_summaries_count_each_pass_by_its_own_traffic():
    """batchnorm.md: the summaries keep the cells whose own pass moves 32 MB or more, so a shape starred
    for its forward's traffic can count in forward plus backward."""
    from reimpl.docsite import siblings_bench_tables as sbt
    assert ("The summaries below count, pass by pass, only the cells whose own pass moves at least 32 MB, so a "
            "starred shape can count in the forward-plus-backward summary") in _page("batchnorm.md")
    bench = json.loads((ROOT / "results" / "siblings_bench.json").read_text())
    rows = [r for r in bench["rows"] if r["op"] == "batchnorm" and r["kernel"] == "copy"]
    starred = {(r["dtype"], tuple(r["shape"])) for r in rows
               if 2 * math.prod(r["shape"]) * (4 if r["dtype"] == "fp32" else 2) < sbt.BIG}
    assert any((r["dtype"], tuple(r["shape"])) in starred and r.get("pass") == "forward_backward"
               and sbt.nbytes(r) >= sbt.BIG for r in rows)
