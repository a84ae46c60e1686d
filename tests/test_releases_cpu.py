"""CPU: the version matrix (reference/torch_versions.json, written by scripts/torch_versions.py from
the wheels) agrees with torch 2.11's recorded kernel symbols and with our own instantiations; its
facts hold together; `doctor`'s verdicts follow from it; and, where the extracted cubins are in the
cache, each release's kernels map onto ours (no GPU needed)."""
import json
from pathlib import Path

import pytest

from reimpl.checks import doctor
from reimpl.mirror.kernel_table import all_instantiations
from reimpl.upstream import releases

ROOT = Path(__file__).resolve().parents[1]
MATRIX = json.loads(releases.JSON.read_text())


def test_pin_entry_is_torch_2_11s_own_symbol_list():
    symbols = {l.strip() for l in (ROOT / "reference" / "torch_kernel_symbols.txt").read_text().splitlines()
               if l.startswith("_Z") and "layer_norm_kernel_cu" in l}
    pin = MATRIX["releases"]["2.11.0"]
    assert pin["git"] == "70d99e998b4955e0049d13a98d77ae1b14db1f45" and pin["cuda"] == "13.0"
    mangled = {k["mangled"] for k in pin["kernels"].values()}
    assert len(mangled) == 184 and mangled <= symbols


def test_pin_entry_names_exactly_our_instantiations():
    ours = {k.name for k in all_instantiations()}
    theirs = {s[s.index("::(anonymous namespace)::") + 25:s.index(">(") + 1] for s in MATRIX["releases"]["2.11.0"]["kernels"]}
    assert ours == theirs


def test_release_facts():
    r = MATRIX["releases"]
    assert r["2.12.1"]["versus_pin"]["fp_identical"] == 184 and not r["2.12.1"]["versus_pin"]["removed"]
    for v in ("2.13.0", "2.14.1"):
        assert r[v]["versus_pin"]["kernels"] == 120 and len(r[v]["versus_pin"]["removed"]) == 64
        assert all(k.startswith("GammaBetaBackwardCUDAKernelTemplate") for k in r[v]["versus_pin"]["removed"])
    changed = r["2.14.1"]["versus_pin"]["signature_changed"]
    assert len(changed) == 16
    assert all(("RowwiseMomentsCUDAKernel" in c or "LayerNormForwardCUDAKernel" in c) and ">(long, long" in c
               for c in changed)


def _gpu(mismatch=0, absent=0):
    fam = {"cases": 10, "mismatched_cases": mismatch, "absent": absent}
    return {"device": "GPU", "releases": {"2.13.0": {"forward": {"forward_vectorized": fam},
                                                     "backward": {"gamma_beta": dict(fam, mismatched_cases=0)}}}}


def test_doctor_verdicts():
    pin = "70d99e998b4955e0049d13a98d77ae1b14db1f45"
    assert doctor.verdict("2.11.0+cu130", pin, MATRIX, {})[0] == doctor.EXACT
    assert doctor.verdict("2.11.0+cu130", "0" * 40, MATRIX, {})[0] == doctor.UNTESTED  # another commit
    assert doctor.verdict("2.13.0+cu130", "x", MATRIX, _gpu())[0] == doctor.PROVEN
    v, why = doctor.verdict("2.13.0+cu130", "x", MATRIX, _gpu(mismatch=3))
    assert v == doctor.DIFFER and "forward_vectorized" in why and "gamma_beta" not in why
    assert doctor.verdict("2.13.0", "x", MATRIX, _gpu(absent=1))[0] == doctor.DIFFER
    assert doctor.verdict("2.99.0", "x", MATRIX, _gpu())[0] == doctor.UNTESTED


def test_doctor_reads_the_committed_gpu_matrix():
    for v in ("2.12.1", "2.13.0", "2.14.1"):
        assert doctor.verdict(v + "+cu130", "x")[0] == doctor.PROVEN


@pytest.mark.parametrize("version,count,extra", [("2.11.0", 184, 0), ("2.12.1", 184, 0), ("2.13.0", 120, 0),
                                                 ("2.14.1", 120, 16)])
def test_release_cubin_maps_onto_our_kernels(version, count, extra):
    from reimpl.checks.releases import cubin_path, release_functions
    if not cubin_path(version).is_file():
        pytest.skip(f"{cubin_path(version)} absent: `python scripts/torch_versions.py` extracts it (downloads ~530 MB)")
    data, functions, longer = release_functions(version)
    assert len(functions) == count and len(longer) == extra
    assert releases.sha256_file(cubin_path(version)) == MATRIX["releases"][version]["cubin_sha256"]
