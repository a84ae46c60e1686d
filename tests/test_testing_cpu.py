"""reimpl.testing on the CPU: the variant model against the emulator, the bit report, the diagnosis
naming each planted change, the planted builds compiling, the judge, its CLI and pytest plugin, and
batch invariance. The GPU half (planted kernels on the H100, torch's own paths) is
tests/gpu/test_judge_gpu.py."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reimpl.emulator import fused_rms_norm, native_layer_norm
from reimpl.emulator import variants as V
from reimpl.emulator.block import make_block
from reimpl.emulator.fp import BFLOAT16, FLOAT, HALF, float_to_bf16_bits
from reimpl.emulator.layer_norm_kernel import compute_stats
from reimpl.testing.bits import compare, ulp_distance
from reimpl.testing.diagnosis import Rows, diagnose

ROOT = Path(__file__).resolve().parents[1]
TYPES = {"float32": FLOAT, "float16": HALF, "bfloat16": BFLOAT16}


def _rows(T, rows, N, kind="normal", seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, N)).astype(np.float32)
    x = {"normal": x, "offset": x + 1e3, "subnormal": x * np.float32(1e-39), "small": x * 1e-3}[kind]
    if kind == "specials":
        x[0, 3], x[1, 5], x[2, 7] = np.nan, np.inf, -np.inf
    w, b = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    cv = (lambda a: float_to_bf16_bits(a)) if T is BFLOAT16 else (lambda a: a.astype(T.storage))
    return cv(x), cv(w), cv(b)


def _bits(a):
    return np.asarray(a).view(np.uint8)


@pytest.mark.parametrize("dtype", list(TYPES))
@pytest.mark.parametrize("N", [4, 8, 12, 100, 768, 1024, 2052, 5120])
@pytest.mark.parametrize("kind", ["normal", "offset", "subnormal"])
def test_torch_variant_is_the_emulator(dtype, N, kind):
    """Variant() is torch's vectorized kernel: every affine combination, LayerNorm and RMSNorm,
    output and statistics equal the emulator's (itself bit-exact against the H100) bit for bit."""
    T = TYPES[dtype]
    x, w, b = _rows(T, 6, N, kind, seed=N)
    for wi, bi in ((w, b), (w, None), (None, b), (None, None)):
        ye, me, re = native_layer_norm(x, (N,), wi, bi, 1e-5)
        yv, mv, rv = V.forward_rows(V.TORCH, "layer_norm", T, x, wi, bi, 1e-5)
        assert _bits(ye).tobytes() == _bits(yv).tobytes()
        assert me.reshape(-1).tobytes() == mv.tobytes() and re.reshape(-1).tobytes() == rv.tobytes()
        ye, re = fused_rms_norm(x, (N,), wi, 1e-5)
        yv, _, rv = V.forward_rows(V.TORCH, "rms_norm", T, x, wi, None, 1e-5)
        assert _bits(ye).tobytes() == _bits(yv).tobytes() and re.reshape(-1).tobytes() == rv.tobytes()


@pytest.mark.parametrize("block_y", [1, 2, 8, 16])
def test_block_variants_follow_compute_stats(block_y):
    """The thread-count variants are torch's compute_stats on a (32, block_y) block, as the
    emulator runs it."""
    x, _, _ = _rows(FLOAT, 4, 2048, "offset", seed=block_y)
    _, mean, _ = V.forward_rows(V.Variant(block_y=block_y), "layer_norm", FLOAT, x)
    for r in range(4):
        blk = make_block(0, (32, block_y, 1), 6 * block_y * 4)
        with np.errstate(all="ignore"):
            wd = compute_stats(blk, FLOAT, False, x[r], 2048, blk.shared.view(np.float32))
        assert wd.mean[0].tobytes() == mean[r].tobytes()


def test_every_single_variant_changes_some_bits():
    """No switch is dead: each one gives other bits than torch's on rows chosen to show it. N = 1000
    leaves threads with unequal counts (250 vectors on 128 threads): with equal power-of-two counts
    both weights of a merge are exactly 1/2 and the operand order cannot show."""
    for key, (v, _) in V.SINGLE.items():
        kind = "subnormal" if key == "ftz" else "offset"
        x, w, b = _rows(FLOAT, 16, 1000, kind, seed=3)
        y0, m0, r0 = V.forward_rows(V.TORCH, "layer_norm", FLOAT, x, w, b)
        y1, m1, r1 = V.forward_rows(v, "layer_norm", FLOAT, x, w, b)
        assert (y0.tobytes(), m0.tobytes(), r0.tobytes()) != (y1.tobytes(), m1.tobytes(), r1.tobytes()), key


# ---- the bit report -------------------------------------------------------------------------------
def test_ulp_distance_and_report():
    one = np.float32(1)
    a = np.array([one, np.nextafter(one, np.float32(2)), 0.0, -0.0, np.nan, 1.0, -1e-45, np.inf], np.float32)
    b = np.array([one, one, -0.0, 0.0, np.nan, np.nan, 1e-45, 3.0], np.float32)
    d = ulp_distance(a.view(np.uint32), b.view(np.uint32), "float32")
    assert list(d[:7]) == [0, 1, 0, 0, 0, 0, 2]     # +-0 are neighbours at distance 0; NaN counts 0
    rep = compare("out", a.reshape(2, 4), b.reshape(2, 4))
    # +0/-0 differ in bits; NaN vs NaN is equal; 1.0 vs NaN is a NaN mismatch; inf vs 3 differs
    assert rep.differ == 6 and rep.rows == [0, 1]
    assert (1, 1) in rep.nan_mismatch and (1, 3) in rep.inf_mismatch
    assert rep.first["index"] == (0, 1) and rep.first["yours_hex"] == "0x3f800001"
    assert rep.first["torch_hex"] == "0x3f800000" and rep.first["ulp"] == 1
    assert "6 of 8 elements differ" in str(rep)


def test_bfloat16_report_and_histogram():
    a = np.array([0x3F80, 0x3F81, 0x3F90, 0x7FC0], np.uint16)
    b = np.array([0x3F80, 0x3F80, 0x3F80, 0x3F80], np.uint16)
    rep = compare("out", a, b, "bfloat16")
    assert rep.differ == 3 and rep.max_ulp == 16 and rep.histogram == {"1": 1, "9-16": 1}
    assert rep.nan_mismatch == [(3,)] and rep.first["yours"] == pytest.approx(1.0078125)


# ---- the diagnosis ----------------------------------------------------------------------------------
@pytest.mark.parametrize("key", list(V.SINGLE))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_diagnosis_names_the_planted_variant(key, dtype):
    """Rows computed with one change are diagnosed as that change (with the statistics returned,
    as a kernel returning mean and rstd does); torch's own computation is not among the answers."""
    T = TYPES[dtype]
    kind = "subnormal" if key == "ftz" else "offset"
    x, w, b = _rows(T, 32, 1000, kind, seed=11)  # unequal counts per thread: see above
    y, m, r = V.forward_rows(V.SINGLE[key][0], "layer_norm", T, x, w, b, 1e-5)
    d = diagnose(Rows("layer_norm", dtype, x, w, b, 1e-5, y, m, r))
    assert key in d.reproduced_by and "torch" not in d.reproduced_by, str(d)


def test_diagnosis_says_when_nothing_reproduces():
    """Bits no variant makes (the output shifted by one ULP): the closest variant and the step at
    which the user's numbers leave it."""
    x, w, b = _rows(FLOAT, 8, 256, "normal", seed=5)
    y, m, r = V.forward_rows(V.TORCH, "layer_norm", FLOAT, x, w, b)
    y = (y.view(np.uint32) + 1).view(np.float32)
    d = diagnose(Rows("layer_norm", "float32", x, w, b, 1e-5, y, m, r))
    assert not d.reproduced_by and d.first_divergence.startswith("the output step")
    r2 = (r.view(np.uint32) + 1).view(np.float32)
    d = diagnose(Rows("layer_norm", "float32", x, w, b, 1e-5, y, m, r2))
    assert d.first_divergence.startswith("rstd")


def test_rows_round_trip(tmp_path):
    x, w, b = _rows(BFLOAT16, 4, 64, seed=2)
    y, m, r = V.forward_rows(V.SINGLE["eps_outside"][0], "layer_norm", BFLOAT16, x, w, b, 1e-5)
    Rows("layer_norm", "bfloat16", x, w, b, 1e-5, y, m, r).save(tmp_path / "rows.npz")
    back = Rows.load(tmp_path / "rows.npz")
    assert back.x.tobytes() == x.tobytes() and back.eps == 1e-5 and back.mean.tobytes() == m.tobytes()
    out = subprocess.run([sys.executable, "-m", "reimpl", "judge", "--from", str(tmp_path / "rows.npz")],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert "reproduced exactly by: eps_outside" in out


# ---- planted builds -------------------------------------------------------------------------------
def test_planted_builds_compile_and_differ():
    """Every planted build compiles with NVRTC for sm_90, and each one's code differs from the
    torch build's (a misspelt macro would leave it equal)."""
    from reimpl.testing import planted
    base = planted.build("torch", "sm_90")
    for key in planted.BUILDS:
        kernels = planted.build(key, "sm_90")
        assert set(kernels) == set(planted.name_expressions())
        if key != "torch":
            assert any(kernels[e][0] != base[e][0] for e in kernels), key
    assert set(planted.BUILDS) | {"fallback"} == set(V.SINGLE) | {"torch"}
    opts = planted.options("ftz", "sm_90")
    assert "-ftz=true" in opts and "-ftz=false" not in opts


# ---- the judge, its CLI and plugin, batch invariance ---------------------------------------------------
def _cases():
    from reimpl.checks.cases import Case
    return [Case("layer_norm", "fp32", (16, 1024)), Case("layer_norm", "bf16", (8, 768), values="offset"),
            Case("rms_norm", "fp16", (8, 1024), seed=4)]


def test_judge_passes_torch_and_diagnoses_a_change():
    from reimpl.testing import judge, planted
    cases = _cases()
    for op in ("layer_norm", "rms_norm"):
        mine = [c for c in cases if c.op == op]
        assert judge(planted.on_cpu("torch", op), op, mine, device="cpu").ok
    v = judge(planted.on_cpu("one_pass"), "layer_norm", cases[:2], device="cpu")
    assert not v.ok
    for r in v.failed:
        assert "one_pass" in r.diagnosis.reproduced_by
    assert "give torch's bits" in v.summary() and "one_pass *" in str(v)


def test_judge_reports_a_raising_kernel():
    from reimpl.testing import judge

    def broken(x, ns, w, b, eps):
        raise RuntimeError("launch failed")
    v = judge(broken, "layer_norm", _cases()[:1], device="cpu")
    assert not v.ok and "RuntimeError: launch failed" in str(v)


def test_judge_backward_on_the_cpu():
    """Backward: the emulator's dX/dgamma/dbeta as the reference; torch's CPU LayerNorm is not
    torch's GPU bits, and the report names which gradients differ."""
    import torch.nn.functional as F
    from reimpl.checks.cases_backward import BackwardCase
    from reimpl.testing import judge
    case = BackwardCase("layer_norm", "fp32", (16, 1024))
    v = judge(F.layer_norm, "layer_norm", [case], device="cpu", backward=True)
    assert v.results[0].differences[0].output == "dX"
    assert [d.output for d in v.results[0].differences] == ["dX", "dgamma", "dbeta"]
    assert not v.ok  # CPU kernels are not the H100's


def test_cli_judge_module_function(tmp_path):
    (tmp_path / "mine.py").write_text("from reimpl.testing import planted\nln = planted.on_cpu('div_sqrt')\n")
    res = subprocess.run([sys.executable, "-m", "reimpl", "judge", f"{tmp_path / 'mine.py'}:ln", "--device", "cpu",
                          "--dtypes", "bf16", "--save", str(tmp_path / "rows.npz")],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 1, res.stderr
    assert "reproduced exactly by: div_sqrt" in res.stdout and (tmp_path / "rows.npz").exists()


def test_pytest_plugin_three_line_test(pytester):
    """A user's test file of three lines, parametrized by the plugin's fixture (entry point pytest11)."""
    pytester.makepyfile(test_mine="""
        from reimpl.testing import assert_matches_torch, planted
        def test_ln(layer_norm_case):
            assert_matches_torch(planted.on_cpu("two_pass"), "layer_norm", layer_norm_case, device="cpu")
    """)
    res = pytester.runpytest("--reimpl-dtypes", "fp32", "-k", "64x1024-wb-normal or 32x1024-wb-offset", "-q")
    out = res.stdout.str()
    assert "layer_norm-fp32-64x1024-wb-normal" in out and "reproduced exactly by: two_pass" in out
    res.assert_outcomes(failed=2)


def test_batch_invariance_checks():
    import torch.nn.functional as F
    from reimpl.testing import batch_invariance, planted
    rep = batch_invariance(planted.on_cpu("torch"), "layer_norm", "fp32", N=256, M=16, device="cpu")
    assert rep.ok, str(rep)
    tp = planted.on_cpu("two_pass")
    torch_ = planted.on_cpu("torch")

    def by_batch(x, ns, w, b, eps):  # another path once the batch is large: not batch-invariant
        return (tp if x.shape[0] > 8 else torch_)(x, ns, w, b, eps)
    rep = batch_invariance(by_batch, "layer_norm", "fp32", N=256, M=16, device="cpu")
    failed = {c.name for c in rep.checks if not c.ok}
    assert {"alone", "alone_view", "first_7", "first_8"} <= failed and "rolled" not in failed
    assert "FAIL" in str(rep)
    rep = batch_invariance(F.layer_norm, "layer_norm", "bf16", N=256, M=16, device="cpu", backward=True)
    assert {c.output for c in rep.checks} == {"dX", "dweight", "dbias"}
