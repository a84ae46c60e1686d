"""GPU: LayerNorm's siblings against torch. Every softmax kernel of ours stays within its stated
distance to torch.softmax (reimpl/ladder/accuracy.py) on every family, dtype and shape of
reimpl.checks.siblings_errors, with NaN exactly where torch's is, and gives torch's exact output on
the special rows; BatchNorm (our torch-level modules, our first kernel and the split kernels, NCHW
and channels-last) stays within its stated bounds of torch.nn.BatchNorm1d/2d in outputs and running
statistics, the split kernels' backward within its bounds of torch's autograd (dx, dweight, dbias,
NaN where torch's is), BatchNorm2d(kernel=True) trains through them, and refuses what torch refuses with
torch's message."""
import pytest
import torch

from reimpl.checks import siblings_errors as se
from reimpl.checks.parity import bit_mismatches
from reimpl.ladder import accuracy, batchnorm, softmax

pytestmark = pytest.mark.gpu

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
_id = lambda d: str(d).removeprefix("torch.")  # noqa: E731


# the kernel's name leads each test id, so its registry entry's `run` line (-k NAME) selects its tests
@pytest.mark.parametrize("family", accuracy.SOFTMAX_FAMILIES)
@pytest.mark.parametrize("dtype", DTYPES, ids=_id)
@pytest.mark.parametrize("name", list(softmax.KERNELS))
def test_softmax_within_its_stated_distance_to_torch(name, dtype, family):
    for M, N in se.softmax_shapes():
        for r in se.measure_softmax(dtype, family, M, N, [name]):
            limit, why = softmax.bound(r["kernel"], r["dtype"], N)
            assert r["nan_positions_match"], r
            assert r["max_ulp_to_torch"] <= limit, f"{r} exceeds {limit} ulps ({why})"


NEG, POS, NAN = float("-inf"), float("inf"), float("nan")


@pytest.mark.parametrize("row", [[NEG] * 5, [NEG, 5.0, NEG], [POS, 1.0, 2.0], [7.0], [NEG], [POS], [NAN, 1.0],
                                 [1e30, -1e30, 0.0], [3e38, 3e38], [-3e38, 0.0], list(range(300)) + [NEG] * 40],
                         ids=lambda r: f"len{len(r)}")
@pytest.mark.parametrize("name", list(softmax.KERNELS))
def test_softmax_special_rows_as_torch(name, row):
    """Rows whose softmax is exact (0, 1, NaN) or whose sum has one term: torch's bits exactly. The
    last row is a long one with a masked tail, checked by the bound instead."""
    x = torch.tensor([row] * 3, device="cuda")
    ours, theirs = softmax.run(name, x), torch.softmax(x, -1)
    assert torch.equal(torch.isnan(ours), torch.isnan(theirs)), (ours, theirs)
    if len(row) <= 5:
        assert bit_mismatches(ours, theirs) == 0, (ours, theirs)
    else:
        ok = ~torch.isnan(theirs)
        limit = softmax.bound(name, "float32", len(row))[0]
        assert float(se.ulps((ours - theirs).double()[ok], theirs.double()[ok], "float32").max()) <= limit


def test_softmax_any_shape_and_layout():
    """Leading dims are flattened and a non-contiguous input is made contiguous, as torch.softmax."""
    x = torch.randn(3, 5, 70, device="cuda").transpose(0, 1)
    for name in softmax.KERNELS:
        y = softmax.run(name, x)
        assert y.shape == x.shape
        assert float((y - torch.softmax(x, -1)).abs().max()) < 1e-6


@pytest.mark.parametrize("dtype,pdtype", se.BN_DTYPES, ids=lambda v: v)
@pytest.mark.parametrize("impl", se.BN_IMPLS)
def test_batchnorm_within_its_stated_bounds(impl, dtype, pdtype):
    """Every shape of the table (C = 1, spatial size 1, (N, C) and (N, C, L) input, odd sizes), both
    families, train and eval (a batch of 1 in eval), one step from torch's state."""
    for case in se.batchnorm_cases():
        if case[:3] != (impl, dtype, pdtype):
            continue
        r = se.measure_batchnorm(*case)
        assert r["y_rel"] <= accuracy.batchnorm_bound(dtype, "y")[0], r
        assert r["running_mean_rel"] <= accuracy.batchnorm_bound(pdtype, "running")[0], r
        assert r["running_var_rel"] <= accuracy.batchnorm_bound(pdtype, "running")[0], r
        assert r["num_batches_tracked"][0] == r["num_batches_tracked"][1], r


@pytest.mark.parametrize("impl", se.BN_IMPLS)
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_several_steps_and_cumulative_average(impl, momentum):
    for dtype, pdtype in se.BN_DTYPES:
        r = se.measure_batchnorm(impl, dtype, pdtype, "normal", (8, 3, 17, 13), "train", steps=4, momentum=momentum)
        assert r["y_rel"] <= accuracy.batchnorm_bound(dtype, "y")[0], r
        for k in ("running_mean_rel", "running_var_rel"):
            assert r[k] <= accuracy.batchnorm_bound(pdtype, "running")[0], r
        assert r["num_batches_tracked"] == [4, 4], r


# the modules' `kernel` per implementation, the test ids naming the implementation
KERNELS = {"ids": ["torch_level", "kernel", "split"], "argvalues": [False, "bn_kernel", True]}


@pytest.mark.parametrize("kw", [{"affine": False}, {"track_running_stats": False}])
@pytest.mark.parametrize("kernel", **KERNELS)
def test_batchnorm_options(kw, kernel):
    torch.manual_seed(0)
    theirs = torch.nn.BatchNorm2d(6, device="cuda", **kw)
    ours = batchnorm.BatchNorm2d(6, device="cuda", kernel=kernel, **kw)
    ours.load_state_dict(theirs.state_dict())
    bound = accuracy.batchnorm_bound("float32", "y")[0]
    for train in (True, False, True):
        theirs.train(train)
        ours.train(train)
        x = torch.randn(5, 6, 9, 7, device="cuda") * 2 + 1
        assert float((ours(x) - theirs(x)).abs().max()) <= bound
    for (k, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert float((a.double() - b.double()).abs().max()) <= bound, k


def test_batchnorm_kernel_statistics_and_layouts():
    """The kernel's saved mean and 1/std against torch's native_batch_norm, and a channels-last input
    (made contiguous: the values are the same, the layout is not kept)."""
    x = torch.randn(16, 8, 12, 12, device="cuda") + 3
    w, b = torch.randn(8, device="cuda"), torch.randn(8, device="cuda")
    rm, rv = torch.zeros(8, device="cuda"), torch.ones(8, device="cuda")
    y, mean, invstd = batchnorm.batch_norm_train_forward(x, w, b, rm.clone(), rv.clone(), 0.1, 1e-5)
    ty, tmean, tinvstd = torch.native_batch_norm(x, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)
    bound = accuracy.batchnorm_bound("float32", "y")[0]
    for a, t in ((y, ty), (mean, tmean), (invstd, tinvstd)):
        assert float(((a - t).abs() / t.abs().clamp(min=1)).max()) <= bound
    y2 = batchnorm.batch_norm_train_forward(x.to(memory_format=torch.channels_last), w, b)[0]
    assert float((y2 - torch.nn.functional.batch_norm(x, None, None, w, b, True)).abs().max()) <= bound


@pytest.mark.parametrize("kernel", **KERNELS)
@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (1, 4)), ("BatchNorm2d", (1, 4, 1, 1))])
def test_batchnorm_one_value_per_channel_refused_as_torch(cls, shape, kernel):
    theirs = getattr(torch.nn, cls)(4, device="cuda")
    ours = getattr(batchnorm, cls)(4, device="cuda", kernel=kernel)
    x = torch.randn(shape, device="cuda")
    with pytest.raises(ValueError) as t:
        theirs(x)
    with pytest.raises(ValueError) as o:
        ours(x)
    assert str(o.value) == str(t.value)
    assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked) == 1
    ours.eval()
    theirs.eval()
    assert float((ours(x) - theirs(x)).abs().max()) <= accuracy.batchnorm_bound("float32", "y")[0]


# ---- the split kernels (reimpl/ladder/batchnorm_split.py): forward and backward ----

# (measured key, what accuracy.batchnorm_bound calls it, whose storage type it is)
SPLIT_CHECKS = (("y_rel", "y", "dtype"), ("mean_rel", "stats", None), ("invstd_rel", "stats", None),
                ("running_mean_rel", "running", "param_dtype"), ("running_var_rel", "running", "param_dtype"),
                ("dx_rel", "dx", "dtype"), ("dweight_rel", "dweight", "param_dtype"),
                ("dbias_rel", "dbias", "param_dtype"))


# Measured on the H100: with bfloat16 x and float32 parameters in NCHW, torch's dbias is up to 2.0e-3 of
# sum |dy| from a float64 sum of the same dy, sixty times the bound, and its dweight up to 1.04 times
# the bound; ours are within 1e-7 (channels_last agrees with torch, and so does every other output).
# There the parameter gradients are held to the float64 reference instead of torch's.
MIXED_NCHW = ("bfloat16", "float32", "contiguous")


def _assert_split_within_bounds(r, keys=None):
    assert r["nan_positions_match"] and r["layout_kept"], r
    assert r["dtypes"] == [r["dtype"], r["dtype"], r["param_dtype"], r["param_dtype"]], r
    mixed = (r["dtype"], r["param_dtype"], r["layout"]) == MIXED_NCHW
    for key, what, whose in SPLIT_CHECKS:
        if keys and key not in keys:
            continue
        got = r[key + "_f64"] if mixed and what in ("dweight", "dbias") else r[key]
        limit, why = accuracy.batchnorm_bound(r[whose] if whose else "float32", what)
        assert got <= limit, f"{key} = {got} exceeds {limit} ({why}): {r}"  # NaN fails too


@pytest.mark.parametrize("shape", [(32, 256, 14, 14), (8, 256, 32, 32), (32, 64, 56, 56)])
def test_batchnorm_split_mixed_nchw_param_grads_against_float64(shape):
    """Where ours and torch's parameter gradients disagree, which one is off: both against float64."""
    r = se.measure_batchnorm_split(*MIXED_NCHW[:2], "normal", shape, MIXED_NCHW[2])
    limit = {w: accuracy.batchnorm_bound("float32", w)[0] for w in ("dweight", "dbias")}
    report = {k: r[k] for k in ("dweight_rel", "dbias_rel", "dweight_rel_f64", "dbias_rel_f64",
                                "torch_dweight_rel_f64", "torch_dbias_rel_f64")}
    print("mixed NCHW", shape, report, limit)
    assert r["dweight_rel_f64"] <= limit["dweight"] and r["dbias_rel_f64"] <= limit["dbias"], (report, limit)
    # what batchnorm.md says of torch 2.11 here: its dbias is the side off float64, by far more than the bound
    assert r["torch_dbias_rel_f64"] > 10 * limit["dbias"], (report, limit)


@pytest.mark.parametrize("layout", se.BN_LAYOUTS)
@pytest.mark.parametrize("dtype,pdtype", se.BN_SPLIT_DTYPES, ids=lambda v: v)
def test_batchnorm_split_forward_and_backward_within_bounds(dtype, pdtype, layout):
    """The split launchers on every shape of BN_SPLIT_SHAPES (channels_last: the 4-D ones), both
    families: y, save_mean, save_invstd and the running statistics against torch's forward, dx,
    dweight, dbias against torch's autograd, within accuracy.py's bounds; y and dx in x's memory
    format, the gradients in x's and the parameters' types."""
    for shape in se.BN_SPLIT_SHAPES:
        if layout == "channels_last" and len(shape) != 4:
            continue
        for family in accuracy.BN_FAMILIES:
            _assert_split_within_bounds(se.measure_batchnorm_split(dtype, pdtype, family, shape, layout))


@pytest.mark.parametrize("layout", se.BN_LAYOUTS)
@pytest.mark.parametrize("dtype,pdtype", se.BN_SPLIT_DTYPES, ids=lambda v: v)
def test_batchnorm_split_nan_where_torch_has_it(dtype, pdtype, layout):
    """One NaN in channel 1: y, dx, dweight, save_mean, save_invstd and the running statistics are
    NaN in that channel and nowhere else, as torch's; dbias (sum dy) stays a number in both; the
    other channels within the bounds."""
    for shape in ((8, 3, 17, 13), (32, 64, 56, 56), (16, 32, 1, 1), (256, 100), (4, 7, 33), (8, 512, 7, 7)):
        if layout == "channels_last" and len(shape) != 4:
            continue
        _assert_split_within_bounds(se.measure_batchnorm_split(dtype, pdtype, "normal", shape, layout, nan_channel=1))


@pytest.mark.parametrize("layout", se.BN_LAYOUTS)
def test_batchnorm_split_module_trains_as_torch(layout):
    """BatchNorm2d(kernel=True) trains for three SGD steps through the split forward and backward.
    At each step torch's BatchNorm2d, given our module's current weight and bias, is the reference:
    outputs, input and parameter gradients within the stated bounds, running statistics (each
    module's own, updated three times) too, and num_batches_tracked equal."""
    torch.manual_seed(0)
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    C, shape = 8, (16, 8, 12, 12)
    theirs = torch.nn.BatchNorm2d(C, device="cuda")
    ours = batchnorm.BatchNorm2d(C, device="cuda", kernel=True)
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5)
        theirs.bias.uniform_(-0.5, 0.5)
    ours.load_state_dict(theirs.state_dict())
    start = ours.weight.detach().clone()
    opt = torch.optim.SGD(ours.parameters(), lr=0.1)
    bound = {w: accuracy.batchnorm_bound("float32", w)[0] for w in accuracy.BN_WHAT}
    for _ in range(3):
        with torch.no_grad():
            theirs.weight.copy_(ours.weight)
            theirs.bias.copy_(ours.bias)
        z = torch.randn(shape, device="cuda")
        x = (z + 3).contiguous(memory_format=fmt)
        g = (torch.randn(shape, device="cuda") + 0.5 + 0.3 * z).contiguous(memory_format=fmt)
        xo, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
        theirs.zero_grad()
        opt.zero_grad()
        yo, yt = ours(xo), theirs(xt)
        (yo * g).sum().backward()
        (yt * g).sum().backward()
        assert yo.is_contiguous(memory_format=fmt) and xo.grad.is_contiguous(memory_format=fmt)
        assert float(((yo - yt).abs() / yt.abs().clamp(min=1)).max()) <= bound["y"]
        sdx, sdw, sdb = se.batchnorm_backward_scales(x, g, ours.weight.detach())
        assert float(((xo.grad - xt.grad).abs() / sdx).max()) <= bound["dx"]
        assert float(((ours.weight.grad - theirs.weight.grad).abs() / sdw).max()) <= bound["dweight"]
        assert float(((ours.bias.grad - theirs.bias.grad).abs() / sdb).max()) <= bound["dbias"]
        opt.step()
    for k in ("running_mean", "running_var"):
        a, t = getattr(ours, k), getattr(theirs, k)
        assert float(((a - t).abs() / t.abs().clamp(min=1)).max()) <= bound["running"], k
    assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked) == 3
    assert float((ours.weight - start).abs().min()) > 0  # it trained


# short NCHW channels, at least one per SM: one block per channel holding it (bn_forward_held and
# bn_backward_held; batchnorm_split.one_block_per_channel); channels-last, the split's columns
SHORT_CHANNELS = ((32, 256, 14, 14), (8, 512, 7, 7), (8, 256, 32, 32), (32, 2048, 7, 7), (4, 256, 9, 9))


@pytest.mark.parametrize("layout", se.BN_LAYOUTS)
@pytest.mark.parametrize("dtype,pdtype", se.BN_SPLIT_DTYPES, ids=lambda v: v)
def test_batchnorm_split_short_channels_within_bounds(dtype, pdtype, layout):
    """The one-block-per-channel path (NCHW; channels-last takes the split) against torch, both
    families, as test_batchnorm_split_forward_and_backward_within_bounds."""
    from reimpl.ladder import batchnorm_split as bs
    for shape in SHORT_CHANNELS:
        N, C, HW = shape[0], shape[1], shape[2] * shape[3]
        assert bs.one_block_per_channel(N, C, HW, False, torch.cuda.get_device_properties(0).multi_processor_count)
        for family in accuracy.BN_FAMILIES:
            _assert_split_within_bounds(se.measure_batchnorm_split(dtype, pdtype, family, shape, layout))


# NCHW channels of whole 16-byte words up to HELD_FORWARD_VALUES: the forward holds them (64 values a
# thread at most), the backward takes the split
LONG_HELD = ((32, 128, 28, 28), (16, 160, 28, 28))


@pytest.mark.parametrize("layout", ["contiguous"])
@pytest.mark.parametrize("dtype,pdtype", se.BN_SPLIT_DTYPES, ids=lambda v: v)
def test_batchnorm_split_long_held_channels_within_bounds(dtype, pdtype, layout):
    from reimpl.ladder import batchnorm_split as bs
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for shape in LONG_HELD:
        N, C, HW = shape[0], shape[1], shape[2] * shape[3]
        itemsize = 4 if dtype == "float32" else 2
        assert bs.one_block_per_channel(N, C, HW, False, sms, bs.held_forward_values(HW, itemsize, True))
        assert not bs.one_block_per_channel(N, C, HW, False, sms)
        for family in accuracy.BN_FAMILIES:
            _assert_split_within_bounds(se.measure_batchnorm_split(dtype, pdtype, family, shape, layout))


# one shape per path: NCHW split (vectors, and one value at a time), one block per channel,
# channels-last columns merged by the last block, and by the finalize kernel (tiles too wide), 2-D
# columns
PATHS = (((32, 64, 56, 56), "contiguous"), ((16, 64, 15, 15), "contiguous"), ((32, 256, 14, 14), "contiguous"),
         ((32, 128, 28, 28), "channels_last"), ((32, 64, 56, 56), "channels_last"), ((8 * 197, 768), "contiguous"),
         ((65536, 8), "contiguous"))


def _split_step(x, dy, w, b, rm, rv):
    from reimpl.ladder import batchnorm_split as bs
    y, mean, invstd = bs.batch_norm_train_forward_split(x, w, b, rm, rv, 0.1, 1e-5)
    return (y, mean, invstd, rm, rv) + bs.batch_norm_train_backward_split(dy, x, w, mean, invstd)


def _split_inputs(shape, layout, dtype=torch.float16, seed=0):
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    g = torch.Generator(device="cuda").manual_seed(seed)
    C = shape[1]
    x, dy = ((torch.randn(shape, device="cuda", generator=g) + 3).to(dtype).contiguous(memory_format=fmt)
             for _ in range(2))
    w, b = torch.rand(C, device="cuda", generator=g) + 0.5, torch.randn(C, device="cuda", generator=g)
    return x, dy, w, b


@pytest.mark.parametrize("shape,layout", PATHS, ids=str)
def test_batchnorm_split_same_bits_every_call(shape, layout):
    """Forward and backward twice in a row give identical bits (y, the saved and running statistics,
    dx, dweight, dbias): the last-block merges add in slice order whichever block came last, and
    every launch leaves its arrival counters at 0 for the next (checked too)."""
    from reimpl.device import runtime
    from reimpl.ladder import batchnorm_split as bs
    x, dy, w, b = _split_inputs(shape, layout)
    C = shape[1]
    runs = [_split_step(x, dy, w, b, torch.zeros(C, device="cuda"), torch.ones(C, device="cuda")) for _ in range(3)]
    for again in runs[1:]:
        for a, t in zip(runs[0], again):
            assert bit_mismatches(a, t) == 0
    torch.cuda.synchronize()
    counters = bs._ARRIVED.get((str(x.device), runtime.get().getCurrentCUDAStream()))
    assert counters is None or not bool(counters.any())


def test_batchnorm_split_concurrent_streams():
    """The same forward and backward issued in turn on two torch.cuda.Stream()s, so that their
    launches overlap: each stream's results are the bits of the same call on the default stream
    (each stream has its own arrival counters, bs._ARRIVED), and those are within the bounds."""
    from reimpl.ladder import batchnorm_split as bs
    inputs = [_split_inputs(s, l, seed=i) for i, (s, l) in enumerate(PATHS)]
    fresh = lambda C: (torch.zeros(C, device="cuda"), torch.ones(C, device="cuda"))  # noqa: E731
    want = [_split_step(x, dy, w, b, *fresh(x.shape[1])) for x, dy, w, b in inputs]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    main = torch.cuda.current_stream()
    for st in streams:
        st.wait_stream(main)
    got = [[] for _ in streams]
    for _ in range(4):
        for inp in inputs:
            for st, out in zip(streams, got):
                with torch.cuda.stream(st):
                    out.append(_split_step(*inp, *fresh(inp[0].shape[1])))
    for st in streams:
        main.wait_stream(st)
    torch.cuda.synchronize()
    keys = {k for k in bs._ARRIVED if k[1] in {st.cuda_stream for st in streams}}
    assert len(keys) == 2
    for out in got:
        for i, res in enumerate(out):
            for a, t in zip(want[i % len(inputs)], res):
                assert bit_mismatches(a, t) == 0
    for shape, layout in PATHS:
        _assert_split_within_bounds(se.measure_batchnorm_split("float16", "float16", "normal", shape, layout))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=_id)
@pytest.mark.parametrize("shape", [(32, 64, 56, 56), (8, 200, 9, 9), (6304, 768), (32, 2048, 7, 7), (5, 3, 7, 7),
                                   (3, 36, 5, 5), (2, 40000)], ids=str)
def test_batchnorm_resident_same_bits_as_the_split_launches(shape, dtype, monkeypatch):
    """Columns input (channels-last, or 2-D; here of any size) takes one resident launch a direction;
    given the same plans, the split's three launches give the same bits: y, the saved and running
    statistics, dx, dweight and dbias (the merge order and every formula are shared). Tiles too many
    to stay resident (2 x 40000: 1250 tiles in float32) fall back to the split launches."""
    from reimpl.ladder import batchnorm_split as bs
    layout = "channels_last" if len(shape) == 4 else "nchw"
    x, dy, w, b = _split_inputs(shape, layout, dtype)
    C = shape[1]
    plans = []
    real = bs.resident_plan

    def spy(*args):
        plans.append(real(*args))
        return plans[-1]
    monkeypatch.setattr(bs, "resident_plan", spy)
    monkeypatch.setattr(bs, "RESIDENT_FROM_BYTES", {"forward": {4: 0, 2: 0}, "backward": {4: 0, 2: 0}})
    fresh = lambda: (torch.zeros(C, device="cuda"), torch.ones(C, device="cuda"))  # noqa: E731
    resident = _split_step(x, dy, w, b, *fresh())
    assert len(plans) == 2  # forward's, backward's (their kernels may keep different blocks resident)
    monkeypatch.setattr(bs, "RESIDENT", False)
    given, real_columns = iter(plans), bs.columns_plan
    monkeypatch.setattr(bs, "columns_plan", lambda *args: next(given) or real_columns(*args))
    split = _split_step(x, dy, w, b, *fresh())
    assert next(given, "all used") == "all used"
    for a, t in zip(resident, split):
        assert bit_mismatches(a, t) == 0


def test_batchnorm_resident_in_a_cuda_graph():
    """The resident launches (cooperative, their tile barriers in a per-stream array) captured in a
    CUDA graph: each replay gives the eager call's bits (y, saved and running statistics, dx, dweight,
    dbias), replay after replay, and leaves the barrier counts at 0."""
    from reimpl.ladder import batchnorm_split as bs
    x, dy, w, b = _split_inputs((32, 64, 56, 56), "channels_last", torch.float32)
    assert bs.RESIDENT and x.numel() * 4 >= bs.RESIDENT_FROM_BYTES["forward"][4]
    fresh = lambda: (torch.zeros(64, device="cuda"), torch.ones(64, device="cuda"))  # noqa: E731
    want = _split_step(x, dy, w, b, *fresh())
    rm, rv = fresh()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        _split_step(x, dy, w, b, *fresh())  # warm up on the capture stream: its barrier array exists
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        got = _split_step(x, dy, w, b, rm, rv)
    for _ in range(3):
        rm.zero_(), rv.fill_(1)
        graph.replay()
        torch.cuda.synchronize()
        for a, t in zip(want, got):
            assert bit_mismatches(a, t) == 0
    bars = bs._BARRIERS[(str(x.device), stream.cuda_stream)]
    assert not bool(bars[0::2].any())  # every tile's count back at 0
