"""GPU: the mirror's backward gives torch's bits: dX, dgamma, dbeta (RMSNorm: dX, dweight) for every
dtype, both grad-input kernels, every GammaBeta tile and the partial reduction, every output_mask,
edge values, layouts, and a random sweep. mean/rstd come from torch's forward on the same input."""
import pytest
import torch

from reimpl.checks import cases_backward as bwd
from reimpl.device import runtime
from reimpl.checks.parity import bit_mismatches, compare_case
from tests.conftest import record

pytestmark = pytest.mark.gpu


def compare(case, group: str) -> list[str]:
    elements, mismatches, bad = compare_case(case)
    record(group, elements, mismatches)
    return bad


@pytest.mark.parametrize("case", bwd.shape_grid(), ids=lambda c: c.id)
def test_bwd_shapes(case):
    assert compare(case, "bwd_shape_grid") == []


@pytest.mark.parametrize("case", bwd.partial_cases(), ids=lambda c: c.id)
def test_bwd_partial_reduction(case):
    assert compare(case, "bwd_partial") == []


@pytest.mark.parametrize("case", bwd.path_cases(), ids=lambda c: c.id)
def test_bwd_paths(case):
    assert compare(case, "bwd_paths") == []


@pytest.mark.parametrize("case", bwd.mask_cases(), ids=lambda c: c.id)
def test_bwd_masks(case):
    assert compare(case, "bwd_masks") == []


@pytest.mark.parametrize("case", bwd.value_cases(), ids=lambda c: c.id)
def test_bwd_values(case):
    assert compare(case, "bwd_values") == []


@pytest.mark.parametrize("case", bwd.layout_cases(), ids=lambda c: c.id)
def test_bwd_layouts(case):
    assert compare(case, "bwd_layouts") == []


def test_bwd_random_sweep():
    bad = []
    for case in bwd.random_cases(1000):
        bad += compare(case, "bwd_random_sweep")
    assert bad == [], "\n".join(bad[:20])


def test_partial_path_dbeta_without_dgamma_is_empty_as_in_torch():
    """Upstream sizes the partial path's dbeta buffer from dgamma; when only dbeta is asked for,
    dgamma is undefined (one dimension of size 0), so torch 2.11 returns dbeta of shape [0]."""
    case = bwd.BackwardCase("layer_norm", "fp32", (65537, 64), mask=(True, False, True))
    args = case.make_args("cuda")
    theirs, ours = case.run_torch(*args), case.run_ours(*args)
    assert tuple(theirs[2].shape) == (0,) and tuple(ours[2].shape) == (0,)
    assert theirs[1] is None and ours[1] is None


def _at_offset_one(t):
    """The same values in a fresh buffer, one element past its start (misaligned for 4-wide loads)."""
    buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    shifted = buf[1:].view(t.shape)
    shifted.copy_(t)
    return shifted


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_two_grad_input_kernels_agree(op, dtype):
    """Same values and statistics, two addresses: aligned, torch picks
    layer_norm_grad_input_kernel_vectorized; with X and dY at storage offset 1,
    layer_norm_grad_input_kernel. Their dX bits are equal, in torch and in the mirror: both kernels
    add each thread's elements in the same order."""
    case = bwd.BackwardCase(op, dtype, (300, 4096), bias=op == "layer_norm", mask=(True, False, False), seed=9)
    dy, x, mean, rstd, w, b = case.make_args("cuda")
    dy1, x1 = _at_offset_one(dy), _at_offset_one(x)
    assert bit_mismatches(dy1, dy) == 0 and bit_mismatches(x1, x) == 0
    rt = runtime.get()
    rt.record = []
    try:
        ours = [case.run_ours(dy, x, mean, rstd, w, b)[0], case.run_ours(dy1, x1, mean, rstd, w, b)[0]]
        kernels = [l.kernel.split("<")[0] for l in rt.record]
    finally:
        rt.record = None
    assert kernels == ["layer_norm_grad_input_kernel_vectorized", "layer_norm_grad_input_kernel"]
    dx = [case.run_torch(dy, x, mean, rstd, w, b)[0], case.run_torch(dy1, x1, mean, rstd, w, b)[0]] + ours
    assert all(bit_mismatches(d, dx[0]) == 0 for d in dx[1:])
