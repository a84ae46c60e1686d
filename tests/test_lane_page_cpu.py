"""CPU-only: the fast page's section on the lane kernel says what results/lane_probe.json and
results/lane_rows_probe.json hold. Its tables are rendered from the probes (every variant's bits
checked against torch's before it was timed); the profile is of the kernels the plan runs on that
shape; the plan's rule is the one the page states; and the sentences around the tables are held to
the records here."""
import json
from pathlib import Path

from reimpl.docsite import forward_probe_tables as P
from reimpl.fast import forward as F
from reimpl.mirror import kernel_table as K

ROOT = Path(__file__).resolve().parents[1]


def _probe(name: str) -> dict:
    return json.loads((ROOT / "results" / name).read_text())


def _page() -> str:
    return " ".join((ROOT / "docs/ladder/fast.md").read_text().split())


def _cell(name: str, part: str, dtype: str, op: str, M: int, N: int, method: str = "pipelined") -> dict:
    return P.cells(_probe(name), part, method)[(dtype, op, M, N)]


def test_every_variant_gave_torchs_bits():
    for name in ("lane_probe.json", "lane_rows_probe.json"):
        bits = _probe(name)["bits"]
        assert bits["variants_compared"] >= 64 and bits["mismatched_elements"] == 0


def test_the_profile_is_of_the_kernels_the_plan_runs():
    before, lane = _probe("lane_probe.json")["ncu"]
    assert before["shape"] == lane["shape"] == "bf16 262144 x 256 LayerNorm, weight and bias"
    kernel = F.plan(K.BFloat16, False, True, True, 262144, 256, 132)[0]
    old = F.plan(K.BFloat16, False, True, True, 262144, 256, 132, aligned16=False)[0]
    assert lane["kernel"].startswith(kernel.template.name + "<BFloat16, float, 0, 1, 1, 64, 2>")
    assert before["kernel"].startswith(old.template.name) and old.template is F.WARP_TEMPLATE
    assert lane["command"].endswith("bf16 262144 256") and before["command"].endswith("bf16 262144 256 before")
    # the page's reading of the profile: about a third of the instructions, about twice the DRAM
    # throughput, although fewer warps are resident
    assert 0.28 < lane["executed_instructions"] / before["executed_instructions"] < 0.38
    assert 1.8 < lane["dram_throughput_pct"] / before["dram_throughput_pct"] < 2.2
    assert lane["duration_us"] < before["duration_us"]
    assert lane["achieved_occupancy_pct"] < before["achieved_occupancy_pct"] and lane["registers"] > before["registers"]
    assert ("executes about a third of the warp kernel's instructions, and the DRAM throughput about doubles, "
            "although fewer warps are resident") in _page()


def test_the_rule_the_page_states():
    page = _page()
    few, many = F.LANE_ROWS_PER_SM
    assert f"from {few} rows per SM" in page and f"start at {many} rows per SM" in page
    assert F.LANE_CHUNKS == (8, 16, 32) and "rows of 8 to 32 chunks with W = 2" in page and F.LANE_WARPS == 2
    assert "(16-bit N = 64, 128, 256; fp32 N = 32, 64, 128)" in page
    for T, N in ((K.BFloat16, 64), (K.Half, 256), (K.float_, 32), (K.float_, 128)):
        assert F.lane_vectors(T, N) == N // 4
    for T, N in ((K.BFloat16, 512), (K.float_, 256), (K.BFloat16, 32)):
        assert F.lane_vectors(T, N) is None


def test_w1_and_w2_are_within_two_points():
    for method in ("pipelined", "flushed"):
        for c in P.cells(_probe("lane_probe.json"), "lane", method).values():
            assert abs(c["lane_W1"] - c["lane_W2"]) <= 2
    assert "W = 1 and W = 2 are within two points of each other on every row" in _page()


def test_where_it_loses_as_the_page_says():
    for method in ("pipelined", "flushed"):
        bf16_512 = _cell("lane_probe.json", "lane", "bf16", "layer_norm", 131072, 512, method)
        rms_256 = _cell("lane_probe.json", "lane", "fp32", "rms_norm", 131072, 256, method)
        ln_256 = _cell("lane_probe.json", "lane", "fp32", "layer_norm", 131072, 256, method)
        assert bf16_512["before"] - bf16_512["lane_W2"] > 10       # "well ahead"
        assert 0 < rms_256["before"] - rms_256["lane_W2"] < 5      # "a little"
        assert ln_256["lane_W2"] > ln_256["before"]                # "only fp32 LayerNorm 256 gains"
        # one warp per SM, and 64 rows per SM: the lane kernel behind
        for part, (dtype, M, N) in (("lane", ("fp16", 4097, 256)), ("lane_rows", ("bf16", 8448, 256))):
            name = "lane_probe.json" if part == "lane" else "lane_rows_probe.json"
            for op in ("layer_norm", "rms_norm"):
                c = _cell(name, part, dtype, op, M, N, method)
                assert c["lane_W2"] < c["before"]
        # "At 33792 rows of 256 elements, 16-bit LayerNorm is still well short of a copy"
        assert _cell("lane_rows_probe.json", "lane_rows", "bf16", "layer_norm", 33792, 256, method)["lane_W2"] < 85


def test_the_gain_table_holds_only_cells_the_plan_gives_the_lane_kernel():
    for method in ("pipelined", "flushed"):
        cells = P.lane_gain_cells(method)
        assert {k for k in cells} == {("16-bit", "LayerNorm"), ("16-bit", "RMSNorm"), ("fp32", "LayerNorm"),
                                      ("fp32", "RMSNorm")}
        for pairs in cells.values():
            # on every cell the plan moved, the lane kernel is ahead of what ran before
            assert all(lane > before for before, lane in pairs), pairs
    text = P.lane_gain()
    assert "| 16-bit LayerNorm | pipelined | 7 |" in text


def test_the_directives_render():
    page = (ROOT / "docs/ladder/fast.md").read_text()
    for directive in ("{% lane_ncu %}", "{% lane_gain %}", "{% fast_probe lane before lane_W1 lane_W2 lane_W4 torch %}",
                      "{% fast_probe lane_rows before lane_W2 torch %}"):
        assert directive in page
    assert "| bf16, LayerNorm | 262144×256 |" in P.fast_probe("lane before lane_W2 torch")
    assert P.label("lane_W4") == "lane, W 4" and P.label("before") == "before (group or warp kernel)"
