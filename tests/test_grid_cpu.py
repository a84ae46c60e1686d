"""CPU: the benchmarks' shared shape grid (reimpl.checks.grid), the records the grid runs and the
probes committed (results/ladder_bench.json, results/row_held_orders.json,
results/row_held_knobs.json, results/triton_probe.json), and the page table drawn from them."""
import json
from statistics import median

from reimpl.checks import grid
from reimpl.docsite import grid_tables
from reimpl.ladder import launch
from tests.site_helpers import ROOT

RESULTS = ROOT / "results"


def _load(name):
    return json.loads((RESULTS / name).read_text())


def test_grid_has_the_cells_it_names_once_each():
    for itemsize in (4, 2):
        cells = grid.cells(itemsize)
        assert len({(M, N) for _, M, N in cells}) == len(cells)
        tall = [(M, N) for part, M, N in cells if part == "tall"]
        assert [N for _, N in tall] == list(grid.TALL_NS)
        for M, N in tall:  # about 256 MB each: within one row's bytes of it
            assert abs(grid.traffic(M, N, itemsize) - grid.TRAFFIC) <= 2 * N * itemsize
        shapes = {(M, N) for _, M, N in cells}
        assert {(M, N) for M in grid.WIDE_MS for N in grid.WIDE_NS} <= shapes
        assert {(grid.MODEL_M, N) for N in grid.MODEL_NS} <= shapes
    assert grid.large(1024, 16384, 2) and not grid.large(1024, 8192, 1)


def test_grid_record_rows_are_grid_cells_and_their_own_runs():
    d = _load("ladder_bench.json")
    cells = {dt: {(M, N) for _, M, N in grid.cells(grid_tables.ITEMSIZE[dt])} for dt in grid_tables.ITEMSIZE}
    copy = {(r["run"], r["method"], r["dtype"], r["M"], r["N"], r["pass"]): r["ms"] for r in d["rows"]
            if r["kernel"] == "copy"}
    assert d["runs"] and all(r["device"] and r["torch"] and r["date"] for r in d["runs"])
    for r in d["rows"]:
        assert (r["M"], r["N"]) in cells[r["dtype"]], r
        assert r["method"] in d["methods"] and 0 <= r["run"] < len(d["runs"])
        # pct_copy is against the copy timed in the row's own run (grid.pct_and_gbps says how per pass)
        c = copy[(r["run"], r["method"], r["dtype"], r["M"], r["N"], r["pass"])]
        pct, gbps = grid.pct_and_gbps(r["pass"], r["kernel"], r["M"], r["N"], grid_tables.ITEMSIZE[r["dtype"]],
                                      r["ms"], c)
        assert abs(r["pct_copy"] - pct) < 1e-6 * r["pct_copy"] and abs(r["gbps"] - gbps) < 1e-6 * r["gbps"], r
    # the top rungs cover the whole grid in every dtype, by both methods
    for k in ("row_held", "rms_row_held"):
        for dt, cs in cells.items():
            for m in d["methods"]:
                assert {(r["M"], r["N"]) for r in d["rows"] if r["kernel"] == k and r["dtype"] == dt
                        and r["method"] == m} == cs, (k, dt, m)


def test_held_order_is_the_probes_best():
    """The committed block-shape order of ln_row_held (launch.HELD_ORDER, with its
    launch.HELD_WARP_MOST_32) is the order of results/row_held_orders.json with the best median % of
    copy over its cells for row_held, and within a point (the run-to-run noise) of the best for
    rms_row_held."""
    d = _load("row_held_orders.json")
    name = _committed_order(d)
    assert {int(k): tuple(tuple(e) for e in v) for k, v in d["orders"][name].items()} == launch.HELD_ORDER
    assert {int(k): v for k, v in d["most_32"][name].items()} == launch.HELD_WARP_MOST_32
    for kernel, slack in (("row_held", 0.0), ("rms_row_held", 1.0)):
        score = _medians(d, kernel, 1)
        assert score[name] >= max(score.values()) - slack, (kernel, score)


def _committed_order(d):
    names = [k for k, v in d["orders"].items()
             if {int(i): tuple(tuple(e) for e in o) for i, o in v.items()} == launch.HELD_ORDER
             and {int(i): m for i, m in d["most_32"][k].items()} == launch.HELD_WARP_MOST_32]
    assert len(names) == 1, names
    return names[0]


def test_knob_defaults_are_the_probes_best():
    """ln_row_held's ROW_HELD_* defaults ("late": no -D option) have a median % of copy in
    results/row_held_knobs.json within a point (the run-to-run noise) of the best setting's, for
    both rungs (as the kernel's comment says)."""
    d = _load("row_held_knobs.json")
    assert d["settings"]["late"] == []
    src = (ROOT / "reimpl/ladder/cuda/ln_row_held.cu").read_text()
    for macro, value in (("ROW_HELD_EARLY_BYTES", 0), ("ROW_HELD_WARP_BLOCKS", 1), ("ROW_HELD_BLOCK_BLOCKS", 1)):
        assert f"#define {macro} {value}\n" in src
    for kernel in ("row_held", "rms_row_held"):
        score = _medians(d, kernel, 0)
        assert score["late"] >= max(score.values()) - 1.0, (kernel, score)


def _medians(d, kernel, part):
    """Median % of copy of each setting of a probe record (`part` of the row's "a/b" setting name)."""
    score = {}
    for r in d["rows"]:
        if r["kernel"] == kernel:
            score.setdefault(r["setting"].split("/")[part], []).append(r["pct_copy"])
    return {k: median(v) for k, v in score.items()}


def test_triton_plan_defaults_are_the_probes_best():
    """triton_rungs' TILE_BYTES and THREAD_BYTES are the setting of results/triton_probe.json with
    the best median % of copy for triton_ln, and within a point of the best for triton_rms; the
    record's plans are what fwd_plan gives under each setting."""
    from reimpl.ladder import triton_rungs
    d = _load("triton_probe.json")
    mine = next(k for k, v in d["settings"].items() if v == [triton_rungs.TILE_BYTES, triton_rungs.THREAD_BYTES])
    ln, rms = _medians(d, "triton_ln", 0), _medians(d, "triton_rms", 0)
    assert ln[mine] == max(ln.values()) and rms[mine] >= max(rms.values()) - 1.0, (mine, ln, rms)
    saved = triton_rungs.TILE_BYTES, triton_rungs.THREAD_BYTES
    try:
        for r in d["rows"]:
            triton_rungs.TILE_BYTES, triton_rungs.THREAD_BYTES = d["settings"][r["setting"]]
            assert list(triton_rungs.fwd_plan(r["N"], grid_tables.ITEMSIZE[r["dtype"]])) == r["plan"], r
    finally:
        triton_rungs.TILE_BYTES, triton_rungs.THREAD_BYTES = saved


def test_grid_table_matches_the_record():
    d = _load("ladder_bench.json")
    text = grid_tables.table()
    for s in grid_tables.summary(d):
        line = next(l for l in text.splitlines()
                    if l.startswith(f"| {grid_tables._code(s['kernel'])} | {s['dtype']}, {s['method']} |"))
        assert f"{s['lo']:.0f}–{s['hi']:.0f}" in line and f"{s['at_goal']} of {s['large']}" in line
        mine = [r for r in d["rows"] if r["kernel"] == s["kernel"] and r["dtype"] == s["dtype"]
                and r["method"] == s["method"] and r["pass"] == "forward"
                and grid.large(r["M"], r["N"], grid_tables.ITEMSIZE[s["dtype"]])]
        assert s["large"] == len(mine) and s["lo"] == min(r["pct_copy"] for r in mine)


def test_ncu_record_backs_the_rung_page():
    """results/ncu_ladder.json profiles the top rungs, the Triton LayerNorm rung and torch's kernels on
    every shape and dtype it names, and holds what rungs.md says of it: on rows of 65536 both top
    rungs keep DRAM under 60% of peak with under half of the SM's warps active; the plans the page
    names are launch.held_plan's."""
    d = _load("ncu_ladder.json")
    shapes = {(c["dtype"], tuple(c["shape"])) for c in d["cases"]}
    for dt, shape in shapes:
        assert {c["kernel"] for c in d["cases"] if (c["dtype"], tuple(c["shape"])) == (dt, shape)} >= {
            "row_held", "rms_row_held", "triton_ln", "torch_layer_norm", "torch_rms_norm"}
    long = [c for c in d["cases"] if c["kernel"] in ("row_held", "rms_row_held") and c["shape"][1] == 65536]
    assert len(long) == 4 and all(c["dram_pct"] < 60 and c["occupancy_pct"] < 50 for c in long), long
    page = (ROOT / "docs/ladder/rungs.md").read_text()
    assert "keep DRAM under 60% of its peak with under half of the SM's warps" in page
    for N in (1536, 2048):
        assert (launch.held_plan(N, 4).lanes, launch.held_plan(N, 4).block) == (0, 64)
        assert (launch.held_plan(N, 2).lanes, launch.held_plan(N, 2).vecs) == (32, 8)


def _cells_of(dtype):
    from reimpl.docsite import ladder_tables
    out = {}
    for r in ladder_tables._bench_rows(dtype, "forward"):
        out.setdefault((r["M"], r["N"]), {})[r["kernel"]] = r["gbps"]
    return out


def test_ladder_index_reading_matches_the_record():
    """"What the tables say" on ladder/index.md, against results/ladder_bench.json (pipelined), in
    both dtypes it shows: block_welford below the warp-per-row rungs at N = 768; block_vec the
    fastest of the rungs before warp_regs from 8192 up to rows of 48 KiB, and at the scalar rung's
    speed past them; warp_welford slower than warp_sums everywhere."""
    before = ("warp_sums", "warp_welford", "block_welford", "block_cached", "apex")
    page = (ROOT / "docs/ladder/index.md").read_text()
    assert "on every such cell" in page and "on every cell of the grid" in page and "to below 48 KiB" in page
    from reimpl.docsite import ladder_tables
    assert "tables show four of its cells" in page and len(ladder_tables.shown_cells("fp32")) == 4
    for dtype in ("fp32", "bf16"):
        cells = _cells_of(dtype)
        itemsize = grid_tables.ITEMSIZE[dtype]
        at768 = [c for (M, N), c in cells.items() if N == 768]
        assert at768 and all(c["block_welford"] < min(c["warp_sums"], c["warp_welford"]) for c in at768)
        fits = [c for (M, N), c in cells.items() if N >= 8192 and N * itemsize < 48 * 1024]
        assert fits and all(c["block_vec"] > max(c[k] for k in before) for c in fits)
        past = [c for (M, N), c in cells.items() if N * itemsize >= 48 * 1024]
        assert past and all(abs(c["block_vec"] / c["block_welford"] - 1) < 0.03 for c in past)
        assert min(N for (M, N) in cells if N * itemsize >= 48 * 1024) == (12288 if itemsize == 4 else 32768)
        assert all(c["warp_welford"] < c["warp_sums"] for c in cells.values())


def test_peer_rows_are_where_the_ladder_page_says():
    """ladder/index.md: Liger-Kernel's and quack's kernels were timed on every forward cell, each in the
    same run as the Triton rungs' row of that cell; the top CUDA rungs' rows of every cell come from
    later runs; every row's run timed a copy of that cell."""
    d = _load("ladder_bench.json")
    run_of = {(r["method"], r["dtype"], r["M"], r["N"], r["kernel"]): r["run"] for r in d["rows"] if r["pass"] == "forward"}
    for dtype, itemsize in grid_tables.ITEMSIZE.items():
        for _, M, N in grid.cells(itemsize):
            for method in d["methods"]:
                runs = {run_of.get((method, dtype, M, N, k)) for k in ("triton_ln", "triton_rms", "liger_layer_norm",
                        "liger_rms_norm", "quack_layer_norm", "quack_rms_norm")}
                assert len(runs) == 1 and None not in runs, (method, dtype, M, N, runs)
                peers_run = runs.pop()
                assert all(run_of[(method, dtype, M, N, k)] > peers_run for k in ("row_held", "rms_row_held"))
    copies = {(r["run"], r["method"], r["dtype"], r["M"], r["N"]) for r in d["rows"]
              if r["pass"] == "forward" and r["kernel"] == "copy"}
    assert all((r["run"], r["method"], r["dtype"], r["M"], r["N"]) in copies for r in d["rows"] if r["pass"] == "forward")
    text = " ".join((ROOT / "docs/ladder/index.md").read_text().split())
    assert "timed on every cell, in the same runs as the Triton rungs" in text
    assert "were timed again in later runs with a copy of their own, `row_held` after its last change" in text


def test_fused_affine_record_backs_the_held_rung_section():
    """rungs.md section 10: the fused affine step lifted every dtype's median over the large cells and
    the cells at 90% or more; a bfloat16 thread of a one-block plan needs fewer registers, so an SM
    holds more blocks of up to 384 threads (three of 384 where two); a float32 thread keeps 64."""
    text = " ".join((ROOT / "docs/ladder/rungs.md").read_text().split())
    assert "{% row_held_affine %}" in (ROOT / "docs/ladder/rungs.md").read_text()
    s = grid_tables.affine_summary(_load("row_held_affine.json"))
    assert {(e["dtype"], e["method"]) for e in s} == {(d, m) for d in ("fp32", "bf16", "fp16")
                                                      for m in ("pipelined", "flushed")}
    assert all(e["after"] > e["before"] and e["after_90"] > e["before_90"] for e in s), s
    assert "Every dtype's median over the large cells rose, and more cells reach 90% of the copy" in text
    regs = grid_tables.registers(_load("row_held_resources.json"))

    def blocks(r, threads):  # an SM's 65536 registers and 2048 threads, registers by whole warps of 8s
        return min(65536 // (-(-r // 8) * 8 * threads), 2048 // threads)
    b, a = regs["bfloat16"]
    assert a < b and all(blocks(a, t) > blocks(b, t) for t in (128, 256, 384))
    assert (blocks(b, 384), blocks(a, 384)) == (2, 3) and blocks(a, 512) == blocks(b, 512)
    assert regs["float32"] == (64, 64)
    assert "an SM holds more blocks of up to 384 threads (three of 384 where it held two)" in text
    assert regs["float16"] == (64, 64)
    assert "A float32 thread keeps its 64, and so does a float16 one" in text
    # the profile on the page is of the fused step's kernel: taken no earlier than its timing
    assert _load("ncu_ladder.json")["date"] >= _load("row_held_affine.json")["runs"][1]["date"]
    assert "The profile was taken before the fused affine step" not in (ROOT / "docs/ladder/rungs.md").read_text()
