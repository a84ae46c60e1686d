"""CPU-only: the fast page's fused-backward tables are drawn from results/fused_backward_probe.json and
reimpl/fast/backward.py, and what its prose says of them holds: the route's floor is where the probe
turns from a loss to a win, torch's GammaBeta kernel dominates the narrow rows, and the profile's
numbers are the ones the page reads off it."""
from pathlib import Path

from reimpl.docsite import fused_tables as T
from reimpl.fast import backward

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs/ladder/fast.md").read_text()


def test_the_route_sentence_is_the_plans():
    """The probe records the plan's floors; they are backward.py's now, and the sentence says them."""
    route = T.load(T.PROBE)["route"]
    assert route == {"min_width": backward.MIN_WIDTH, "max_width": 512 * max(backward.REGISTER_VECTORS),
                     "min_elements": backward.MIN_ELEMENTS}
    text = T.fused_route()
    assert f"rows of {backward.MIN_WIDTH} to {512 * max(backward.REGISTER_VECTORS)} elements" in text
    assert f"{backward.MIN_ELEMENTS:,} elements in all" in text
    assert "{% fused_route %}" in PAGE


def test_probe_table_holds_every_shape_and_same_bits():
    d = T.load(T.PROBE)
    cells = T.probe_cells(d)
    rows = [line for line in T.fused_probe().splitlines() if line.startswith(("| fp32 ", "| bf16 ", "| fp16 "))]
    assert len(rows) == len(cells) >= 10
    assert all(line.endswith("| yes |") for line in rows)
    assert all(set(c) == set(T.ROUTES) for c in cells.values())


def test_the_floor_is_where_the_probe_turns():
    """The fused kernel loses on every probed width below MIN_WIDTH and wins on every one from it up."""
    d = T.load(T.PROBE)
    wins = set(T.fused_wins(d))
    for (dtype, M, N) in T.probe_cells(d):
        assert ((dtype, M, N) in wins) == (N >= backward.MIN_WIDTH), (dtype, M, N)
    assert "Narrow rows are where the route loses." in PAGE


def test_gamma_beta_dominates_the_narrow_rows():
    """"The same limit holds for torch's GammaBeta kernel, which on such shapes takes most of the
    backward's time"."""
    narrow = [c["torch"]["kernels_us"] for (dt, M, N), c in T.probe_cells(T.load(T.PROBE)).items()
              if N < backward.MIN_WIDTH]
    assert narrow
    for k in narrow:
        gb = sum(v for name, v in k.items() if name.startswith("GammaBeta"))
        assert gb > sum(k.values()) / 2, k
    assert "which on such shapes takes most of the backward's time" in PAGE


def test_the_profile_sentences_hold():
    n = T.load(T.PROBE)["ncu"]["kernels"]
    fused = next(k for k in n if k["route"] == "fast_fused")
    gamma_beta = next(k for k in n if k["kernel"].startswith("GammaBeta"))
    assert 40 <= fused["l2_hit_pct"] <= 60  # "about half of the fused kernel's L2 requests hit"
    assert gamma_beta["l2_hit_pct"] < 10  # "hits almost never"
    assert fused["registers"] == 128  # "in 128 registers a thread"
    assert 20 <= fused["achieved_occupancy_pct"] <= 30  # "only a quarter of an SM's warps"
    assert fused["dram_pct"] < 50  # "less than half of DRAM's bandwidth"
    for words in ("About half of the fused kernel's L2 requests hit", "hits almost never", "128 registers a thread",
                  "a\nquarter of an SM's warps", "less than half of DRAM's bandwidth"):
        assert words in PAGE, words
    rows = [line for line in T.fused_ncu().splitlines() if line.startswith("| fast_") or line.startswith("| torch")]
    assert len(rows) == len(n)


def test_the_readmes_fused_route_numbers_are_the_records():
    import json
    from reimpl.docsite import fast_tables as F
    readme = " ".join((ROOT / "README.md").read_text().split())
    gpu = json.loads((ROOT / "results/gpu_tests_fused_backward.json").read_text())
    assert f"{gpu['pytest'].split(',')[0]}, 0 of {gpu['totals']['elements_compared']:,} elements" in readme
    assert gpu["totals"]["mismatched_elements"] == 0 and gpu["pytest_exitstatus"] == 0
    d = T.load(T.PROBE)
    ratios = {k: c["fast_fused"]["total_us"] / c["fast_two_kernels"]["total_us"] for k, c in T.probe_cells(d).items()}
    wide = [r for (dt, M, N), r in ratios.items() if N >= backward.MIN_WIDTH]
    narrow = [r for (dt, M, N), r in ratios.items() if N < backward.MIN_WIDTH]
    assert (f"{min(wide):.2f}-{max(wide):.2f}x on the {len(wide)} probed shapes of {backward.MIN_WIDTH} to 8192 "
            f"columns, {min(narrow):.2f}-{max(narrow):.2f}x on the three narrower ones") in readme and len(narrow) == 3
    s = F.backward_summary(F.load(F.FAST_BACKWARD))
    ln, rms = s["layer_norm"], s["rms_norm"]
    assert ln["no_slower_than_torch"] == ln["cells"] and rms["no_slower_than_torch"] == rms["cells"]
    assert f"no slower than torch on all {ln['cells'] + rms['cells']} cells of at least 32 MB" in readme
    assert f"up to {ln['pct'][1]:.0f}% (LayerNorm) and {rms['pct'][1]:.0f}% (RMSNorm) of copy" in readme
    assert f"faster on {ln['liger_faster']} LayerNorm and {rms['liger_faster']} RMSNorm cells" in readme
    most = 512 * max(backward.REGISTER_VECTORS)
    assert f"rows of {backward.MIN_WIDTH} to {most} elements with a weight and at least 2^22 elements" in readme
    assert backward.MIN_ELEMENTS == 1 << 22


def test_the_readmes_whole_backward_line_is_the_record():
    from reimpl.docsite import fast_tables as F
    readme = " ".join((ROOT / "README.md").read_text().split())
    d = F.load(F.FAST_BACKWARD)
    cells = [(k, c) for m in d["methods"] for k, c in F.backward_cells(d, m).items()]
    big = [c for k, c in cells if F.large(*k[1:])]
    small = [(k, c) for k, c in cells if not F.large(*k[1:])]
    best = max(c["torch"]["ms"] / c["fast"]["ms"] for c in big)
    assert all(c["fast"]["ms"] <= c["torch"]["ms"] for c in big)
    assert {k[2:] for k, _ in small} == {(4096, 1024)}
    assert all(c["fast"]["ms"] <= 1.02 * c["torch"]["ms"] for _, c in small)
    s = F.backward_summary(d)
    lo = min(v["pct"][0] for v in s.values())
    hi = max(v["pct"][1] for v in s.values())
    assert (f"no slower than torch's on every cell of at least 32 MB (up to {best:.2f}×" in readme
            and f"at {lo:.0f}-{hi:.0f}% of copy on cells of at least 32 MB" in readme)
    faster = sum(v["liger_faster"] for v in s.values())
    assert f"faster on {faster} of those {sum(v['cells'] for v in s.values())}." in readme

