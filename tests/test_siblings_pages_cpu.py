"""CPU: the sibling pages' sentences that state a fact of the profile, checked against the committed
Nsight Compute data (results/ncu_siblings.json), so a page cannot keep a claim the data no longer
backs: the one-read kernels read the row from DRAM once, the fused cross-entropy reads the logits
once and writes only the gradient, and torch's BatchNorm forward is cuDNN's for float32 input and its
own two kernels for 16-bit input."""
import json
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
    assert ("On 16-bit rows of 131072 `one_read` reaches 90% of a copy or more in the benchmark; on rows of "
            "262144, 16 blocks a row, it stays below.") in _page("softmax.md")
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
    """softmax.md names one_read's kernels as the profile shows them."""
    assert ("(Its kernels are `softmax_online_regs` and `softmax_online_smem`, the names the profile shows.)"
            in _page("softmax.md"))
    launched = {c["launched"] for c in NCU["cases"] if c["kernel"] == "one_read"}
    assert launched and launched <= {"ladder::softmax_online_regs", "ladder::softmax_online_smem"}, launched


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
