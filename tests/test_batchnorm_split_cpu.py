"""CPU: the split BatchNorm (reimpl/ladder/batchnorm_split.py, cuda/batchnorm_split.cu). Every
instantiation compiles for sm_90 with no diagnostics, and every kernel of the file is a template of
the launcher with its page section; the plan folds every value of every channel exactly once
(slices of the NCHW walk; row slices and column tiles of channels-last input) on ResNet-50's
shapes and odd ones, aims at the stated waves, and keeps the rounding levels within the bound of
reimpl/ladder/accuracy.py on every checked shape; the launchers launch what the plan says on a
RecordingRuntime (two launches a direction, or one block per channel for short NCHW channels, or
one cooperative launch for columns input from RESIDENT_FROM_BYTES on; forward, backward, through
autograd, in x's memory format), hand the last-block merges and the resident barriers one array
each per device and stream, and refuse bad input before any launch."""
import math
from pathlib import Path
import re

import pytest
import torch

from reimpl.checks import siblings_errors as se
from reimpl.device import compile as compile_mod, runtime
from reimpl.ladder import accuracy, batchnorm, batchnorm_split as bs, registry

TEMPLATES = (bs.PARTIAL, bs.PARTIAL_CL, bs.FINALIZE, bs.APPLY, bs.BWD_PARTIALS, bs.BWD_PARTIALS_CL, bs.BWD_FINALIZE,
             bs.BWD_DX, bs.FWD_HELD, bs.BWD_HELD, bs.FWD_RESIDENT, bs.BWD_RESIDENT)
SRC = (bs.SOURCE.directory / bs.SOURCE.main).read_text()


def test_compiles_for_sm90_without_diagnostics():
    prog = compile_mod.build(bs.SOURCE, "sm_90")  # a cached build keeps its log (compile.build)
    assert prog.log == "", prog.log
    # per storage type and parameter type (1 for float32, 2 for 16-bit x): 4 partial kernels and 2
    # resident ones x 2 widths, 2 finalizes, and the held kernels at each (vec, words): scalars 1 to 16 words, each;
    # the forward's 16-byte words up to 64 values (float32: 1 to 16 words of 4; 16-bit: 1 to 8 of
    # 8), the backward's up to 16 (1 to 4; 1 or 2); per storage type 2 x 3 elementwise
    assert len(bs._instantiations()) == 5 * (6 * 2 + 2) + (2 * 5 + 5 + 3) + 4 * (2 * 5 + 4 + 2) + 3 * 6
    assert set(prog.lowered) == {k.expr for k in bs._instantiations()}


def test_every_kernel_is_launched_by_name_and_has_its_section():
    assert registry.BY_NAME["bn_split"].source == "reimpl/ladder/cuda/" + bs.SOURCE.main
    kernels = re.findall(r"__global__ void\s+(?:__\w+__\([^)]*\)\s+)*(\w+)\(", SRC)
    assert sorted(kernels) == sorted(t.name for t in TEMPLATES)
    for k in kernels + ["last_block"]:
        assert f"// --8<-- [start:{k}]" in SRC and f"// --8<-- [end:{k}]" in SRC, k
    # the four partial kernels' last blocks merge
    assert SRC.count("last_to_arrive(") == 5
    # the constants both sides use
    for name in ("COLUMN_THREADS", "CHUNK"):
        assert int(re.search(rf"constexpr unsigned {name} = (\d+);", SRC).group(1)) == getattr(bs, name)
    assert int(re.search(r"constexpr unsigned HELD_THREADS = (\d+);", SRC).group(1)) == bs.CHANNEL_THREADS


RESNET50 = ((64, 112, 112), (64, 56, 56), (256, 56, 56), (128, 56, 56), (128, 28, 28), (512, 28, 28), (256, 28, 28),
            (256, 14, 14), (1024, 14, 14), (512, 14, 14), (512, 7, 7), (2048, 7, 7))
ODD = ((8, 3, 17, 13), (64, 1, 9, 9), (16, 32, 1, 1), (4, 7, 33), (2, 5), (256, 100), (8 * 197, 768), (3, 5, 7, 11),
       (1, 3, 1, 2), (7, 1), (2, 1, 1, 1), (5, 130, 3, 3), (2, 4097), (1, 1, 4096, 4096), (3, 24, 5, 8), (2, 12, 2))
SHAPES = tuple((N, *s) for N in (1, 32, 256) for s in RESNET50) + ODD


def _covers_once(bounds, extent):
    """[start, end) pieces in order that cover 0 .. extent - 1 exactly once, none empty."""
    assert bounds[0][0] == 0 and bounds[-1][1] == extent
    assert all(a < b for a, b in bounds)
    assert all(b == a2 for (_, b), (a2, _) in zip(bounds, bounds[1:]))


def _check_nchw(p, N, C, HW, itemsize):
    count, target = N * HW, bs.WAVES * 132 * (bs.THREADS_PER_SM // bs.PARTIAL_THREADS)
    assert p.grid == (C, p.slices) and p.block == (bs.PARTIAL_THREADS,) and not p.columns
    bounds = bs.slice_bounds(count, p.per_slice)
    assert len(bounds) == p.slices
    _covers_once(bounds, count)
    # whole vectors: a slice starts on one, and a vector never crosses a sample's run of HW values
    assert p.vec in (1, 16 // itemsize) and p.per_slice % p.vec == 0 and HW % p.vec == 0
    assert p.slices == 1 or p.per_slice >= bs.MIN_VALUES
    # about WAVES waves of blocks: not past the target by more than one slice row, and at least half
    # of what the target, the channel's length and MAX_SLICES allow
    assert p.slices <= bs.MAX_SLICES and p.slices * C < target + C
    assert 2 * p.slices >= min(-(-target // C), count // bs.MIN_VALUES, bs.MAX_SLICES)


def _check_columns(p, R, C, itemsize):
    TX, TY = p.block
    assert p.columns and TX * TY == bs.COLUMN_THREADS and TX <= bs.COLUMN_TX and TX & (TX - 1) == 0
    assert p.vec in (1, 16 // itemsize) and C % p.vec == 0
    tiles = bs.column_tiles(p, C)
    assert p.grid == (len(tiles), p.slices) and all(tiles)
    _covers_once([c for t in tiles for c in t], C)  # every column in exactly one thread's vector
    bounds = bs.slice_bounds(R, p.per_slice)
    assert len(bounds) == p.slices
    _covers_once(bounds, R)
    assert p.slices == 1 or p.per_slice >= TY * bs.CHUNK
    assert p.slices <= bs.MAX_SLICES
    assert p.last_block == (min(TX * p.vec, C) * p.slices <= bs.LAST_BLOCK_STATES)


def _check_resident(p, R, C, itemsize, aligned, capacity):
    """A resident plan: columns_plan's tiles and slicing rules, the whole grid within `capacity`
    blocks, no last-block merge; None only where the tiles alone pass the capacity."""
    tiles = bs.columns_plan(R, C, itemsize, aligned).grid[0]  # the same tiles
    if p is None:
        assert tiles > capacity
        return
    assert p.grid[0] == tiles
    TX, TY = p.block
    assert p.columns and TX * TY == bs.COLUMN_THREADS and not p.last_block
    assert p.grid[0] * p.grid[1] <= capacity
    bounds = bs.slice_bounds(R, p.per_slice)
    assert len(bounds) == p.slices == p.grid[1]
    _covers_once(bounds, R)
    _covers_once([c for t in bs.column_tiles(p, C) for c in t], C)
    assert p.slices == 1 or p.per_slice >= TY * bs.CHUNK
    assert p.slices <= bs.MAX_SLICES
    # as many slices as the capacity, the rows and MAX_SLICES allow, less rounding
    most = min(capacity // p.grid[0], R // max(TY * bs.CHUNK, -(-bs.STATE_SHARE * bs.STATE_BYTES // itemsize)),
               bs.MAX_SLICES)
    assert p.slices <= max(1, most) and 2 * p.slices >= most


@pytest.mark.parametrize("itemsize", [4, 2])
@pytest.mark.parametrize("aligned", [True, False], ids=["aligned", "unaligned"])
def test_the_plan_folds_every_value_once(itemsize, aligned):
    """Each channel's values are cut into S slices covering the walk (NCHW) or the rows (columns)
    once, and each tile's threads own disjoint vectors covering the columns once; for every
    ResNet-50 BatchNorm input (batch 1, 32, 256) and odd shapes, both layouts."""
    for shape in SHAPES:
        N, C, HW = shape[0], shape[1], math.prod(shape[2:])
        if HW > 1:
            _check_nchw(bs.nchw_plan(N, C, HW, itemsize, aligned), N, C, HW, itemsize)
        _check_columns(bs.columns_plan(N * HW, C, itemsize, aligned), N * HW, C, itemsize)
        for capacity in (132 * 2, 132 * 4):
            _check_resident(bs.resident_plan(N * HW, C, itemsize, aligned, capacity), N * HW, C, itemsize, aligned,
                            capacity)
        for columns in (False, True):
            e = bs.elementwise_plan(N * C * HW, C, HW, columns, itemsize, aligned)
            assert e.vec == 1 or (aligned and (C if columns else HW) % e.vec == 0)
            assert e.cl == (columns and e.vec > 1) and e.hw == (1 if columns else HW)
            assert 1 <= e.grid[0] <= 132 * bs.THREADS_PER_SM // bs.ELEMENTWISE_THREADS


def test_slice_bounds_are_the_kernels_arithmetic():
    assert bs.slice_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert bs.slice_bounds(8, 4) == [(0, 4), (4, 8)]
    assert bs.slice_bounds(3, 5) == [(0, 3)]


def test_the_stem_fills_the_gpu():
    """The ResNet stem that leaves bn_kernel 64 blocks: about a wave of blocks (WAVES) in either layout."""
    p = bs.nchw_plan(32, 64, 112 * 112, 4, True)
    assert bs.WAVES == 1 and p.vec == 4 and p.grid == (64, 17)
    q = bs.columns_plan(32 * 112 * 112, 64, 4, True)
    assert q.vec == 4 and q.block == (8, 32) and q.grid[0] * q.grid[1] >= 1000


def test_rounding_levels_within_the_stated_bound_on_every_checked_shape():
    """accuracy.batchnorm_bound counts BN_LEVELS rounding levels per side (bn_kernel's k + log2 t);
    the split plan's values per thread, tree and last-block chain stay within it on every shape the
    GPU tests check, in every layout, width and alignment, and so do the one-block kernels'."""
    for shape in se.BN_SHAPES + se.BN_SPLIT_SHAPES:
        N, C, HW = shape[0], shape[1], math.prod(shape[2:])
        for itemsize in (4, 2):
            for aligned in (True, False):
                plans = [bs.columns_plan(N * HW, C, itemsize, aligned)]
                plans += [p for p in (bs.resident_plan(N * HW, C, itemsize, aligned, 132 * b) for b in (1, 2, 4))
                          if p is not None]
                if HW > 1:
                    plans.append(bs.nchw_plan(N, C, HW, itemsize, aligned))
                for p in plans:
                    assert p.levels <= accuracy.BN_LEVELS, (shape, p)
        if bs.one_block_per_channel(N, C, HW, HW == 1):
            assert bs.one_block_levels(N * HW) <= accuracy.BN_LEVELS, shape
    # the one-block kernels' worst case: at most ONE_BLOCK_VALUES values a channel
    assert bs.one_block_levels(bs.ONE_BLOCK_VALUES) == 16 + 9 <= accuracy.BN_LEVELS
    assert bs.one_block_levels(bs.HELD_FORWARD_VALUES) == 64 + 9 <= accuracy.BN_LEVELS  # the held forward's
    for dtype in accuracy.STORAGE_ULP:
        for what in accuracy.BN_WHAT:
            limit, why = accuracy.batchnorm_bound(dtype, what)
            assert 0 < limit < 2.0 ** -5 and why
    assert accuracy.batchnorm_bound("float32", "dx")[0] > accuracy.batchnorm_bound("float32", "y")[0]
    with pytest.raises(ValueError):
        accuracy.batchnorm_bound("float32", "dy")


def _launches(fn):
    with runtime.use(runtime.RecordingRuntime()) as rt:
        fn()
    return [(l.kernel, l.grid, l.block, l.shared) for l in rt.launches]


def test_forward_and_backward_launch_the_plan():
    """Two launches a direction: the partial kernel (its last blocks merge) and the elementwise pass."""
    x, w = torch.zeros(32, 64, 56, 56), torch.ones(64)
    got = _launches(lambda: bs.batch_norm_train_forward_split(x, w, w, w.clone(), w.clone()))
    assert got == [("bn_partial_stats<float, float, float, 4u>", (64, 6, 1), (256, 1, 1), 0),
                   ("bn_apply<float, float, false, 4u>", (1056, 1, 1), (256, 1, 1), 0)]
    got = _launches(lambda: bs.batch_norm_train_backward_split(x, x, w, torch.zeros(64), torch.ones(64)))
    assert got == [("bn_backward_partials<float, float, float, 4u>", (64, 6, 1), (256, 1, 1), 0),
                   ("bn_backward_dx<float, float, false, 4u>", (1056, 1, 1), (256, 1, 1), 0)]


@pytest.mark.parametrize("shape,fwd_held,bwd_held", [
    ((32, 256, 14, 14), True, True), ((8, 512, 7, 7), True, True), ((32, 2048, 7, 7), True, True),
    ((32, 1024, 14, 14), True, True),
    ((8, 256, 32, 32), True, True),      # ONE_BLOCK_VALUES values a channel: still one block
    ((9, 256, 32, 32), True, False),     # 1024 more: the forward, in 16-byte words, holds up to 32768
    ((32, 512, 28, 28), True, False),
    ((32, 512, 29, 29), False, False),   # runs of 841: no 16-byte words, so ONE_BLOCK_VALUES
    ((48, 256, 28, 28), False, False),   # past HELD_FORWARD_VALUES
    ((32, 120, 14, 14), True, True),     # a tenth of the SMs idle at most
    ((32, 110, 14, 14), False, False),   # a sixth idle
    ((6304, 768), False, False), ((32, 256, 1, 1), False, False),  # columns input: never
], ids=str)
def test_short_channels_take_one_block_each(shape, fwd_held, bwd_held):
    """NCHW with at most ONE_BLOCK_VALUES values a channel (the forward, where HW is a multiple of the
    16-byte word: HELD_FORWARD_VALUES) and C at least nine tenths of the SMs: bn_forward_held and
    bn_backward_held, one launch each, C blocks of 512 holding a channel each (16-byte words of 8
    halves where HW is a multiple of 8; the fewest words a thread, a power of two, that hold it);
    otherwise the split's two launches."""
    C, N, HW = shape[1], shape[0], math.prod(shape[2:])
    x, w = torch.zeros(shape, dtype=torch.float16), torch.ones(C)
    fwd = _launches(lambda: bs.batch_norm_train_forward_split(x, w, w, w.clone(), w.clone()))
    bwd = _launches(lambda: bs.batch_norm_train_backward_split(x, x, w, torch.zeros(C), torch.ones(C)))
    vec = 8 if HW % 8 == 0 else 1
    targs = f"<__half, float, float, {vec}u, {1 << max(0, math.ceil(math.log2(N * HW / (512 * vec))))}u>"
    fin = ["bn_finalize_stats"] if HW == 1 else []  # columns: the merge in a launch of its own
    cl = "_cl" if HW == 1 else ""
    if fwd_held:
        assert fwd == [("bn_forward_held" + targs, (C, 1, 1), (512, 1, 1), 0)]
    else:
        assert [g[0].split("<")[0] for g in fwd] == ["bn_partial_stats" + cl, *fin, "bn_apply"]
    resident_bwd = HW == 1 and math.prod(shape) * 2 >= bs.RESIDENT_FROM_BYTES["backward"][2]
    if bwd_held:
        assert bwd == [("bn_backward_held" + targs, (C, 1, 1), (512, 1, 1), 0)]
    elif resident_bwd:
        assert [g[0].split("<")[0] for g in bwd] == ["bn_backward_cl_resident"]
    else:
        assert [g[0].split("<")[0] for g in bwd] == [
            "bn_backward_partials" + cl, *(["bn_backward_finalize"] if fin else []), "bn_backward_dx"]


@pytest.mark.parametrize("states", [0, 16384], ids=lambda s: f"last_block_states={s}")
@pytest.mark.parametrize("shape,dtype", [
    ((32, 64, 112, 112), torch.float16),   # the stem: 64 columns x 512 slices in one tile
    ((32, 64, 56, 56), torch.float32),
    ((32, 128, 28, 28), torch.float16), ((32, 512, 28, 28), torch.float16),
    ((6304, 768), torch.float16),
], ids=str)
def test_wide_tiles_leave_the_merge_to_the_finalize(shape, dtype, states, monkeypatch):
    """Columns input whose tile holds more than LAST_BLOCK_STATES states (width x S) passes
    arrived = 0 to the partial kernel and launches the finalize (a warp per channel, C / 8 blocks)
    before the elementwise pass, forward and backward; the others merge in the last block. The
    default (0) always launches the finalize; 16384, the earlier setting, keeps the last-block path."""
    monkeypatch.setattr(bs, "LAST_BLOCK_STATES", states)
    monkeypatch.setattr(bs, "RESIDENT", False)  # the split's launches, at every size
    bs.columns_plan.cache_clear()
    C = shape[1]
    plan = bs.columns_plan(math.prod(shape) // C, C, dtype.itemsize, True)
    last_block = min(plan.block[0] * plan.vec, C) * plan.slices <= states
    assert last_block == plan.last_block and (states or not last_block)
    x = torch.zeros(shape, dtype=dtype)
    if x.dim() == 4:
        x = x.to(memory_format=torch.channels_last)
    w = torch.ones(C)
    with runtime.use(runtime.RecordingRuntime()) as rt:
        y, m, s = bs.batch_norm_train_forward_split(x, w, w)
        bs.batch_norm_train_backward_split(x, x, w, m, s)
    names = [k.template.name for k, _, _ in rt.calls]
    if last_block:
        assert names == ["bn_partial_stats_cl", "bn_apply", "bn_backward_partials_cl", "bn_backward_dx"]
        assert rt.calls[0][2][2] != 0 and rt.calls[2][2][6] != 0
    else:
        assert names == ["bn_partial_stats_cl", "bn_finalize_stats", "bn_apply",
                         "bn_backward_partials_cl", "bn_backward_finalize", "bn_backward_dx"]
        assert rt.calls[0][2][2] == 0 and rt.calls[3][2][6] == 0  # no counters
        S = rt.calls[0][1].grid[1]
        for i in (1, 4):
            assert rt.calls[i][1].grid[0] == -(-32 * C // bs.FINALIZE_THREADS)
            assert rt.calls[i][2][0] == rt.calls[i - 1][2][5 if i == 4 else 1]  # the partials it merges
            assert rt.calls[i][2][-5 if i == 1 else -3] == S
    bs.columns_plan.cache_clear()


def test_one_block_launch_arguments():
    """bn_forward_held gets bn_kernel's arguments (as batchnorm.py's launcher passes them);
    bn_backward_held dy, x, the saved statistics, the weight, dweight, dbias, dx and (N, C, HW)."""
    x, w, b = torch.zeros(8, 512, 7, 7), torch.ones(512), torch.zeros(512)
    rm, rv = torch.zeros(512), torch.ones(512)
    with runtime.use(runtime.RecordingRuntime()) as rt:
        y, m, s = bs.batch_norm_train_forward_split(x, w, b, rm, rv, 0.25, 1e-3)
        dx, dw, db = bs.batch_norm_train_backward_split(x, x, w, m, s)
    (_, _, fa), (_, _, ba) = rt.calls
    ptrs = lambda *ts: tuple(t.data_ptr() for t in ts)  # noqa: E731
    assert fa == ptrs(x, w, b, y, m, s, rm, rv) + (8, 512, 49, 0.25, 1e-3)
    assert ba == ptrs(x, x, m, s, w, dw, db, dx) + (8, 512, 49)


class _StreamRuntime(runtime.RecordingRuntime):
    """A RecordingRuntime whose current stream can be set."""
    stream = 0

    def getCurrentCUDAStream(self, device_index=None):
        return self.stream


def test_arrival_counters_per_device_and_stream(monkeypatch):
    """The last-block merges' counters: int32 zeros, one array per (device, stream), the same array
    for every launch on that stream (forward and backward, call after call: no memset per call),
    grown (zeros again) for a wider grid (columns tiles, with the last-block merge switched on)."""
    bs._ARRIVED.clear()
    monkeypatch.setattr(bs, "LAST_BLOCK_STATES", 1 << 40)
    monkeypatch.setattr(bs, "RESIDENT", False)
    bs.columns_plan.cache_clear()
    x, w = torch.zeros(32, 64, 56, 56), torch.ones(64)
    rt = _StreamRuntime()
    with runtime.use(rt):
        y, m, s = bs.batch_norm_train_forward_split(x, w, w)
        bs.batch_norm_train_backward_split(x, x, w, m, s)
        bs.batch_norm_train_forward_split(x, w, w)
        rt.stream = 7
        bs.batch_norm_train_forward_split(x, w, w)
    where = {"bn_partial_stats": 2, "bn_backward_partials": 6}  # the `arrived` argument
    arrived = [args[where[k.template.name]] for k, _, args in rt.calls if k.template.name in where]
    assert len(arrived) == 4 and len(set(arrived[:3])) == 1 and arrived[3] != arrived[0]
    assert set(bs._ARRIVED) == {("cpu", 0), ("cpu", 7)}
    buf = bs._ARRIVED[("cpu", 0)]
    assert buf.dtype == torch.int32 and buf.numel() >= 64 and not buf.any() and buf.data_ptr() == arrived[0]
    assert all(k.template.params[where[k.template.name]] == "ptr" for k, _, _ in rt.calls if k.template.name in where)
    # columns input: a counter per column tile
    plan = bs.columns_plan(2, 40000, 4, True)
    assert plan.grid[0] > bs._ARRIVED[("cpu", 7)].numel()
    with runtime.use(rt):
        bs.batch_norm_train_forward_split(torch.zeros(2, 40000), torch.ones(40000))
    grown = bs._ARRIVED[("cpu", 7)]
    assert grown.numel() >= plan.grid[0] and not grown.any() and rt.calls[-2][2][2] == grown.data_ptr()
    bs.columns_plan.cache_clear()


@pytest.mark.parametrize("shape,dtype,pdtype,channels_last,partial,apply", [
    ((8, 16, 10, 10), torch.bfloat16, torch.float32, True, "bn_partial_stats_cl<__nv_bfloat16, float, float, 8u>",
     "bn_apply<__nv_bfloat16, float, true, 8u>"),
    ((256, 100), torch.float16, torch.float16, False, "bn_partial_stats_cl<__half, float, __half, 1u>",
     "bn_apply<__half, float, false, 1u>"),
    ((16, 32, 1, 1), torch.float32, torch.float32, False, "bn_partial_stats_cl<float, float, float, 4u>",
     "bn_apply<float, float, true, 4u>"),
    ((128, 64, 7, 7), torch.bfloat16, torch.bfloat16, False,
     "bn_partial_stats<__nv_bfloat16, float, __nv_bfloat16, 1u>", "bn_apply<__nv_bfloat16, float, false, 1u>"),
], ids=["channels_last", "2d", "hw1", "hw49"])
def test_layouts_choose_their_kernels(shape, dtype, pdtype, channels_last, partial, apply):
    """Channels-last and HW = 1 input are read as columns; NCHW with HW odd one value at a time; y
    keeps x's memory format."""
    C = shape[1]
    x = torch.zeros(shape, dtype=dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    w = torch.ones(C, dtype=pdtype)
    out = {}
    got = _launches(lambda: out.setdefault("y", bs.batch_norm_train_forward_split(x, w, w)[0]))
    columns = "_cl" in partial  # their merge is a launch of its own (LAST_BLOCK_STATES = 0)
    finalize = [f"bn_finalize_stats<{partial.split('<')[1].rsplit(',', 1)[0]}>"] if columns else []
    assert [g[0] for g in got] == [partial, *finalize, apply]
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    assert out["y"].shape == x.shape and out["y"].dtype == dtype and out["y"].is_contiguous(memory_format=fmt)
    got = _launches(lambda: bs.batch_norm_train_backward_split(torch.zeros(shape, dtype=dtype), x, w,
                                                               torch.zeros(C), torch.ones(C)))
    if columns and bs.RESIDENT_FROM_BYTES["backward"][dtype.itemsize] == 0:  # float32: one launch at every size
        assert [g[0] for g in got] == [partial.replace("partial_stats_cl", "backward_cl_resident")]
        return
    assert [g[0] for g in got] == [partial.replace("partial_stats", "backward_partials"),
                                   *[f.replace("finalize_stats", "backward_finalize") for f in finalize],
                                   apply.replace("apply", "backward_dx")]


def test_autograd_records_the_split_backward():
    """With x, weight or bias requiring grad, the forward goes through the autograd Function and
    backward() launches the two backward kernels; a bias without a weight still gets sum(dy)."""
    x = torch.zeros(4, 8, 6, 6, requires_grad=True)
    w, b = torch.ones(8, requires_grad=True), torch.zeros(8, requires_grad=True)

    def step(weight):
        y = bs.batch_norm_train_forward_split(x, weight, b)[0]
        y.backward(torch.ones_like(y))
    got = _launches(lambda: step(w))
    assert [g[0].split("<")[0] for g in got] == ["bn_partial_stats", "bn_apply", "bn_backward_partials",
                                                 "bn_backward_dx"]
    assert x.grad.shape == x.shape and w.grad.shape == b.grad.shape == (8,)
    b.grad = None
    _launches(lambda: step(None))
    assert torch.equal(b.grad, torch.full((8,), 4.0 * 36))
    with torch.no_grad():  # no graph: the launcher alone
        assert len(_launches(lambda: bs.batch_norm_train_forward_split(x, w, b))) == 2


def test_modules_choose_the_kernel_by_name():
    """kernel=True is the split entry, "bn_kernel" the first kernel; anything else is refused; on the
    CPU the modules compute with torch ops (no launch)."""
    assert batchnorm._kernel_entry(True).name == "bn_split"
    assert batchnorm._kernel_entry("bn_kernel").name == "bn_kernel"
    assert batchnorm._kernel_entry(False) is None
    for bad in ("three_pass", "bn_nope"):
        with pytest.raises(ValueError, match="kernel must be"):
            batchnorm.batch_norm(torch.zeros(4, 3), None, None, training=True, kernel=bad)
    m = batchnorm.BatchNorm2d(3, kernel=True)
    assert _launches(lambda: m(torch.randn(4, 3, 5, 5))) == []


def test_empty_batch_launches_nothing():
    x = torch.zeros(0, 3, 4, 4)
    out = {}
    assert _launches(lambda: out.setdefault("r", bs.batch_norm_train_forward_split(x))) == []
    assert out["r"][0].shape == x.shape and out["r"][1].shape == (3,)


def test_bad_input_is_refused_before_any_launch():
    x, w = torch.zeros(4, 3, 2, 2), torch.ones(3)
    fwd = bs.batch_norm_train_forward_split
    bwd = bs.batch_norm_train_backward_split
    m, s = torch.zeros(3), torch.ones(3)
    cases = [
        (lambda: fwd(x.double()), TypeError, "batch_norm_train_forward_split: x must be float32"),
        (lambda: fwd(torch.zeros(5)), ValueError, "x must have at least 2 dims"),
        (lambda: fwd(x, torch.ones(4)), ValueError, "weight must be"),
        (lambda: fwd(x, None, None, torch.zeros(3)), ValueError, "both running_mean and running_var"),
        (lambda: fwd(x, torch.ones(3, dtype=torch.float16)), TypeError, "parameters must be"),
        (lambda: fwd(x, w, torch.ones(3, dtype=torch.float64)), ValueError, "bias must be a contiguous torch.float32"),
        (lambda: fwd(torch.zeros(1, 3)), ValueError,
         r"Expected more than 1 value per channel when training, got input size torch.Size\(\[1, 3\]\)"),
        (lambda: bwd(x, x.double(), w, m, s), TypeError, "batch_norm_train_backward_split: x must be float32"),
        (lambda: bwd(x[:2], x, w, m, s), ValueError, "dy must be a torch.float32 tensor of x's shape"),
        (lambda: bwd(x.half(), x, w, m, s), ValueError, "dy must be"),
        (lambda: bwd(x, x, torch.ones(3, dtype=torch.float16), m, s), TypeError, "parameters must be"),
        (lambda: bwd(x, x, w, m.half(), s), ValueError, "save_mean must be a contiguous float32 vector of 3"),
        (lambda: bwd(x, x, w, m, torch.ones(4)), ValueError, "save_invstd must be"),
        (lambda: bwd(x, x, w, m, torch.ones(6)[::2]), ValueError, "save_invstd must be"),
    ]
    for fn, exc, msg in cases:
        def call(fn=fn, exc=exc, msg=msg):
            with pytest.raises(exc, match=msg):
                fn()
        assert _launches(call) == []


def test_plan_constants_match_the_committed_probe():
    """results/bn_plans.json (scripts/gpu/bn_probe.py) timed the current constants ("default")
    beside the earlier ones and each changed alone: the current ones are the faster over the grid
    (geometric mean of forward times at most 0.9 of the earlier), and on every channels-last shape
    the finalize launch (LAST_BLOCK_STATES = 0) is within 1% of the last-block merge or faster."""
    import json
    from pathlib import Path
    probe = json.loads((Path(__file__).resolve().parents[1] / "results" / "bn_plans.json").read_text())
    assert {k: probe["defaults"][k] for k in ("MIN_VALUES", "WAVES", "MAX_SLICES", "LAST_BLOCK_STATES")} == {
        "MIN_VALUES": bs.MIN_VALUES, "WAVES": bs.WAVES, "MAX_SLICES": bs.MAX_SLICES,
        "LAST_BLOCK_STATES": bs.LAST_BLOCK_STATES}
    cells: dict = {}
    for r in probe["rows"]:
        cells.setdefault((r["dtype"], tuple(r["shape"]), r["layout"]), {})[r["setting"]] = r["forward_us"]
    assert len(cells) == 38
    ratios = [c["default"] / c["earlier"] for c in cells.values()]
    assert math.exp(sum(map(math.log, ratios)) / len(ratios)) <= 0.9
    for key, c in cells.items():
        if key[2] == "channels_last":
            assert c["default"] <= 1.01 * c["last_block_16384"], key
    page = " ".join((Path(__file__).resolve().parents[1] / "docs" / "ladder" / "batchnorm.md").read_text().split())
    assert f"folds at least {bs.MIN_VALUES} values" in page and f"at most {bs.MAX_SLICES} share a channel" in page
    assert bs.WAVES == 1 and "about one wave" in page and "within 1% of it or faster" in page


@pytest.mark.parametrize("shape,dtype,forward,backward", [
    ((32, 64, 112, 112), torch.float16, True, True),    # 51 MB
    ((32, 64, 56, 56), torch.float32, True, True),      # 25.7 MB
    ((32, 64, 56, 56), torch.float16, False, True),     # 12.8 MB: the forward's split is the faster
    ((6304, 768), torch.float32, True, True),           # 2-D input is columns too
    ((32, 512, 7, 7), torch.float32, False, True),      # 3.2 MB: the backward at every size
    ((32, 512, 7, 7), torch.float16, False, True),
    ((2, 2_000_000), torch.float32, False, False),      # 62500 tiles: more than stay resident
], ids=str)
def test_columns_input_takes_one_resident_launch_from_its_size(shape, dtype, forward, backward):
    """Channels-last (or 2-D) x of at least RESIDENT_FROM_BYTES per direction: one cooperative launch
    of the resident kernel, its grid the resident plan for the device's resident blocks (here the
    RecordingRuntime's RESIDENT_BLOCKS an SM), the tile barriers from their own per-stream array; the
    split's launches otherwise."""
    C = shape[1]
    x = torch.zeros(shape, dtype=dtype)
    if x.dim() == 4:
        x = x.to(memory_format=torch.channels_last)
    w = torch.ones(C)
    bs._BARRIERS.clear()
    with runtime.use(runtime.RecordingRuntime()) as rt:
        y, m, s = bs.batch_norm_train_forward_split(x, w, w, w.clone(), w.clone())
        n = len(rt.calls)
        bs.batch_norm_train_backward_split(x, x, w, m, s)
    R = math.prod(shape) // C
    plan = bs.resident_plan(R, C, dtype.itemsize, True, 132 * bs.RESIDENT_BLOCKS)
    for calls, resident, kind in ((rt.calls[:n], forward, "forward"), (rt.calls[n:], backward, "backward")):
        names = [k.template.name for k, _, _ in calls]
        if not resident:
            assert "resident" not in " ".join(names)
            continue
        assert names == [f"bn_{kind}_cl_resident"] and plan is not None
        (kernel, launch, args), = calls
        assert launch.grid == (*plan.grid, 1) and launch.block == (*plan.block, 1) and launch.shared == 0
        bar = bs._BARRIERS[("cpu", 0)]
        assert args[3 if kind == "forward" else 7] == bar.data_ptr() and bar.numel() >= 2 * plan.grid[0]
        assert args[-3 if kind == "forward" else -1] == plan.per_slice
    assert set(bs._BARRIERS) == ({("cpu", 0)} if forward or backward else set())


def test_resident_launch_arguments():
    """bn_forward_cl_resident: x, y, the partial states, the barriers, weight, bias, save_mean,
    save_invstd, the coefficients (3 C floats before the states, in one workspace), the running
    statistics, (R, C, per_slice, momentum, eps); bn_backward_cl_resident: dy, x, dx, the saved
    statistics, weight, the partial sums, the barriers, dweight, dbias, (R, C, per_slice)."""
    x = torch.zeros(32, 64, 56, 56).to(memory_format=torch.channels_last)
    w, b, rm, rv = torch.ones(64), torch.zeros(64), torch.zeros(64), torch.ones(64)
    with runtime.use(runtime.RecordingRuntime()) as rt:
        y, m, s = bs.batch_norm_train_forward_split(x, w, b, rm, rv, 0.25, 1e-3)
        dx, dw, db = bs.batch_norm_train_backward_split(x, x, w, m, s)
    (_, fl, fa), (_, bl, ba) = rt.calls
    R, S = 32 * 56 * 56, fl.grid[1]
    ptr = lambda t: t.data_ptr()  # noqa: E731
    assert fa[:2] == (ptr(x), ptr(y)) and fa[2] == fa[8] + 4 * 3 * 64
    assert fa[4:8] == (ptr(w), ptr(b), ptr(m), ptr(s)) and fa[9:] == (ptr(rm), ptr(rv), R, 64, -(-R // S), 0.25, 1e-3)
    assert ba[:6] == (ptr(x), ptr(x), ptr(dx), ptr(m), ptr(s), ptr(w)) and ba[8:] == (ptr(dw), ptr(db), R, 64,
                                                                                      -(-R // bl.grid[1]))
    assert fa[3] == ba[7]  # the stream's barriers


def test_the_size_rule_against_the_committed_probe():
    """RESIDENT_FROM_BYTES, read off results/bn_resident.json: on every channels-last cell measured
    there, each dtype and direction, the route the rule takes is within 10% of the faster of the two
    (the page states the measured figure, bn_routes.route_rule), and no other threshold from the
    same ladder of sizes has a smaller worst ratio; the forward takes both routes, the backward one
    launch everywhere."""
    from reimpl.docsite import bn_routes
    d = bn_routes.load()
    cells = bn_routes.cells(d)
    assert len(cells) == 30 and all(set(c) == set(bn_routes.ROUTES) for c in cells.values())
    assert bn_routes.rule_cost(d) <= 1.10
    assert {bn_routes.chosen(dt, sh, "forward") for dt, sh in cells} == set(bn_routes.ROUTES)
    assert {bn_routes.chosen(dt, sh, "backward") for dt, sh in cells} == {"resident_always"}
    # the page: "One launch does not win everywhere: on some inputs the three launches are the faster"
    page = " ".join((Path(__file__).resolve().parents[1] / "docs/ladder/batchnorm.md").read_text().split())
    assert "One launch does not win everywhere: on some inputs the three launches are the faster" in page
    assert any(c["split_columns"][w] < c["resident_always"][w] for c in cells.values() for w in ("forward", "backward"))
    for w in ("forward", "backward"):
        for size in (4, 2):
            mine = [c for c in cells.items() if bn_routes.ITEMSIZE[c[0][0]] == size]

            def worst(th):
                return max(c[("resident_always" if math.prod(sh) * size >= th else "split_columns")][w]
                           / min(c[r][w] for r in bn_routes.ROUTES) for (_, sh), c in mine)
            ours = worst(bs.RESIDENT_FROM_BYTES[w][size])
            assert all(ours <= worst(mb << 20) + 1e-9 for mb in (0, 2, 4, 8, 12, 16, 24, 32, 1 << 20))


def test_route_tables_and_reads_render_the_committed_data():
    """{% bn_routes DTYPE %}: a row per channels-last cell of that dtype, both routes' times, the taken
    one in bold; {% bn_resident_reads %}: per profiled resident forward, DRAM MB read against x's MB
    and the share of the second read that the L2 served, computed here from the JSON's fields."""
    import json
    from reimpl.docsite import bn_routes
    d = bn_routes.load()
    for dtype in ("fp32", "bf16", "fp16"):
        table = bn_routes.routes(d, dtype)
        rows = [l for l in table.splitlines() if l.startswith("| ") and "x (MiB)" not in l]
        cells = {sh: c for (dt, sh), c in bn_routes.cells(d).items() if dt == dtype}
        assert len(rows) == len(cells) == 10
        for line, (shape, c) in zip(rows, cells.items()):
            assert line.startswith("| " + " x ".join(map(str, shape)) + " |")
            for w in ("forward", "backward"):
                take = bn_routes.chosen(dtype, shape, w)
                assert f"**{c[take][w]:.1f}**" in line
    ncu = json.loads((bn_routes.RESULTS / "ncu_siblings.json").read_text())
    text = bn_routes.resident_reads(ncu)
    cases = [c for c in ncu["cases"] if c["launched"] == bn_routes.RESIDENT_KERNEL]
    assert cases and text.count("\n- ") + 1 == len(cases)
    for c in cases:
        x_mb = math.prod(c["shape"]) * bn_routes.ITEMSIZE[c["dtype"]] / 1e6
        assert x_mb < c["dram_read_mb"] < 2 * x_mb  # one full read, and part of the second
        assert f"{c['dram_read_mb']:.0f} MB read from DRAM for {x_mb:.0f} MB of x" in text
        assert f"served {100 * (2 * x_mb - c['dram_read_mb']) / x_mb:.0f}%" in text
    assert "Not profiled" in bn_routes.resident_reads(None)
