"""CPU: the fast kernels compile for sm_90 with torch's numerics and no warnings (including the
mirror's sources they reuse), without spilling registers; and their launch plan: groups of lanes,
several rows a warp, up to N = 128, one warp per row up to N = 2048, then one (32, 4) block per row,
holding its share in registers or streaming it through shared memory (`streams`)."""
import itertools

import pytest

from reimpl.mirror import kernel_table as K
from reimpl.device import compile as compile_mod
from reimpl.fast import forward as F


def test_fast_kernel_compiles_for_sm90_without_warnings():
    prog = compile_mod.build(F.SOURCE, "sm_90")  # a cached build keeps its log (compile.build)
    assert prog.log == "", prog.log
    # 15 (dtype, LayerNorm/RMSNorm, affine) combinations x (a stream kernel, register kernels R = 8, 16,
    # and 32 for the 6 of 16-bit LayerNorm, group kernels G = 1 (full) and 2, 4, 8, 16, 32 (either)),
    # and warp kernels (RW, rows, full): fp32 (1|2, 1, either), (4, 1, general); 16-bit (1|2, 2,
    # either), (2, 4, full), (4, 1, general); lane kernels of 8, 16 and 32 chunks
    assert len(prog.lowered) == len(F._instantiations()) == len(set(F._instantiations())) == \
        15 * (1 + 2 + 11 + 3) + 6 + 5 * 5 + 10 * 6
    assert "-ftz=false" in compile_mod.compile_options(F.SOURCE, "sm_90")
    assert f"-I{K.SOURCE.directory}" in compile_mod.compile_options(F.SOURCE, "sm_90")


@pytest.mark.parametrize("N,template,targs_tail,grid,block", [
    (4, "fast_layer_norm_group_kernel", (1, 4, True, 8), (1,), (32, 4)),     # 1024 rows a block
    (12, "fast_layer_norm_group_kernel", (4, 4, False, 8), (4,), (32, 4)),  # 3 vectors: groups of 4 lanes
    (56, "fast_layer_norm_group_kernel", (16, 4, False, 8), (16,), (32, 4)),  # 7 chunks: not whole lines
    (64, "fast_layer_norm_group_kernel", (16, 4, True, 8), (16,), (32, 4)),  # 1000 rows: few for the lane kernel
    (100, "fast_layer_norm_group_kernel", (32, 4, False, 8), (32,), (32, 4)),
    (128, "fast_layer_norm_group_kernel", (32, 4, True, 8), (32,), (32, 4)),
    (256, "fast_layer_norm_warp_kernel", (1, 4, 2, False), (125,), (32, 4)),
    (132, "fast_layer_norm_warp_kernel", (1, 4, 2, False), (125,), (32, 4)),
    (512, "fast_layer_norm_warp_kernel", (1, 4, 2, True), (125,), (32, 4)),
    (516, "fast_layer_norm_warp_kernel", (2, 4, 2, False), (125,), (32, 4)),
    (768, "fast_layer_norm_warp_kernel", (2, 4, 2, False), (125,), (32, 4)),
    (1024, "fast_layer_norm_warp_kernel", (2, 4, 2, True), (125,), (32, 4)),
    (1028, "fast_layer_norm_warp_kernel", (4, 4, 1, False), (250,), (32, 4)),
    (2044, "fast_layer_norm_warp_kernel", (4, 4, 1, False), (250,), (32, 4)),
    (2048, "fast_layer_norm_warp_kernel", (4, 4, 1, False), (250,), (32, 4)),
    (2052, "fast_layer_norm_kernel", (8,), (1000,), (32, 4)),
    (8192, "fast_layer_norm_kernel", (16,), (1000,), (32, 4)),
    (8196, "fast_layer_norm_stream_kernel", (16,), (1000,), (32, 4)),  # 1000 rows: few for 132 SMs
    (16384, "fast_layer_norm_stream_kernel", (16,), (1000,), (32, 4)),
    (16388, "fast_layer_norm_stream_kernel", (16,), (1000,), (32, 4)),
])
def test_plan(N, template, targs_tail, grid, block):
    kernel, g, b, shared = F.plan(K.BFloat16, False, True, True, 1000, N, 132)
    assert kernel.template.name == template and kernel.targs[-len(targs_tail):] == targs_tail
    assert (g, b) == (grid, block)
    assert kernel in F._instantiations()
    assert (shared > 0) == (template == "fast_layer_norm_stream_kernel")


@pytest.mark.parametrize("T,N,lane", [
    (K.float_, 32, True), (K.float_, 128, True), (K.float_, 256, False),  # 64 chunks: the warp kernel
    (K.BFloat16, 256, True), (K.Half, 512, False), (K.Half, 192, False),  # 24 chunks: not a power of two
    (K.BFloat16, 32, False), (K.float_, 28, False), (K.float_, 132, False),
])
def test_plan_lanes(T, N, lane):
    """The lane kernel takes rows of 8, 16 or 32 chunks of 16 bytes, and only where every pointer is
    16-byte aligned (it copies 16-byte chunks); torch's vectorized kernel asks 4 elements' alignment."""
    M = F.LANE_ROWS_PER_SM[1] * 132
    kernel, grid, _, shared = F.plan(T, False, True, True, M, N, 132)
    assert (kernel.template is F.LANE_TEMPLATE) == lane
    if lane:
        assert grid == (-(-M // (32 * F.LANE_WARPS * F.LANE_SETS)),) and shared == F.lane_shared(T, N)
        assert F.plan(T, False, True, True, M, N, 132, aligned16=False)[0].template is not F.LANE_TEMPLATE
        few = F.LANE_ROWS_PER_SM[0] * 132
        assert F.plan(T, False, True, True, few - 1, N, 132)[0].template is not F.LANE_TEMPLATE  # too few rows


@pytest.mark.parametrize("T,rms,N,rows_per_sm", [
    (K.BFloat16, False, 256, 128),   # 16-bit LayerNorm: from 128 rows per SM, whatever the row
    (K.Half, True, 128, 128),        # rows of up to 16 chunks: from 128
    (K.float_, False, 64, 128),
    (K.BFloat16, True, 256, 1024),   # 32 chunks in RMSNorm or fp32: from 1024
    (K.float_, False, 128, 1024),
    (K.float_, True, 128, 1024),
])
def test_plan_lanes_rows_per_sm(T, rms, N, rows_per_sm):
    for sms in (132, 78):
        lane = [F.plan(T, rms, True, not rms, M, N, sms)[0].template is F.LANE_TEMPLATE
                for M in (rows_per_sm * sms - 1, rows_per_sm * sms)]
        assert lane == [False, True]


@pytest.mark.parametrize("T,rms,M,N,stream", [
    (K.BFloat16, False, 3168, 16384, True),    # 24 rows per SM on 132 SMs: the stream kernel
    (K.BFloat16, False, 3169, 16384, False),   # more: 16-bit LayerNorm keeps its registers
    (K.Half, False, 8192, 12288, False),
    (K.BFloat16, False, 8192, 16388, True),    # past 32 vectors a thread, whatever M
    (K.BFloat16, True, 8192, 16384, True),     # RMSNorm streams from 17 vectors a thread
    (K.float_, False, 8192, 16384, True),      # and so does fp32
    (K.float_, False, 8192, 8192, False),      # up to 16 vectors a thread: registers
    (K.BFloat16, True, 100000, 8192, False),
])
def test_plan_streams(T, rms, M, N, stream):
    kernel, *_ = F.plan(T, rms, True, not rms, M, N, 132)
    assert (kernel.template is F.STREAM_TEMPLATE) == stream == F.streams(T, rms, M, N, 132)
    assert kernel in F._instantiations()


@pytest.mark.parametrize("T,N,shared", [
    (K.BFloat16, 65536, 112 * 1024),   # 128 vectors a thread; 112 KB a block leaves room for two per SM
    (K.float_, 65536, 56 * 2048),      # 16-byte vectors: 56 of the 128
    (K.BFloat16, 32768, 64 * 1024),    # the whole row
    (K.float_, 16384, 64 * 1024),
    (K.Half, 16388, 33 * 1024),        # 33 vectors for thread 0, 32 for the others: room for 33
])
def test_stash_holds_what_two_blocks_per_sm_leave(T, N, shared):
    assert F.stash_bytes(T, N) == shared
    # two blocks, each with its stash, the driver's reserve and 24 static bytes, fit the SM's 228 KB
    assert 2 * (shared + F.RESERVED_PER_BLOCK + 32) <= F.SHARED_PER_SM
    assert F.stash_bytes(T, N, shared_per_sm=0) == 0  # a device without the room: no stash, still correct


@pytest.mark.parametrize("T,rows,grid", [(K.float_, 1, (250,)), (K.Half, 2, (125,)), (K.BFloat16, 2, (125,))])
def test_plan_rows_per_warp(T, rows, grid):
    # 16-bit rows up to 1024 elements go two to a warp (the weights are loaded and converted once for
    # both); fp32 rows and longer 16-bit rows one
    kernel, g, _, _ = F.plan(T, True, True, False, 999, 1020, 132)
    assert kernel.targs[-2] == rows and g == grid and kernel in F._instantiations()


@pytest.mark.parametrize("T,N,M,sms,rows,full,grid", [
    (K.BFloat16, 1024, 2111, 132, 2, True, (264,)),   # under one block of four-row warps per SM
    (K.BFloat16, 1024, 2112, 132, 4, True, (132,)),
    (K.BFloat16, 1024, 4096, 132, 4, True, (256,)),   # the benchmark's single-wave shape
    (K.Half, 1024, 6336, 132, 4, True, (396,)),
    (K.BFloat16, 1024, 6337, 132, 2, True, (793,)),   # past 48 rows per SM: other blocks fill the gap
    (K.BFloat16, 1024, 4096, 300, 2, True, (512,)),   # the rule scales with the SM count
    (K.BFloat16, 1020, 4096, 132, 2, False, (512,)),  # not full: two rows a warp whatever M
    (K.BFloat16, 512, 4096, 132, 2, True, (512,)),
    (K.float_, 1024, 4096, 132, 1, True, (1024,)),
    (K.BFloat16, 2048, 4096, 132, 1, False, (1024,)),  # full measured slower at RW = 4
])
def test_plan_rows_and_full(T, N, M, sms, rows, full, grid):
    kernel, g, _, _ = F.plan(T, False, True, True, M, N, sms)
    assert kernel.targs[-2:] == (rows, full) and g == grid


def test_every_plan_is_instantiated():
    """Whatever M, N and SM count, the plan names a kernel the source instantiates."""
    for T, N, M, sms in itertools.product((K.float_, K.Half, K.BFloat16), (4, 8, 64, 124, 128, 132, 508, 512, 516,
                                                                           1020, 1024, 1028, 2048,
                                                                           2052, 8196, 12288, 16384, 16388,
                                                                           65536),
                                          (1, 7, 2112, 4096, 65536), (1, 66, 132, 144)):
        for rms, g, b in ((False, True, True), (False, True, False), (False, False, False), (True, True, False),
                          (True, False, False)):
            assert F.plan(T, rms, g, b, M, N, sms)[0] in F._instantiations(), (T, N, M, sms, rms, g, b)


def test_every_thread_fills_more_than_half_its_slots():
    """The kernels skip bounds checks on the first half of a thread's slots (RW / 2 or R / 2):
    that is only right if the plan's RW or R, for every N that keeps the row in registers, holds a
    thread's share and is less than twice it."""
    for N, T, M in itertools.product(range(4, 16388, 4), (K.float_, K.BFloat16), (1, 10 ** 6)):
        kernel, *_ = F.plan(T, False, True, True, M, N, 132)
        if kernel.template in (F.GROUP_TEMPLATE, F.STREAM_TEMPLATE, F.LANE_TEMPLATE):  # each vector's presence checked
            continue
        slots = kernel.targs[-4] if kernel.template is F.WARP_TEMPLATE else kernel.targs[-1]
        share = -(-(N // 4) // F.THREADS)
        assert share <= slots < 2 * share or slots == 1, (N, slots, share)


def test_registers_without_spills():
    """Every instantiation fits its registers without a stack frame; the row-holding kernels stay
    within what their __launch_bounds__ minimum-blocks figure allows (16-bit R = 32: 5 blocks/SM)."""
    from reimpl.upstream.releases import resource_usage
    prog = compile_mod.build(F.SOURCE, "sm_90")
    found = [(name, reg, stack, local) for name, reg, stack, _, local in resource_usage(prog.cubin)]
    assert len(found) == len(set(F._instantiations())) == 15 * (1 + 2 + 11 + 3) + 6 + 5 * 5 + 10 * 6
    for name, reg, stack, local in found:
        assert stack == "0" and local == "0", (name, reg, stack)
    regs = {n: int(r) for n, r, _, _ in found}
    r32 = [r for n, r in regs.items() if "fast_layer_norm_kernelIN3c10" in n and "Lj32E" in n]
    assert len(r32) == 6 and max(r32) <= 65536 // (5 * 128)  # 5 blocks of 128 threads in 65536 registers


def test_the_page_counts_the_instantiations():
    from pathlib import Path
    page = (Path(__file__).resolve().parents[1] / "docs/ladder/fast.md").read_text()
    assert f"compiles all {len(F._instantiations())} instantiations for sm_90" in page


def test_group_kernel_skips_only_merges_that_keep_the_value():
    """merge_empty stands for torch's merge of a state with an empty one only where the state's
    count c has c * (1.f / c) == 1 in float (then nA is 0 and nB is 1 exactly): the counts it meets
    are 4 (a lane's own vector, at the rounds of offset >= G) and N (the shared-memory rounds), for
    every N the group kernel takes. The group covers the row: G holds N / 4 vectors, and only
    torch's first warp has any."""
    import numpy as np
    one = np.float32(1)
    for N in range(4, 132, 4):
        G = F.group_lanes(N)
        assert G is not None and N // 4 <= G <= 32 and (G == 1 or G < 2 * (N // 4))
        for c in (4, N):
            assert np.float32(c) * (one / np.float32(c)) == one, c
    assert F.group_lanes(132) is None


def test_bias_without_weight_stays_with_the_mirror():
    assert not F.takes(has_gamma=False, has_beta=True, rms=False)
    assert F.takes(True, True, False) and F.takes(True, False, False) and F.takes(False, False, False)
    assert F.takes(True, False, True) and F.takes(False, False, True)


def test_rows_sweep_matches_the_rule():
    """The committed sweep behind rows_per_warp's four-row band records what the plan chose for each
    M; if the rule changes, the measurement (and the page's bold cells) must be redone."""
    import json
    from pathlib import Path
    from reimpl.docsite import fast_tables
    d = json.loads((Path(__file__).resolve().parents[1] / "results" / "fast_rows_sweep.json").read_text())
    checked = 0
    for r in d["rows"]:
        T = {"bf16": K.BFloat16, "fp16": K.Half}[r["dtype"]]
        assert r["plan_rows"] == F.rows_per_warp(T, 2, True, r["M"], d["sms"]), r
        checked += 1
    assert checked >= 2 * 13 * 5
    table = fast_tables.fast_rows_sweep()
    line = next(row for row in table.splitlines() if row.startswith("| bf16, 4096 |"))
    cells = [c.strip() for c in line.strip("|").split("|")][2:]  # LN 2, LN 4, RMS 2, RMS 4
    assert [c.startswith("**") for c in cells] == [False, True, False, True], line


def test_speed_tables_hold_both_timing_methods():
    """The forward's and dX's committed benchmarks hold every shape, kernel and dtype under both
    timing methods, and the page's directives pick them by name (an unknown method is an error)."""
    from reimpl.checks.bench import FAST_SHAPES, METHODS, cells
    from reimpl.docsite import fast_tables as L
    for path in (L.FAST, L.FAST_GRAD):
        d = L.load(path)
        assert set(d["methods"]) == set(METHODS)
        # the copy's rows in the order the scripts time them: the grid the scripts run is the one recorded
        assert [(r["method"], r["dtype"], r["M"], r["N"]) for r in d["rows"] if r["kernel"] == "copy"] == \
            [(m, dn, M, N) for m, dn, _, M, N in cells(FAST_SHAPES)]
        for method in METHODS:
            for dtype in ("fp32", "bf16"):
                rows, words = L._method_rows(d, f"{dtype} {method}")
                assert words == METHODS[method]
                assert len({(r["M"], r["N"]) for r in rows}) == 5 and len(rows) == 25, (path.name, method, dtype)
                assert {r["kernel"] for r in rows if r["kernel"] != "copy"} <= set(L.ORDER)
        assert L._method_rows(d, "fp32")[0] == L._method_rows(d, "fp32 pipelined")[0]
        with pytest.raises(ValueError, match="unknown timing method"):
            L._method_rows(d, "fp32 warm")


def test_ncu_results_cover_every_shape():
    """results/ncu_fast_{forward,grad}.json profile torch's kernel and ours on the ten benchmark
    shapes; the l2 pass profiles a copy, torch's dX and ours on four."""
    from reimpl.docsite import fast_tables as L
    for what, kernels, n in (("forward", {"torch", "reimpl.fast"}, 10), ("grad", {"torch", "reimpl.fast"}, 10),
                             ("l2", {"copy", "torch", "reimpl.fast"}, 4)):
        d = L.load(L.NCU[what])
        assert d["command"] == f"PASS={what} OUT=dir bash scripts/gpu/ncu_fast.sh"
        shapes = {(c["dtype"], c["M"], c["N"]) for c in d["cases"]}
        assert len(shapes) == n and len(d["cases"]) == n * len(kernels), what
        assert {c["kernel"] for c in d["cases"]} == kernels
        assert "| reimpl.fast |" in L.ncu(what)


def test_lane_kernel_with_two_sets_compiles():
    """The lane kernel's SETS = 2 (the probe's knob; the plan takes SETS = 1) compiles without a
    warning or a spill, for each element type, both ops and the largest rows the plan gives it."""
    from reimpl.upstream.releases import resource_usage
    kernels = [F.LANE_TEMPLATE[(T, K.float_, rms, True, not rms, 4 * 32 // K.sizeof(T), 2, 2)]
               for T in (K.float_, K.BFloat16, K.Half) for rms in (False, True)]
    prog = compile_mod.build(F.SOURCE, "sm_90", kernels)  # a cached build keeps its log (compile.build)
    assert prog.log == "", prog.log
    found = resource_usage(prog.cubin)
    assert len(found) == len(kernels) and all(stack == "0" and local == "0" for _, _, stack, _, local in found)
