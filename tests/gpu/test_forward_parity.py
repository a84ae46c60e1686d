"""GPU: the mirror's forward gives torch's bits: out, mean and rstd, for LayerNorm and RMSNorm,
every dtype, both kernel paths, affine or not, edge values, eps, layouts, and a random sweep."""
import pytest
import torch

from reimpl.checks import cases
from reimpl.checks.parity import compare_case
from reimpl.checks.parity import bit_mismatches
from tests.conftest import record

pytestmark = pytest.mark.gpu


def compare(case: cases.Case, group: str) -> list[str]:
    """Run torch and the mirror on the same inputs; count differing elements into the GPU summary."""
    elements, mismatches, bad = compare_case(case)
    record(group, elements, mismatches)
    return bad


@pytest.mark.parametrize("case", cases.shape_grid(), ids=lambda c: c.id)
def test_shapes(case):
    assert compare(case, "shape_grid") == []


@pytest.mark.parametrize("case", cases.path_cases(), ids=lambda c: c.id)
def test_paths(case):
    assert compare(case, "paths") == []


@pytest.mark.parametrize("case", cases.value_cases(), ids=lambda c: c.id)
def test_values(case):
    assert compare(case, "values") == []


@pytest.mark.parametrize("case", cases.eps_cases(), ids=lambda c: c.id)
def test_eps(case):
    assert compare(case, "eps") == []


@pytest.mark.parametrize("case", cases.layout_cases(), ids=lambda c: c.id)
def test_layouts(case):
    assert compare(case, "layouts") == []


def test_random_sweep():
    bad = []
    for case in cases.random_cases(2000):
        bad += compare(case, "random_sweep")
    assert bad == [], "\n".join(bad[:20])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_functional_forms_match_torch_functional(dtype):
    import reimpl
    g = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(3, 5, 96, device="cuda", generator=g).to(dtype)
    w = torch.randn(96, device="cuda", generator=g).to(dtype)
    b = torch.randn(96, device="cuda", generator=g).to(dtype)
    pairs = [(reimpl.layer_norm(x, (96,), w, b), torch.nn.functional.layer_norm(x, (96,), w, b)),
             (reimpl.layer_norm(x, [96]), torch.nn.functional.layer_norm(x, [96])),
             (reimpl.rms_norm(x, (96,), w), torch.nn.functional.rms_norm(x, (96,), w)),
             (reimpl.rms_norm(x, [96], None, 1e-6), torch.nn.functional.rms_norm(x, [96], None, 1e-6))]
    for o, t in pairs:
        assert bit_mismatches(o, t) == 0


def test_runs_on_the_current_stream():
    import reimpl
    from reimpl.device import runtime
    x = torch.randn(64, 1024, device="cuda")
    s = torch.cuda.Stream()
    rt = runtime.get()
    rt.record = []
    try:
        with torch.cuda.stream(s):
            torch.cuda._sleep(50_000_000)  # the side stream is busy for a while
            ours = reimpl.layer_norm(x, (1024,))
            done = torch.cuda.Event()
            done.record(s)
        assert not done.query(), "our kernel finished before the sleep queued ahead of it on the same stream"
        s.synchronize()
        assert [l.stream for l in rt.record] == [s.cuda_stream]
    finally:
        rt.record = None
    assert bit_mismatches(ours, torch.nn.functional.layer_norm(x, (1024,))) == 0


def test_both_launch_modes_agree():
    """CuPy's Function.__call__ and the preallocated driver launch run the same kernel identically."""
    from reimpl.device import runtime
    import reimpl
    x = torch.randn(33, 1000, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(1000, device="cuda", dtype=torch.bfloat16)
    outs = []
    for mode in ("cupy", "driver"):
        with runtime.use(runtime.TorchCupyRuntime(launch_mode=mode)):
            outs.append(reimpl.native_layer_norm(x, (1000,), w, None, 1e-5))
    for a, b, t in zip(*outs, torch.ops.aten.native_layer_norm(x, [1000], w, None, 1e-5)):
        assert bit_mismatches(a, t) == 0 and bit_mismatches(b, t) == 0
