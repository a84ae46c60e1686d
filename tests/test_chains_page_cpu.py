"""CPU-only: the fast page's chains-kernel section is drawn from results/chains_probe.json, and what
its prose says of the numbers holds: the probe recorded the plan's constants as they are now, the
plan's own call took the route backward.py takes today on every probed cell, every route gave
torch's bits, and the profile's figures are the ones the sentences read off them."""
from pathlib import Path

from reimpl.docsite import chains_tables as C
from reimpl.fast import backward
from reimpl.mirror import kernel_table as K

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs/ladder/fast.md").read_text()
PROSE = " ".join(PAGE.split())
D = C.load(C.PROBE)
TYPES = {"fp32": K.float_, "bf16": K.BFloat16, "fp16": K.Half}


def test_the_probe_recorded_the_plans_constants_and_the_sentence_says_them():
    r = D["route"]
    assert r == {"min_row_bytes": backward.MIN_ROW_BYTES, "max_width": 512 * max(backward.REGISTER_VECTORS),
                 "min_elements": backward.MIN_ELEMENTS, "chains_min_elements": backward.CHAINS_MIN_ELEMENTS,
                 "torch_tile_float_bytes": backward.TORCH_TILE_FLOAT_BYTES, "chain_stage": backward.CHAIN_STAGE,
                 "chain_stages": list(backward.CHAIN_STAGES),
                 "deep_ring_blocks_per_sm": backward.DEEP_RING_BLOCKS_PER_SM, "sms": 132}
    text = C.backward_routes()
    for figure in (r["min_row_bytes"], r["max_width"], r["min_elements"], r["torch_tile_float_bytes"]):
        assert f"{figure:,}" in text
    for tag in ("{% backward_routes %}", "{% chains_probe fp32 %}", "{% chains_probe bf16 %}", "{% chains_summary %}",
                "{% chains_choices %}", "{% chains_ncu %}"):
        assert tag in PAGE, tag


def route_now(op: str, dtype: str, M: int, N: int) -> str:
    """The route backward.py's plan takes today for an input the probe measured (16-byte aligned)."""
    T, rms = TYPES[dtype], op == "rms_norm"
    if backward.plan(T, rms, True, M, N, D["route"]["sms"]) is not None:
        return "fused"
    Y = backward.thread_rows(M, N, D["route"]["sms"])
    gamma_beta = K.GammaBetaBackwardCUDAKernelTemplate[T, K.float_, 32, Y, 8 * Y, Y == 1, False, rms]
    args = (M, N, 1 << 20, 2 << 20, 3 << 20, 4 << 20, 5 << 20, 0 if rms else 6 << 20)
    taken = backward.gamma_beta_launches(gamma_beta, (-(-N // 32), 1, 1), args, D["route"]["sms"], lambda n: 0)
    return "two kernels" if taken is None else "chains"


def test_the_plans_call_took_the_route_the_plan_takes_today():
    cells = C.cells(D)
    assert len(cells) >= 80
    for (op, dtype, M, N), c in cells.items():
        assert C.taken(c["plan"]) == route_now(op, dtype, M, N), (op, dtype, M, N)


def test_tables_hold_every_cell_and_every_route_gave_torchs_bits():
    cells = C.cells(D)
    rows = [line for dt in ("fp32", "bf16") for line in C.chains_probe(dt).splitlines()
            if line.startswith(("| LayerNorm ", "| RMSNorm "))]
    assert len(rows) == len(cells) and all(line.endswith("| yes |") for line in rows)
    assert all(r["bit_identical"] for c in cells.values() for r in c.values())
    assert C.summary(D)["same_bits"] and "Every route gave torch's bits on every cell: yes" in C.chains_summary()


def test_the_choices_the_prose_names_are_the_measured_ones():
    """"From rows of 8 KB up to the fused kernel's 8,192 elements, the fused kernel ... takes dgamma and
    dbeta; below that, and for 16-bit rows longer than the fused kernel takes, the chains kernel does;
    float rows longer than 32 KB keep torch's tile, which measured faster there; and small grids take
    the deep ring": each choice is the faster one on most of the cells that bear on it, and within a
    few percent elsewhere."""
    c = C.choices(D)
    wins, n, gap = c["fused"]
    assert wins >= 0.9 * n and gap <= 0.02
    wins, n, gap = c["chains"]
    assert wins >= 0.7 * n and gap <= 0.04
    wins, n, _, _ = c["torch_tile"]
    assert n and wins > n / 2
    wins, n, _, _ = c["deep_small"]
    assert n and wins > n / 2
    wins, n, _, _ = c["deep_large"]
    assert n and wins < n / 2
    assert backward.MIN_ROW_BYTES == 8 * 1024 and backward.TORCH_TILE_FLOAT_BYTES == 32 * 1024
    assert 512 * max(backward.REGISTER_VECTORS) == 8192
    for words in ("From rows of 8 KB up to the fused kernel's 8,192 elements, the fused kernel",
                  "below that, and for 16-bit rows longer than the fused kernel takes, the chains kernel does",
                  "float rows longer than 32 KB keep torch's tile, which measured faster there",
                  "small grids take the deep ring"):
        assert words in PROSE, words


def test_the_profile_sentences_hold():
    gb, chains = (next(k for k in D["ncu"]["kernels"] if k["name"].startswith(p))
                  for p in ("GammaBeta", "fast_gamma_beta_chains"))
    assert gb["grid"] == "24,1,1" and D["route"]["sms"] == 132  # "at N = 768, 24 blocks for 132 SMs"
    assert gb["waves_per_sm"] < 0.1  # "fills less than a tenth of one wave"
    assert 1 / 8 < gb["dram_throughput_pct"] / 100 < 1 / 6  # "about a seventh of its peak"
    assert chains["grid"] == f"{C.grid_blocks('bf16', 65536, 768)},1,1" == "384,1,1"  # "(384 at N = 768, Y = 32)"
    assert 2.5 < chains["dram_throughput_pct"] / gb["dram_throughput_pct"] < 3.5  # "about three times as busy"
    assert chains["dram_throughput_pct"] < 50  # "still far from DRAM's peak"
    assert chains["achieved_occupancy_pct"] < 10  # "less than a tenth of the warps they could"
    assert chains["warp_cycles_per_issued_instruction"] < 5  # "an instruction every few cycles"
    assert 10 <= gb["warp_cycles_per_issued_instruction"] <= 14  # "against one every dozen"
    for words in ("at N = 768, 24 blocks for 132 SMs", "fills less than a tenth of one wave",
                  "about a seventh of its peak", "(384 at N = 768, Y = 32)", "about three times as busy",
                  "still far from DRAM's peak", "less than a tenth of the warps they could",
                  "an instruction every few cycles, against one every dozen in torch's tile"):
        assert words in PROSE, words
    assert len([line for line in C.chains_ncu().splitlines() if line.startswith("| `")]) == 2


def test_tags_the_module_does_not_know_are_left_to_others():
    assert C.expand("chains_probe", "x") is None and C.expand("chains_summary", "x") is None
    assert C.expand("fast_backward", "") is None and C.expand("chains_probe", "bf16") is not None


def test_the_readmes_backward_routes_paragraph_is_the_records():
    import json
    from reimpl.docsite import fast_tables as F
    readme = " ".join((ROOT / "README.md").read_text().split())
    gpu = json.loads((ROOT / "results/gpu_tests_chains_backward.json").read_text())
    assert f"{gpu['pytest'].split(',')[0]}, 0 of {gpu['totals']['elements_compared']:,} elements" in readme
    assert gpu["totals"]["mismatched_elements"] == 0 and gpu["pytest_exitstatus"] == 0
    assert all(r["result"][-1].endswith(("0 errors", "(0 errors, 0 warnings)")) for r in gpu["sanitizers"])
    assert gpu["counters"]["bwd_chains_kernel_cases"] > 0 and gpu["counters"]["bwd_fused_kernel_cases"] > 0
    s = C.summary(D)
    lo, hi = s["narrow_gain"]
    shapes = len({(r["M"], r["N"]) for r in D["rows"]})
    assert (f"Kernel times of every route on {shapes} shapes in fp32 and bf16 ({s['shapes']} cells with both ops,"
            in readme)
    assert f"the plan's route within {round(100 * (s['within'] - 1))}% of the fastest measured on every" in readme
    assert f"{1 / hi:.2f}-{1 / lo:.2f}× torch's time" in readme
    assert backward.MIN_ELEMENTS == backward.CHAINS_MIN_ELEMENTS == 1 << 22 and "at least 2^22 elements" in readme
    assert backward.MIN_ROW_BYTES == 8192 and "For rows of 8 KB up to 8192 elements" in readme
    assert 512 * max(backward.REGISTER_VECTORS) == 8192 and backward.TORCH_TILE_FLOAT_BYTES == 32768
    assert "float rows longer than 32 KB keep torch's tile" in readme
    b = F.backward_summary(F.load(F.FAST_BACKWARD))
    ln, rms = b["layer_norm"], b["rms_norm"]
    assert ln["no_slower_than_torch"] == ln["cells"] and rms["no_slower_than_torch"] == rms["cells"]
    assert f"no slower than torch on all {ln['cells'] + rms['cells']} cells of at least 32 MB" in readme
    lowest = min(ln["pct"][0], rms["pct"][0])
    assert f"at {lowest:.0f}% to {ln['pct'][1]:.0f}% (LayerNorm) and {rms['pct'][1]:.0f}% (RMSNorm) of copy" in readme
    assert f"faster on {ln['liger_faster']} LayerNorm and {rms['liger_faster']} RMSNorm cells" in readme
    faster = F.liger_faster_cells(F.load(F.FAST_BACKWARD))
    # "(rows of 8192, fp32 rows of 5120 and 6144, and rows longer than the fused route takes)"
    assert all(N == 8192 or N > 8192 or (dt == "fp32" and N in (5120, 6144)) for _, dt, _, N in faster)


def test_the_floor_sentence_holds():
    """"at 1024 × 1024 torch's tile measured faster than every ring, and at 2048 × 1024 the two were
    within a microsecond"."""
    cs = C.cells(D)
    rings = [f"chains_S{s}" for s in D["route"]["chain_stages"]]
    small = [c for (op, dt, M, N), c in cs.items() if (M, N) == (1024, 1024)]
    mid = [c for (op, dt, M, N), c in cs.items() if (M, N) == (2048, 1024)]
    assert len(small) == len(mid) == 4
    assert all(c["two_kernels"]["total_us"] < min(c[r]["total_us"] for r in rings) for c in small)
    assert all(abs(c["two_kernels"]["total_us"] - min(c[r]["total_us"] for r in rings)) < 1 for c in mid)
    assert backward.CHAINS_MIN_ELEMENTS == 1 << 22 == 2 * 2048 * 1024
    for words in ("at 1024 × 1024 torch's tile measured faster than every ring, and at 2048 × 1024 the two were "
                  "within a microsecond", "under six warps an SM", "less than half a wave"):
        assert words in PROSE, words
    chains = next(k for k in D["ncu"]["kernels"] if k["name"].startswith("fast_gamma_beta_chains"))
    assert chains["waves_per_sm"] < 0.5 and chains["kernel"].endswith(", 16, 4>")  # the deep ring, 16-byte copies
    assert 32 * 768 / 32 / D["route"]["sms"] < 6


def test_the_dx_row_order_paragraph_holds():
    """"It takes them from the last up ... finds those rows of x and dy still in L2": on the probe, every
    cell whose route runs the fast dX kernel took less time with the rows from the last up, and the
    fused cells (the control: that kernel does not run) moved by under 1%; every run gave torch's bits."""
    import json
    from reimpl.fast import grad_input
    d = C.load(C.ORDER_PROBE)
    assert grad_input.ROWS_FROM_LAST and all(r["bit_identical"] for r in d["rows"])
    order = C.row_order(d)
    dx = [last / first for route, first, last in order.values() if route != "fused"]
    control = [last / first for route, first, last in order.values() if route == "fused"]
    assert dx and control and max(dx) < 1 and all(abs(x - 1) < 0.01 for x in control)
    gpu = json.loads((ROOT / "results/gpu_tests_rows_from_last.json").read_text())
    assert gpu["totals"]["mismatched_elements"] == 0 and gpu["pytest_exitstatus"] == 0
    assert gpu["totals"]["elements_compared"] > 10**9
    assert "{% rows_from_last %}" in PAGE and "It takes them from the last up" in PROSE
    assert "The probe tables above were measured with the rows in order" in PROSE
    assert D.get("dx_rows_from_last", False) is False  # the chains probe ran with the rows in order
