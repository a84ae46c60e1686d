"""CPU: the benchmarks' shared shape grid (reimpl.checks.grid), the records the grid runs and the
row_held probes committed (results/ladder_grid_bench.json, results/row_held_orders.json,
results/row_held_knobs.json), and the page table drawn from them."""
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
    d = _load("ladder_grid_bench.json")
    cells = {dt: {(M, N) for _, M, N in grid.cells(grid_tables.ITEMSIZE[dt])} for dt in grid_tables.ITEMSIZE}
    copy = {(r["run"], r["method"], r["dtype"], r["M"], r["N"]): r["ms"] for r in d["rows"] if r["kernel"] == "copy"}
    assert d["runs"] and all(r["device"] and r["torch"] and r["date"] for r in d["runs"])
    for r in d["rows"]:
        assert (r["M"], r["N"]) in cells[r["dtype"]], r
        assert r["method"] in d["methods"] and 0 <= r["run"] < len(d["runs"])
        # pct_copy is the copy timed in the row's own run over the row's time
        c = copy[(r["run"], r["method"], r["dtype"], r["M"], r["N"])]
        assert abs(r["pct_copy"] - 100 * c / r["ms"]) < 1e-6 * r["pct_copy"], r
        nbytes = 2 * r["M"] * r["N"] * grid_tables.ITEMSIZE[r["dtype"]]
        assert abs(r["gbps"] - nbytes / r["ms"] / 1e6) < 1e-6 * r["gbps"]
    # the top rungs cover the whole grid in every dtype, by both methods
    for k in ("row_held", "rms_row_held"):
        for dt, cs in cells.items():
            for m in d["methods"]:
                assert {(r["M"], r["N"]) for r in d["rows"] if r["kernel"] == k and r["dtype"] == dt
                        and r["method"] == m} == cs, (k, dt, m)


def test_held_order_is_the_probes_best():
    """The committed block-shape order of ln_row_held (launch.HELD_ORDER) is the order of
    results/row_held_orders.json with the best median % of copy over its cells, for each rung."""
    d = _load("row_held_orders.json")
    committed = {int(k): tuple(tuple(e) for e in v) for k, v in d["orders"][_committed_order(d)].items()}
    assert committed == launch.HELD_ORDER
    for kernel in ("row_held", "rms_row_held"):
        score = {}
        for r in d["rows"]:
            if r["kernel"] == kernel:
                score.setdefault(r["setting"].split("/")[1], []).append(r["pct_copy"])
        assert max(score, key=lambda o: median(score[o])) == _committed_order(d), (kernel, score)


def _committed_order(d):
    names = [k for k, v in d["orders"].items()
             if {int(i): tuple(tuple(e) for e in o) for i, o in v.items()} == launch.HELD_ORDER]
    assert len(names) == 1, names
    return names[0]


def test_knob_defaults_are_the_probes_best():
    """ln_row_held's ROW_HELD_* defaults ("late": no -D option) are the setting of
    results/row_held_knobs.json with the best median % of copy for row_held, and within 2 points of
    the best for rms_row_held (as the kernel's comment says)."""
    d = _load("row_held_knobs.json")
    assert d["settings"]["late"] == []
    src = (ROOT / "reimpl/ladder/cuda/ln_row_held.cu").read_text()
    for macro, value in (("ROW_HELD_EARLY_BYTES", 0), ("ROW_HELD_WARP_BLOCKS", 1), ("ROW_HELD_BLOCK_BLOCKS", 1)):
        assert f"#define {macro} {value}\n" in src
    for kernel in ("row_held", "rms_row_held"):
        score = {}
        for r in d["rows"]:
            if r["kernel"] == kernel:
                score.setdefault(r["setting"].split("/")[0], []).append(r["pct_copy"])
        best = max(median(v) for v in score.values())
        slack = 0.0 if kernel == "row_held" else 2.0
        assert median(score["late"]) >= best - slack, (kernel, {k: median(v) for k, v in score.items()})


def test_grid_table_matches_the_record():
    d = _load("ladder_grid_bench.json")
    text = grid_tables.table()
    for s in grid_tables.summary(d):
        line = next(l for l in text.splitlines()
                    if l.startswith(f"| `{s['kernel']}` | {s['dtype']} | {s['method']} |"))
        assert f"{s['lo']:.0f}–{s['hi']:.0f}" in line and f"{s['at_goal']} of {s['large']}" in line
        mine = [r for r in d["rows"] if r["kernel"] == s["kernel"] and r["dtype"] == s["dtype"]
                and r["method"] == s["method"] and grid.large(r["M"], r["N"], grid_tables.ITEMSIZE[s["dtype"]])]
        assert s["large"] == len(mine) and s["lo"] == min(r["pct_copy"] for r in mine)
