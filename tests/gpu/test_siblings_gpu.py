"""GPU: LayerNorm's siblings against torch. Every softmax kernel of ours stays within its stated
distance to torch.softmax (reimpl/ladder/accuracy.py) on every family, dtype and shape of
reimpl.checks.siblings_errors, with NaN exactly where torch's is, and gives torch's exact output on
the special rows; BatchNorm (our torch-level modules and our kernel) stays within its stated bounds
of torch.nn.BatchNorm1d/2d in outputs and running statistics, and refuses what torch refuses with
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
            limit, why = accuracy.softmax_bound(softmax.KERNELS[r["kernel"]].cuda.threads, r["dtype"], N)
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
        limit = accuracy.softmax_bound(softmax.KERNELS[name].cuda.threads, "float32", len(row))[0]
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


@pytest.mark.parametrize("kw", [{"affine": False}, {"track_running_stats": False}])
@pytest.mark.parametrize("kernel", [False, True], ids=["torch_level", "kernel"])
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


@pytest.mark.parametrize("kernel", [False, True], ids=["torch_level", "kernel"])
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
