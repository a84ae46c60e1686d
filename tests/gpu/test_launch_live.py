"""GPU: the mirror launches what torch launches: same kernel (full demangled signature), grid,
block and shared memory, as torch.profiler sees both."""
import pytest

from reimpl.checks import cases, cases_backward as bwd
from reimpl.checks.record import profile_launches

pytestmark = pytest.mark.gpu

LIVE_CASES = cases.path_cases() + cases.layout_cases() + [
    c for c in cases.shape_grid() if c.shape[0] in (1, 65537) and c.shape[1] in (3, 768, 1024)]


# backward: every tile class, the partial path, both grad-input kernels, masks, M == 0, layouts
LIVE_BACKWARD_CASES = bwd.partial_cases() + bwd.path_cases() + bwd.layout_cases() + [
    c for c in bwd.shape_grid() if c.shape[1] in (33, 1024)] + [
    c for c in bwd.mask_cases() if c.shape == (200, 1000) and c.dtype in ("fp32", "bf16")]


@pytest.mark.parametrize("case", LIVE_CASES + LIVE_BACKWARD_CASES, ids=lambda c: c.id)
def test_live_launches_equal_torch(case):
    """Every kernel either side launches, torch's own (copies, fills, .sum(0)) included."""
    args = case.make_args("cuda", values=False)
    case.run_torch(*args)
    case.run_ours(*args)  # warm-up: module load and compile stay outside the profile
    theirs = profile_launches(lambda: case.run_torch(*args))
    ours = profile_launches(lambda: case.run_ours(*args))
    assert ours == theirs
