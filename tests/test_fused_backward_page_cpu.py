"""CPU-only: the fast page's fused-backward tables are drawn from results/fused_backward_probe.json, and
what its prose says of them holds: against torch's tile the fused kernel turns from a loss to a win
at the floor the probe recorded, torch's GammaBeta kernel dominates the narrow rows, and the
profile's numbers are the ones the page reads off it."""
from pathlib import Path

from reimpl.docsite import fused_tables as T
from reimpl.fast import backward

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs/ladder/fast.md").read_text()


def test_the_probe_recorded_its_floor():
    """The fused probe ran with the floor of its day (rows of 1536 elements) set aside; the tests below
    read the probe against that recorded floor (today's route: tests/test_chains_page_cpu.py)."""
    route = T.load(T.PROBE)["route"]
    assert route["min_width"] == 1536 and route["max_width"] == 512 * max(backward.REGISTER_VECTORS)


def test_probe_table_holds_every_shape_and_same_bits():
    d = T.load(T.PROBE)
    cells = T.probe_cells(d)
    rows = [line for line in T.fused_probe().splitlines() if line.startswith(("| fp32 ", "| bf16 ", "| fp16 "))]
    assert len(rows) == len(cells) >= 10
    assert all(line.endswith("| yes |") for line in rows)
    assert all(set(c) == set(T.ROUTES) for c in cells.values())


def test_the_floor_is_where_the_probe_turns():
    """Against torch's tile, the fused kernel loses on every probed width below the recorded floor and
    wins on every one from it up."""
    d = T.load(T.PROBE)
    floor = d["route"]["min_width"]
    wins = set(T.fused_wins(d))
    for (dtype, M, N) in T.probe_cells(d):
        assert ((dtype, M, N) in wins) == (N >= floor), (dtype, M, N)
    assert "Narrow rows are where the fused kernel loses." in PAGE


def test_gamma_beta_dominates_the_narrow_rows():
    """"The same limit holds for torch's GammaBeta kernel, which on such shapes takes most of the
    backward's time"."""
    d = T.load(T.PROBE)
    narrow = [c["torch"]["kernels_us"] for (dt, M, N), c in T.probe_cells(d).items() if N < d["route"]["min_width"]]
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


def test_the_readmes_whole_backward_line_is_the_record():
    from reimpl.docsite import fast_tables as F
    readme = " ".join((ROOT / "README.md").read_text().split())
    d = F.load(F.FAST_BACKWARD)
    cells = [(k, c) for m in d["methods"] for k, c in F.backward_cells(d, m).items()]
    big = [c for k, c in cells if F.large(*k[1:])]
    small = [(k, c) for k, c in cells if not F.large(*k[1:])]
    best = max(cells, key=lambda kc: kc[1]["torch"]["ms"] / kc[1]["fast"]["ms"] if F.large(*kc[0][1:]) else 0)
    ratio = best[1]["torch"]["ms"] / best[1]["fast"]["ms"]
    assert all(c["fast"]["ms"] <= c["torch"]["ms"] for c in big)
    assert {k[2:] for k, _ in small} == {(4096, 1024)}
    small_ratios = [c["fast"]["ms"] / c["torch"]["ms"] for _, c in small]
    s = F.backward_summary(d)
    lo = min(v["pct"][0] for v in s.values())
    hi = max(v["pct"][1] for v in s.values())
    assert (f"no slower than torch's on every cell of at least 32 MB (up to {ratio:.2f}×, on the narrow rows where "
            f"the chains kernel takes dgamma and dbeta)" in readme
            and f"at {lo:.0f}-{hi:.0f}% of copy on cells of at least 32 MB" in readme)
    assert best[0][3] * (4 if best[0][1] == "fp32" else 2) < 8192  # a row under the fused route's 8 KB
    assert (f"faster on the smaller ones too (4096 x 1024, {min(small_ratios):.2f}-{max(small_ratios):.2f}× "
            "torch's time)") in readme and max(small_ratios) < 1
    faster = sum(v["liger_faster"] for v in s.values())
    assert f"faster on {faster} of those {sum(v['cells'] for v in s.values())}." in readme

