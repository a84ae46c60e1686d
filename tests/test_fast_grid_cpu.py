"""CPU-only: the fast page's whole-grid section says what results/fast_grid_bench.json holds. Its
tables are rendered from the record; these tests hold the sentences around them to it, and check the
renderers on a small fixture."""
import json
from pathlib import Path

from reimpl.docsite import fast_tables as F

ROOT = Path(__file__).resolve().parents[1]


def _record():
    return json.loads((ROOT / "results/fast_grid_bench.json").read_text())


def _cells(method="pipelined"):
    return F.grid_cells(_record(), method)


def test_the_grid_is_the_shared_grid_in_three_dtypes_and_both_methods():
    from reimpl.checks import grid
    d = _record()
    assert set(d["methods"]) == {"pipelined", "flushed"}
    for method in d["methods"]:
        cells = F.grid_cells(d, method)
        for dtype, size in (("fp32", 4), ("bf16", 2), ("fp16", 2)):
            want = {(dtype, part, M, N, grid.large(M, N, size)) for part, M, N in grid.cells(size)}
            assert {k for k in cells if k[0] == dtype} == want
        assert all({"copy", "torch_layer_norm", "fast_layer_norm", "torch_rms_norm", "fast_rms_norm"} <= set(c)
                   for c in cells.values())


def test_the_shortfalls_the_page_lists():
    page = (ROOT / "docs/ladder/fast.md").read_text()
    cells = _cells()
    below = {(k[0], k[1], k[2], k[3], op) for k, c in cells.items() if k[4]
             for op in ("layer_norm", "rms_norm") if c[f"fast_{op}"]["pct_copy"] < F.GOAL}
    assert below, "the page lists shortfalls: there must be some"
    # short rows, 16-bit above all: LayerNorm under the goal, RMSNorm closer
    for k, c in cells.items():
        if k[0] != "fp32" and k[1] == "tall" and k[3] <= 256:
            assert c["fast_layer_norm"]["pct_copy"] < F.GOAL and c["fast_rms_norm"]["pct_copy"] > \
                c["fast_layer_norm"]["pct_copy"], k
    # few rows of wide N: LayerNorm under the goal up to 2048 rows
    assert all(c["fast_layer_norm"]["pct_copy"] < F.GOAL for k, c in cells.items()
               if k[1] == "wide" and k[4] and k[2] <= 2048)
    # rows past 16384 elements: every one under the goal
    assert all(c[f"fast_{op}"]["pct_copy"] < F.GOAL for k, c in cells.items() if k[3] > 16384
               for op in ("layer_norm", "rms_norm"))
    # some model widths at M = 4096, in every dtype
    assert all(any(k[0] == dt and k[1] == "model" for k in [b[:4] for b in below]) for dt in ("fp32", "bf16", "fp16"))
    assert "- **Some model widths at M = 4096**" in page and "- **Short rows** (N up to 256), 16-bit above all" in page


def test_where_torch_is_faster():
    d = _record()
    slower = [(k[0], op, c[f"fast_{op}"]["ms"] / c[f"torch_{op}"]["ms"], m)
              for m in d["methods"] for k, c in F.grid_cells(d, m).items()
              for op in ("layer_norm", "rms_norm") if c[f"fast_{op}"]["ms"] > c[f"torch_{op}"]["ms"]]
    fp32_rms = [r for dt, op, r, _ in slower if (dt, op) == ("fp32", "rms_norm")]
    others = [r for dt, op, r, _ in slower if (dt, op) != ("fp32", "rms_norm")]
    assert len(fp32_rms) > len(slower) / 2 and max(fp32_rms) < 1.25 and max(others) < 1.09 + 0.005
    page = (ROOT / "docs/ladder/fast.md").read_text()
    assert "are mostly fp32\nRMSNorm, by up to a quarter (a flushed cell); the others are within 9%" in page
    worst = max(slower, key=lambda x: x[2])
    assert worst[:2] == ("fp32", "rms_norm") and worst[3] == "flushed"


def test_the_group_kernel_gained_on_every_cell_it_takes():
    gains = F.group_gain(_record())
    assert len(gains) == 2 * 3 * 2 * 2  # methods x dtypes x (N = 64, 128) x ops
    assert all(now > was for *_, was, now in gains)
    text = F.fast_group_gain()
    assert "| fp32 | 524288×64 | LayerNorm |" in text


def test_summary_counts_match_the_cells():
    d = _record()
    for r in F.grid_summary(d):
        cells = {k: c for k, c in F.grid_cells(d, r["method"]).items() if k[0] == r["dtype"]}
        big = [c[f"fast_{r['op']}"]["pct_copy"] for k, c in cells.items() if k[4]]
        assert r["large"] == len(big) and r["at_goal"] == sum(p >= F.GOAL for p in big)
        assert r["lowest"] == min(big)
    text = F.fast_grid_summary()
    assert text.count("| pipelined,") == 6 and text.count("| flushed,") == 6
    table = F.fast_grid("bf16")
    assert "| tall | 1048576×64 |" in table and "**" in table  # cells under the goal are marked
