"""The forward emulator against torch's own bits, recorded on the H100 by scripts/gpu/golden_vectors.py.

Needs committed files made on a GPU: tests/golden/emulator_golden_forward.npz (torch's outputs),
reimpl/emulator/rsqrt_table.npz (the GPU's rsqrtf) and reimpl/emulator/rsqrt64_table.npz (its
MUFU.RSQ64H, for the double rsqrt); each test skips, naming the file and its generator, only while
a file is absent. Every output must match bit for bit (NaN by position), fp64 included.
"""
import json
import os
from pathlib import Path

import numpy as np
import pytest

from reimpl import emulator
from reimpl.checks.cases import Case
from reimpl.emulator import rsqrt

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(os.environ.get("REIMPL_EMULATOR_GOLDEN", ROOT / "tests" / "golden" / "emulator_golden_forward.npz"))
STORAGE = {"fp32": np.float32, "fp64": np.float64, "fp16": np.float16, "bf16": np.uint16}

needs_golden = pytest.mark.skipif(
    not GOLDEN.is_file(),
    reason=f"{GOLDEN} absent: make it on a CUDA machine with `python scripts/gpu/golden_vectors.py {GOLDEN}`")
needs_table = pytest.mark.skipif(
    not rsqrt.TABLE_PATH.is_file(),
    reason=f"{rsqrt.TABLE_PATH} absent: make it on a CUDA machine with "
           f"`python {rsqrt.GENERATOR} reimpl/emulator/rsqrt_table.npz`")
needs_table64 = pytest.mark.skipif(
    not rsqrt.TABLE64_PATH.is_file(),
    reason=f"{rsqrt.TABLE64_PATH} absent: make it on a CUDA machine with "
           f"`python {rsqrt.GENERATOR64} reimpl/emulator/rsqrt64_table.npz`")


def _load():
    if not GOLDEN.is_file():
        return {}, []
    with np.load(GOLDEN) as z:
        data = {k: z[k] for k in z.files}
    meta = json.loads(str(data.pop("meta")))
    return data, meta


DATA, META = _load()
CASES = [Case.from_dict(c) for c in META["cases"]] if META else []


def _values(key, case):
    a = DATA.get(key)
    return None if a is None else a.view(STORAGE[case.dtype])


def _same_bits(got, want):
    """Bit equality, NaN compared by position only."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    nan_g, nan_w = np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64))
    np.testing.assert_array_equal(nan_g, nan_w)
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    np.testing.assert_array_equal(got[~nan_g].view(width), want[~nan_w].view(width))


@needs_golden
def test_golden_file_is_stamped():
    assert META["torch"].startswith("2.11") and META["git"] == "70d99e998b4955e0049d13a98d77ae1b14db1f45"
    assert len(CASES) >= 200
    assert {c.dtype for c in CASES} == set(STORAGE) and {c.op for c in CASES} == {"layer_norm", "rms_norm"}


@needs_golden
@needs_table
@pytest.mark.parametrize("i", [pytest.param(i, marks=needs_table64) if c.dtype == "fp64" else i
                               for i, c in enumerate(CASES)], ids=[c.id for c in CASES])
def test_emulator_matches_torch_bits(i):
    case = CASES[i]
    got = emulator.run_case(case, *(_values(f"c{i}_{k}", case) for k in "xwb"))
    want = {n: DATA[f"c{i}_{n}"] for n in case.output_names}
    acc = np.float64 if case.dtype == "fp64" else np.float32
    got = dict(zip(case.output_names, got))
    M = int(np.prod(case.shape[:len(case.shape) - case.norm_ndim]))
    if "mean" in got:
        _same_bits(got["mean"].ravel(), want["mean"].view(acc).ravel())
    _same_bits(got["rstd"].ravel(), want["rstd"].view(acc).ravel())
    _same_bits(got["out"].reshape(M, -1), want["out"].view(STORAGE[case.dtype]).reshape(M, -1))


@needs_table
def test_rsqrt_table_rules_reproduce_gpu_specials():
    t = rsqrt.load_table()
    got = rsqrt.table_rsqrtf(t["specials_in"].view(np.float32), t).view(np.uint32)
    want = t["specials_out"]
    _same_bits(got.view(np.float32), want.view(np.float32))
    assert t["normal_delta"].shape == (2, 1 << 23) and t["subnormal_delta"].shape == (1 << 23,)
