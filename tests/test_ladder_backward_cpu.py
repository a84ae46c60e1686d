"""CPU: the CUDA backward of the top rungs (reimpl/ladder/backward.py, cuda/ln_row_held_backward.cu)
compiles for sm_90 with no diagnostics; its layout holds every element of a row once and no thread
more than BACK_EPT of them; every instantiation is reachable; the launcher makes the stated launches
(on a RecordingRuntime) and refuses bad input before any launch."""
import numpy as np
import pytest
import torch

from reimpl.device import compile as compile_mod, runtime
from reimpl.ladder import backward, launch, registry
from tests.site_helpers import ROOT
from tests.test_softmax_regs_cpu import _elements

WIDTHS = (8, 16, 64, 128, 256, 512, 520, 768, 1000, 1024, 4096, 5120, 8192, 8200, 12288, 16384, 32768, 65536)


def test_backward_compiles_for_sm90_without_warnings():
    prog = compile_mod.build(backward.SOURCE, "sm_90")  # a cached build keeps its log (compile.build)
    assert prog.log == "", prog.log
    assert len(prog.lowered) == len(backward._instantiations()) == sum(
        2 * len(backward.back_table(i)) + 1 for i in (4, 2, 2))


def test_kernel_constants_are_the_launcher_s():
    """The kernel's launch bound and the launcher's block limit are one number; the warp plans' block
    is the forward's."""
    import re
    cu = (ROOT / backward.SOURCE_FILE).read_text()
    assert int(re.search(r"constexpr unsigned BACK_MAX_BLOCK = (\d+);", cu).group(1)) == backward.BACK_MAX_BLOCK
    assert "__launch_bounds__(LANES ? REGS_WARP_BLOCK : BACK_MAX_BLOCK)" in cu
    assert all(backward.back_plan(N, 4).block == launch.REGS_WARP_BLOCK for N in (8, 64, 512))


def test_backward_entries_name_their_files_and_sections():
    for e in registry.BACKWARD_RUNGS:
        assert callable(e.backward_fn()) and callable(e.launch_fn()), e
        if e.backward_source:
            text = (ROOT / e.backward_source).read_text()
            for section in ("ln_row_held_backward", "column_sums"):
                assert f"--8<-- [start:{section}]" in text and f"--8<-- [end:{section}]" in text
    assert {e.name for e in registry.BACKWARD_RUNGS if e.cuda is not None} == set(backward.RUNGS)
    assert all(registry.BY_NAME[n].rms_norm == rms for n, rms in backward.RUNGS.items())


@pytest.mark.parametrize("itemsize", [4, 2])
@pytest.mark.parametrize("N", WIDTHS)
def test_back_plan_holds_the_row_once_and_at_most_16_a_thread(N, itemsize):
    plan = backward.back_plan(N, itemsize)
    assert plan is not None and plan.targs in backward.back_table(itemsize)
    assert plan.vecs * plan.vec <= backward.BACK_EPT and plan.block <= backward.BACK_MAX_BLOCK
    got, words = _elements(plan, N, 0)
    assert np.array_equal(np.sort(got), np.arange(N)), (N, plan)
    # the fewest lanes, or the smallest cluster, that holds it
    if plan.lanes and plan.lanes > 4:
        assert N > plan.lanes // 2 * backward.BACK_EPT
    if plan.cluster > 1:
        assert N > plan.cluster // 2 * backward.BACK_MAX_BLOCK * backward.BACK_EPT


def test_every_instantiation_is_some_width_s_plan():
    for itemsize in (4, 2):
        vec = 16 // itemsize
        reached = {backward.back_plan(N, itemsize).targs for N in range(vec, 65537, vec)}
        assert reached == set(backward.back_table(itemsize))
        assert backward.back_plan(65536 + vec, itemsize) is None and backward.back_plan(vec + 1, itemsize) is None


def _launched(name, M, N, dtype=torch.float32, weight=True, bias=True, properties=None):
    x = torch.zeros(M, N, dtype=dtype)
    w = torch.ones(N, dtype=dtype) if weight else None
    b = torch.ones(N, dtype=dtype) if bias and not backward.RUNGS[name] else None
    stats = torch.zeros(M)
    with runtime.use(runtime.RecordingRuntime(properties)) as rt:
        dx, dw, db = backward.run(name, x, x, w, b, stats, stats)
    assert dx.shape == x.shape and (dw is None) == (w is None) and (db is None) == (b is None)
    return [(L.kernel, L.grid, L.block, L.shared) for L in rt.launches]


def test_launches_warp_block_and_cluster_plans():
    # a warp plan: 32 rows a block at 4 lanes; 132 SMs x BACK_RESIDENT_BLOCKS blocks at most
    assert _launched("row_held", 100000, 64) == [
        ("ln_row_held_backward<float, float, false, 4u, 4u, 4u, 1u>", (264, 1, 1), (128, 1, 1), 2 * 128 * 16 * 4),
        ("column_sums<float, float>", (2, 2, 1), (32, 32, 1), 0)]
    # few rows: no more blocks than rows need
    assert _launched("row_held", 40, 64)[0][1] == (2, 1, 1)
    # a block plan, no bias: one row of sums
    assert _launched("row_held", 1000, 4096, torch.bfloat16, bias=False) == [
        ("ln_row_held_backward<__nv_bfloat16, float, false, 8u, 2u, 0u, 1u>", (264, 1, 1), (256, 1, 1), 0),
        ("column_sums<__nv_bfloat16, float>", (128, 1, 1), (32, 32, 1), 0)]
    # clusters: as many as the device holds, in whole clusters
    props = {**runtime.H100_PROPERTIES, "resident_clusters": 30}
    assert _launched("rms_row_held", 1000, 65536, properties=props) == [
        ("ln_row_held_backward<float, float, true, 4u, 4u, 0u, 8u>", (240, 1, 1), (512, 1, 1), 0),
        ("column_sums<float, float>", (2048, 1, 1), (32, 32, 1), 0)]
    # no weight and no bias: dx alone, no second launch
    assert [k for k, *_ in _launched("row_held", 10, 1024, weight=False, bias=False)] == [
        "ln_row_held_backward<float, float, false, 4u, 4u, 0u, 1u>"]


def test_bad_input_is_refused_before_any_launch():
    x = torch.zeros(4, 64)
    s = torch.zeros(4)
    with runtime.use(runtime.RecordingRuntime()) as rt:
        with pytest.raises(TypeError, match="row_held backward: x must be float32"):
            backward.run("row_held", x.double(), x.double(), None, None, s, s)
        with pytest.raises(ValueError, match="dy must match x"):
            backward.run("row_held", x[:2], x, None, None, s, s)
        with pytest.raises(ValueError, match="weight must be"):
            backward.run("row_held", x, x, torch.zeros(63), None, s, s)
        with pytest.raises(ValueError, match="RMSNorm takes no bias"):
            backward.run("rms_row_held", x, x, None, torch.zeros(64), None, s)
        with pytest.raises(ValueError, match="mean and rstd"):
            backward.run("row_held", x, x, None, None, None, s)
        with pytest.raises(ValueError, match="rstd must hold the forward's 4 float32 values"):
            backward.run("row_held", x, x, None, None, s, s[:3])
        with pytest.raises(ValueError, match="mean must hold"):
            backward.run("row_held", x, x, None, None, s.double(), s)
        with pytest.raises(ValueError, match="name must be one of"):
            backward.run("block_vec", x, x, None, None, s, s)
        odd = torch.zeros(4, 63)
        with pytest.raises(NotImplementedError, match="whole 16-byte words"):
            backward.run("row_held", odd, odd, None, None, s, s)
    assert rt.launches == []


def test_no_rows_give_zero_weight_gradients_and_no_launch():
    x = torch.zeros(0, 64)
    w = torch.ones(64)
    with runtime.use(runtime.RecordingRuntime()) as rt:
        dx, dw, db = backward.run("row_held", x, x, w, w, torch.zeros(0), torch.zeros(0))
    assert rt.launches == [] and dx.shape == (0, 64) and not dw.any() and not db.any()


# --- the committed records and the pages that render them -----------------------------------------

def _record():
    import json
    return json.loads((ROOT / "results/ladder_bench.json").read_text())


def test_probe_s_first_setting_is_the_committed_one_and_the_best():
    """results/backward_probe.json's first setting is what the code holds (the kernel's BACK_PREFETCH
    default, backward.BACK_MAX_BLOCK and BACK_EPT), and it has the best mean of the four medians the
    page shows (row_held and rms_row_held, bf16 and fp32)."""
    import json
    import re
    from reimpl.docsite import backward_tables
    d = json.loads(backward_tables.PROBE.read_text())
    name, first = next(iter(d["settings"].items()))
    cu = (ROOT / backward.SOURCE_FILE).read_text()
    default = re.search(r"#define BACK_PREFETCH (\d)", cu).group(1)
    assert first == {"options": [f"-DBACK_PREFETCH={default}"], "max_block": backward.BACK_MAX_BLOCK,
                     "ept": backward.BACK_EPT}
    med = backward_tables.probe_summary(d)
    score = {s: sum(v for (s2, _, _), v in med.items() if s2 == s) for s in d["settings"]}
    assert len(med) == 4 * len(d["settings"]) and max(score, key=score.get) == name, score
    # the page: blocks of at most 256 threads come within a point of that sum, ahead on float32 rows
    assert score[name] - score["prefetch_block256"] <= 1
    assert all(med[("prefetch_block256", k, "fp32")] > med[(name, k, "fp32")] for k in ("row_held", "rms_row_held"))


def test_backward_record_covers_the_grid():
    """The backward pass of results/ladder_bench.json: the CUDA rungs, torch's ops and Liger's on every
    cell of the grid in every dtype by both methods; the Triton rungs wherever they hold the row, the
    rest named in `skipped` with the reason."""
    from reimpl.checks import grid
    d = _record()
    rows = [r for r in d["rows"] if r["pass"] == "backward"]
    for dtype, size in (("fp32", 4), ("bf16", 2), ("fp16", 2)):
        cells = {(M, N) for _, M, N in grid.cells(size)}
        for method in d["methods"]:
            def have(k):
                return {(r["M"], r["N"]) for r in rows if r["kernel"] == k and r["dtype"] == dtype
                        and r["method"] == method}
            for k in ("row_held", "rms_row_held", "torch_layer_norm", "torch_rms_norm", "liger_layer_norm",
                      "liger_rms_norm", "copy"):
                assert have(k) == cells, (k, dtype, method)
            for k in ("triton_ln", "triton_rms"):
                assert have(k) == {(M, N) for M, N in cells if N <= 16384}, (k, dtype, method)
                skipped = {(s["M"], s["N"]) for s in d["skipped"] if s["kernel"] == k and s["dtype"] == dtype
                           and s["method"] == method and s["pass"] == "backward"}
                assert skipped == cells - have(k) and all(
                    "holds a row in registers" in s["why"] for s in d["skipped"] if s["kernel"] == k)


def test_rung_page_claims_match_the_record():
    """The sentences of rungs.md#backward that the tables do not render: the CUDA backward's losses to
    Liger's are mostly rows of 8192; triton_rms is at its lowest on float32 rows of 12288 and 16384
    where a program takes more than one row (M of 1024 and more: four programs an SM), and several
    times faster on the same widths with fewer rows; the Triton backward loses to Liger's on most
    cells of 4096 columns and more; and every directive of the section renders from the record."""
    from reimpl.docsite import backward_tables
    d = _record()
    s = backward_tables.summary(d)
    lost = [c for e in s if e["kernel"] == "row_held" for c in e["slower_than_liger"]]
    assert lost and sum(N == 8192 for _, N in lost) >= len(lost) / 2, lost
    programs = 4 * runtime.H100_PROPERTIES["multiProcessorCount"]
    for method in d["methods"]:
        rows = [r for r in d["rows"] if r["pass"] == "backward" and r["kernel"] == "triton_rms"
                and r["dtype"] == "fp32" and r["method"] == method and 2 * r["M"] * r["N"] * 4 >= 32 << 20]
        low = min(rows, key=lambda r: r["pct_copy"])
        assert low["N"] in (12288, 16384) and low["M"] >= 1024 > programs, low
        few = [r for r in rows if r["N"] in (12288, 16384) and r["M"] <= programs]
        assert few and all(r["pct_copy"] >= 3 * low["pct_copy"] for r in few), few
    wide = [(e["large"], len([c for c in e["slower_than_liger"] if c[1] >= 4096]),
             sum(1 for _, M, N in _large_cells(e["dtype"]) if N >= 4096 and (M, N) not in e["not_timed"]))
            for e in s if e["kernel"] in ("triton_ln", "triton_rms")]
    assert sum(w[1] for w in wide) > sum(w[2] for w in wide) / 2, wide
    page = (ROOT / "docs/ladder/rungs.md").read_text()
    section = page[page.index("{ #backward }"):]
    for directive in ("{% backward_probe %}", "{% ladder_backward_verdict %}"):
        assert directive in section
    index = (ROOT / "docs/ladder/index.md").read_text()
    assert "{% ladder_backward_grid %}" in index
    assert all(f"{{% ladder_backward {dt} %}}" in index for dt in ("fp32", "bf16", "fp16"))


def _large_cells(dtype):
    from reimpl.checks import grid
    size = 4 if dtype == "fp32" else 2
    return [(p, M, N) for p, M, N in grid.cells(size) if grid.large(M, N, size)]


def test_backward_tables_hold_the_record_s_values():
    """Each per-cell table lists every cell of at least 32 MB of its dtype once, with the record's
    pipelined % of copy of each kernel; the verdict counts every (cell, dtype, method) once."""
    import re
    from reimpl.checks import grid
    from reimpl.docsite import backward_tables, ladder_tables
    d = _record()
    pct = {(r["dtype"], r["M"], r["N"], r["kernel"]): r["pct_copy"] for r in d["rows"]
           if r["pass"] == "backward" and r["method"] == ladder_tables.TABLE_METHOD}
    for dtype, size in (("fp32", 4), ("bf16", 2)):
        text = backward_tables.cells_table(dtype)
        large = [(M, N) for _, M, N in grid.cells(size) if grid.large(M, N, size)]
        for part in text.split("*% of copy")[1:]:
            head = re.search(r"\| M × N \| (.*) \|", part).group(1)
            kernels = [k.strip(" `") for k in head.split("|")]
            body = {tuple(map(int, m.group(1, 2))): m.group(3) for m in
                    re.finditer(r"^\| (\d+) × (\d+) \| (.*) \|$", part, re.M)}
            assert sorted(body) == sorted(large)
            for (M, N), vals in body.items():
                for k, v in zip(kernels, vals.split(" | ")):
                    want = pct.get((dtype, M, N, k))
                    assert v == ("not timed" if want is None else f"{want:.0f}"), (dtype, M, N, k)
    lines = backward_tables.verdict().strip().splitlines()
    assert len(lines) == len(backward_tables.TRIOS)
    for line, (ours, _, _) in zip(lines, backward_tables.TRIOS):
        total = sum(e["large"] for e in backward_tables.summary(d) if e["kernel"] == ours)
        assert f"`{ours}`" in line and f"in {total - len([c for e in backward_tables.summary(d) if e['kernel'] == ours for c in e['slower_than_liger']])} of {total} measurements" in line


def test_rung_index_shows_the_backward_of_the_rungs_that_have_one():
    from reimpl.docsite import ladder_tables
    text = ladder_tables.rung_index()
    for e in registry.RUNGS:
        row = next(line for line in text.splitlines() if f"`{e.name}`" in line and line.startswith("|"))
        assert ("backward:" in row) == (e.backward is not None), e.name


def test_holders_picture_is_the_recorded_launch():
    """rungs.md's picture of the CUDA backward: its holders are the recorded launch's blocks, every row
    is drawn once in the holder the kernel's loop gives it (row r with holder r mod G), and the column
    sum's grid is the recorded one."""
    import re
    from reimpl.docsite import thread_diagrams as td
    from reimpl.docsite.diagrams import DIAGRAMS
    svg = DIAGRAMS["backward_holders"]("")
    wk = td.backward_walk()
    G = wk["main"].grid[0]
    assert G == td.BACKWARD_SMS and f"data-holders='{G}'" in svg
    drawn = {int(r): int(h) for r, h in re.findall(r"data-row='(\d+)' data-holder='(\d+)'", svg)}
    assert drawn == {r: r % G for r in range(td.BACKWARD_M)}
    sums = wk["sums"]
    assert sums.grid[:2] == (-(-td.BACKWARD_N // 32), 2) and f"data-sums-grid='{sums.grid[0]},{sums.grid[1]}'" in svg
    assert "{% diagram backward_holders %}" in (ROOT / "docs/ladder/rungs.md").read_text()


def test_triton_resources_back_the_page():
    """results/triton_backward_resources.json was compiled at the warps the rung uses (bwd_plan); what
    rungs.md says of it holds: no stack frame below tiles of 8192 columns, one in every instance at
    16384, triton_rms's there over three kilobytes at 32 registers."""
    import json
    from reimpl.docsite import backward_tables
    from reimpl.ladder import triton_rungs
    d = json.loads(backward_tables.TRITON_RESOURCES.read_text())
    assert {r["block"] for r in d["rows"]} == {1 << k for k in range(6, 15)} and d["target"] == "sm_90"
    for r in d["rows"]:
        assert triton_rungs.bwd_plan(r["block"]) == (r["block"], r["num_warps"]), r
        if r["block"] < 8192:
            assert r["stack_bytes"] == 0, r
        if r["block"] == 16384:
            assert r["stack_bytes"] > 0, r
            if r["kernel"] == "triton_rms":
                assert r["stack_bytes"] > 3000 and r["registers"] == 32, r
    assert "{% triton_backward_resources %}" in (ROOT / "docs/ladder/rungs.md").read_text()
    for N in range(1, 40000, 7):  # the tile is N's next power of two
        block, _ = triton_rungs.bwd_plan(N)
        assert block >= N and (block == 1 or block // 2 < N) and block & (block - 1) == 0, N
