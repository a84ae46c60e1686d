"""GPU: the mirror's backward gives torch's bits: dX, dgamma, dbeta (RMSNorm: dX, dweight) for every
dtype, both grad-input kernels, every GammaBeta tile and the partial reduction, every output_mask,
edge values, layouts, and a random sweep. mean/rstd come from torch's forward on the same input."""
import pytest

from reimpl import cases_backward as bwd
from reimpl.parity import compare_case
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
