"""GPU: the mirror's backward gives torch's bits: dX, dgamma, dbeta (RMSNorm: dX, dweight) for every
dtype, both grad-input kernels, every GammaBeta tile and the partial reduction, every output_mask,
edge values, layouts, and a random sweep. mean/rstd come from torch's forward on the same input."""
import pytest

from reimpl import cases_backward as bwd
from reimpl.parity import bit_mismatches, compare_case
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


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_two_grad_input_kernels_agree(op, dtype):
    """Same values, two addresses: at storage offset 0 torch picks layer_norm_grad_input_kernel_vectorized,
    at offset 1 (misaligned X and dY) layer_norm_grad_input_kernel. Their dX bits are equal, in
    torch and in the mirror: the two kernels add each thread's elements in the same order."""
    aligned = bwd.BackwardCase(op, dtype, (300, 4096), bias=op == "layer_norm", mask=(True, False, False), seed=9)
    shifted = bwd.BackwardCase(op, dtype, (300, 4096), bias=op == "layer_norm", mask=(True, False, False), seed=9,
                               x_offset=1, dy_offset=1)
    a_args, s_args = aligned.make_args("cuda"), shifted.make_args("cuda")
    for a, s in zip(a_args, s_args):  # the very same values, at other addresses
        assert a is None or bit_mismatches(a, s) == 0
    dx = [aligned.run_torch(*a_args)[0], shifted.run_torch(*s_args)[0],
          aligned.run_ours(*a_args)[0], shifted.run_ours(*s_args)[0]]
    assert all(bit_mismatches(d, dx[0]) == 0 for d in dx[1:])
