"""GPU: torch releases' own layer_norm_kernel.cu kernels (sm_90 cubins read off their wheels by
scripts/torch_versions.py) run under our 2.11 host dispatch and are compared with the mirror bit for
bit, per kernel family. The control: the 2.11.0 wheel's kernels give torch's own bits. A family
whose kernels carry the pin's floating-point instruction sequences (reference/torch_versions.json)
must give the mirror's bits; the others are measured and reported. With REIMPL_RELEASES_OUT=path,
the counts go to that JSON file (results/torch_versions_gpu.json)."""
import json
import os

import pytest
import torch

from reimpl.checks import cases, cases_backward as bwd
from reimpl.checks.releases import compare, cubin_path, fp_identical_families
from reimpl.upstream import releases

pytestmark = pytest.mark.gpu
RESULTS: dict = {}


def _forward():
    return (cases.path_cases() + cases.value_cases() + cases.eps_cases() + cases.layout_cases()
            + cases.random_cases(300))


def _backward():
    return bwd.path_cases() + bwd.mask_cases() + bwd.value_cases() + bwd.layout_cases() + bwd.random_cases(150)


def _need(version):
    path = cubin_path(version)
    if not path.is_file():
        pytest.skip(f"{path} absent: `python scripts/torch_versions.py` extracts it from the wheel")


def _save():
    out = os.environ.get("REIMPL_RELEASES_OUT")
    if out:
        from reimpl.checks.record import stamp
        import cupy
        doc = {**stamp(), "cupy": cupy.__version__, "method": "each release's kernels under our 2.11 host "
               "dispatch, against the mirror (for 2.11.0 also against torch)", "releases": RESULTS}
        with open(out, "w") as f:
            json.dump(doc, f, indent=1)


def test_pin_cubin_gives_torchs_bits():
    """The method's control: torch 2.11.0's own cubin, launched by our host code, equals torch."""
    _need(releases.PIN)
    counts = {**compare(releases.PIN, _forward(), against_torch=True),
              **{f"bwd_{k}": v for k, v in compare(releases.PIN, _backward(), against_torch=True).items()}}
    RESULTS.setdefault(releases.PIN, {})["control_against_torch"] = counts
    _save()
    assert "absent" not in counts and "bwd_absent" not in counts, counts
    assert all(r["mismatched_cases"] == 0 for r in counts.values()), counts


@pytest.mark.parametrize("version", releases.RELEASES)
def test_release_kernels_against_the_mirror(version):
    _need(version)
    matrix = json.loads(releases.JSON.read_text())
    torch.manual_seed(0)
    fwd, back = compare(version, _forward()), compare(version, _backward())
    same = fp_identical_families(version, matrix)
    RESULTS.setdefault(version, {}).update({"forward": fwd, "backward": back, "fp_identical_families": same})
    _save()
    for fam, r in {**fwd, **back}.items():
        if same.get(fam):
            assert r["mismatched_cases"] == 0, (version, fam, r)
