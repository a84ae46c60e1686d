"""CPU: the emulator's rsqrt(double) against bits measured on the H100, and its exact DFMA.

reimpl/emulator/rsqrt64_table.npz (scripts/gpu/rsqrt64_table.py, run on the GPU) holds the measured
MUFU.RSQ64H estimates, a few thousand (input, output) pairs of the GPU's rsqrt(double), specials
included, and the counts of the GPU-side checks. The model must give exactly the recorded bits.
"""
import numpy as np
import pytest

from reimpl.emulator import fp
from reimpl.emulator import rsqrt as R

needs_table = pytest.mark.skipif(
    not R.TABLE64_PATH.is_file(),
    reason=f"{R.TABLE64_PATH} absent: make it on a CUDA machine with "
           f"`python {R.GENERATOR64} reimpl/emulator/rsqrt64_table.npz`")


@needs_table
def test_table_is_stamped_and_its_gpu_checks_found_no_mismatch():
    t = R.load_table64()
    meta = t["meta"]
    assert t["rsq64h_delta"].shape == (2, 1 << 20) and int(t["scaling_mismatches"]) == 0
    for key in ("device", "driver", "torch", "nvrtc", "date", "command", "arch"):
        assert meta.get(key), key
    checks = meta["checks"]
    assert checks["rsq64h_every_positive_normal_high_word"]["compared"] == 0x7FF00000 - 0x00100000
    assert checks["rsq64h_every_positive_normal_high_word"]["nonzero_low_words"] == 0
    assert checks["numpy_model_vs_gpu"]["compared"] >= 10_000_000
    assert checks["sequence_random_bit_patterns"]["compared"] >= 1 << 30
    assert checks["RowwiseMomentsCUDAKernel_double_rstd"]["compared"] > 1000
    assert all(c["mismatches"] == 0 for c in checks.values()), checks


@needs_table
def test_model_reproduces_every_recorded_gpu_result():
    t = R.load_table64()
    x, want = t["samples_in"], t["samples_out"]
    got = R.rsqrt64(x.view(np.float64)).view(np.uint64)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(f"{int(x[i]):016x}", f"{int(got[i]):016x}", f"{int(want[i]):016x}") for i in bad[:10]]


@needs_table
def test_recorded_samples_cover_every_input_class():
    x = R.load_table64()["samples_in"]
    f = x.view(np.float64)
    hi = (x >> np.uint64(32)).astype(np.int64)
    exp = (hi >> 20) & 0x7FF
    assert {0x0, 0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000} <= set(x.tolist())
    assert np.isnan(f).sum() >= 4 and (np.signbit(f) & ~np.isnan(f) & (f != 0)).sum() >= 3
    assert ((exp == 0) & (x != 0)).sum() >= 100          # subnormals
    assert ((exp == 2046) & (f > 0)).sum() >= 10         # near overflow: y*y goes subnormal there
    assert ((x & np.uint64((1 << 52) - 1)) == 0).sum() >= 50   # normal powers of two


@needs_table
def test_model_is_within_one_ulp_of_the_correctly_rounded_value():
    rng = np.random.default_rng(3)
    x = np.abs(rng.standard_normal(3000)) * 2.0 ** rng.integers(-1070, 1020, 3000)
    got = R.rsqrt64(x)
    exact = np.array([R._rsqrt64_scalar(float(v)) for v in x])
    assert np.abs(got.view(np.int64) - exact.view(np.int64)).max() <= 1


def _exact_fma_cases(rng, n):
    out = []
    a, b, c = rng.standard_normal((3, n))
    out.append((a, b, c))
    out.append((a, b, -(a * b) * (1 + rng.integers(-3, 4, n) * 2.0 ** -52)))          # cancellation
    s = lambda: rng.standard_normal(n) * 2.0 ** rng.integers(-1060, 1020, n)  # noqa: E731
    out.append((s(), s(), s()))                                                         # every scale
    m = lambda: np.round(rng.uniform(1, 2, n) * 2 ** 26) / 2 ** 26  # noqa: E731
    near = rng.choice([-1, 1], n) * 2.0 ** rng.integers(-60, 3, n) * np.round(rng.uniform(1, 2, n) * 2 ** 10) / 2 ** 10
    out.append((m(), m(), near))                                                        # ties and near-ties
    bits = rng.integers(0, 2 ** 64, (3, n), dtype=np.uint64).view(np.float64)
    out.append(tuple(bits))                                                             # any pattern
    return out


def test_vectorised_dfma_equals_the_exact_scalar_dfma():
    rng = np.random.default_rng(7)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
                         1.7976931348623157e308, 1.0, -1.0, 0.375, 0.5])
    grid = np.array(np.meshgrid(specials, specials, specials)).reshape(3, -1)
    for a, b, c in _exact_fma_cases(rng, 4000) + [tuple(grid)]:
        got, want = fp.fma64_vec(a, b, c), fp.fma64(a, b, c)
        same = (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), (a[~same][:3], b[~same][:3], c[~same][:3], got[~same][:3], want[~same][:3])
