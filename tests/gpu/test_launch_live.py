"""GPU: the mirror launches what torch launches: same kernel (full demangled signature), grid,
block and shared memory, as torch.profiler sees both."""
import pytest

from reimpl import cases
from reimpl.record import profile_launches

pytestmark = pytest.mark.gpu

LIVE_CASES = cases.path_cases() + cases.layout_cases() + [
    c for c in cases.shape_grid() if c.shape[0] in (1, 65537) and c.shape[1] in (3, 768, 1024)]


@pytest.mark.parametrize("case", LIVE_CASES, ids=lambda c: c.id)
def test_live_launches_equal_torch(case):
    x, w, b = case.make_inputs("cuda", values=False)
    case.run_torch(x, w, b)
    case.run_ours(x, w, b)  # warm-up: module load and compile stay outside the profile
    theirs = profile_launches(lambda: case.run_torch(x, w, b))
    ours = profile_launches(lambda: case.run_ours(x, w, b))
    assert ours == theirs
