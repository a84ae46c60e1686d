"""CPU-only: the backward host mirror, run with a recording runtime, makes exactly the launches
torch 2.11 made on the H100 for every recorded backward case (grad-input kernel choice, GammaBeta
tile, partial_reduction and aligned_grid flags, grid, block, shared memory). torch's own kernels
in the record (copies, fills, the partial path's .sum(0)) are checked against when upstream calls
those ops."""
import json
from pathlib import Path

import pytest

from reimpl.checks import plan
from reimpl.checks.cases_backward import PARTIAL_SHAPES, BackwardCase

RECORD = Path(__file__).resolve().parents[1] / "reference" / "torch_launches_backward.json"
DATA = json.loads(RECORD.read_text())
PREFIX = "void at::native::(anonymous namespace)::"
LN_KERNELS = ("layer_norm_grad_input_kernel", "layer_norm_grad_input_kernel_vectorized",
              "GammaBetaBackwardCUDAKernelTemplate")


def _name(launch: dict) -> str:
    k = launch["kernel"]
    return k[len(PREFIX):].split("<")[0] if k.startswith(PREFIX) else ""


def layer_norm_launches(launches: list[dict]) -> list[dict]:
    return [l for l in launches if _name(l) in LN_KERNELS]


@pytest.fixture(scope="module")
def kernel_facts():
    return plan.kernel_facts("sm_90")


def test_record_is_stamped_and_covers_every_kernel():
    assert DATA["torch"].startswith("2.11.0") and DATA["git"] == "70d99e998b4955e0049d13a98d77ae1b14db1f45"
    assert "H100" in DATA["device"] and len(DATA["cases"]) >= 1000
    seen = {l["kernel"] for c in DATA["cases"] for l in layer_norm_launches(c["launches"])}
    tiles = {", ".join(k.split("Template<")[1].split(">")[0].split(", ")[2:6]) for k in seen if "GammaBeta" in k}
    # the four tiles of the normal path (reduced across threads except <32, 1, 8>), and the partial one
    assert tiles == {"32u, 1u, 8u, true", "32u, 8u, 64u, false", "32u, 16u, 128u, false",
                     "32u, 32u, 256u, false", "32u, 1u, 32u, true"}, tiles
    assert {_name({"kernel": k}) for k in seen} == set(LN_KERNELS)


def _expected_torch_ops(case: BackwardCase) -> int:
    """How many of torch's own kernels upstream's host code adds: a copy for each non-contiguous
    input (X by expect_contiguous, dY by .contiguous()), a fill per zeros_like when M == 0, a
    reduction per .sum(0) on the partial path."""
    m = 1
    for s in case.shape[:len(case.shape) - case.norm_ndim]:
        m *= s
    n = 1
    for s in case.normalized_shape:
        n *= s
    mask = case.output_mask + [False] * (3 - len(case.output_mask))
    grads = mask[1] + mask[2]
    copies = 2 if case.transpose and m > 0 else 0
    fills = grads if m == 0 else 0
    partial = m > 64 * 1024 and n // 32 < 132 // 2
    # dbeta's partial buffer is sized from dgamma: without dgamma it has no columns, and summing
    # an empty tensor launches nothing
    sums = mask[1] + (mask[2] and mask[1]) if partial else 0
    return copies + fills + sums


def test_torch_adds_only_the_ops_upstream_calls():
    for c in DATA["cases"]:
        case = BackwardCase.from_dict(c["case"])
        extra = [l for l in c["launches"] if _name(l) not in LN_KERNELS]
        assert len(extra) == _expected_torch_ops(case), (c["id"], [l["kernel"][:80] for l in extra])


def test_partial_path_is_recorded():
    ids = {tuple(c["case"]["shape"]) for c in DATA["cases"]}
    assert set(PARTIAL_SHAPES) <= ids


@pytest.mark.parametrize("entry", DATA["cases"], ids=[c["id"] for c in DATA["cases"]])
def test_backward_plan_equals_torch(entry, kernel_facts):
    case = BackwardCase.from_dict(entry["case"])
    ours = plan.profiler_view(plan.host_launches(case), kernel_facts)
    assert ours == layer_norm_launches(entry["launches"])
