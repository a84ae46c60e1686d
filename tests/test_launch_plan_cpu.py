"""CPU-only: the host mirror, run with a recording runtime, makes exactly the launches torch 2.11
made on the H100 for every recorded case: same kernel (full signature), grid, block and shared
memory (our dynamic nshared plus the static shared memory of our compiled kernel)."""
import json
from pathlib import Path

import pytest

from reimpl.checks import plan
from reimpl.checks.cases import Case

RECORD = Path(__file__).resolve().parents[1] / "reference" / "torch_launches_forward.json"
DATA = json.loads(RECORD.read_text())


@pytest.fixture(scope="module")
def kernel_facts():
    return plan.kernel_facts("sm_90")


def our_plan(case: Case, kernel_facts) -> list[dict]:
    return plan.profiler_view(plan.host_launches(case), kernel_facts)


def test_record_is_stamped():
    assert DATA["torch"].startswith("2.11.0") and DATA["git"] == "70d99e998b4955e0049d13a98d77ae1b14db1f45"
    assert "H100" in DATA["device"] and len(DATA["cases"]) >= 1000


LN_KERNELS = ("vectorized_layer_norm_kernel", "RowwiseMomentsCUDAKernel", "LayerNormForwardCUDAKernel")


def layer_norm_launches(launches: list[dict]) -> list[dict]:
    """torch's launches from layer_norm_kernel.cu; drops the copy a non-contiguous input costs
    (torch's own elementwise kernel, launched by .contiguous() in both implementations)."""
    prefix = "void at::native::(anonymous namespace)::"
    return [l for l in launches if l["kernel"].startswith(prefix)
            and l["kernel"][len(prefix):].split("<")[0] in LN_KERNELS]


def test_record_covers_both_paths_and_no_launch():
    prefix = len("void at::native::(anonymous namespace)::")
    kinds = {l["kernel"][prefix:].split("<")[0] for c in DATA["cases"] for l in layer_norm_launches(c["launches"])}
    assert kinds == set(LN_KERNELS)
    assert any(c["case"]["shape"][0] == 0 and c["launches"] == [] for c in DATA["cases"])


def test_only_non_contiguous_inputs_add_a_copy():
    for c in DATA["cases"]:
        extra = len(c["launches"]) - len(layer_norm_launches(c["launches"]))
        assert extra == (1 if c["case"]["transpose"] else 0), c["id"]


@pytest.mark.parametrize("entry", DATA["cases"], ids=[c["id"] for c in DATA["cases"]])
def test_plan_equals_torch(entry, kernel_facts):
    case = Case.from_dict(entry["case"])
    assert our_plan(case, kernel_facts) == layer_norm_launches(entry["launches"])
