"""The host dispatch of newer releases (reference/host_dispatch.json, read from dated copies) against
the mirror: where nothing changes on NVIDIA the launch plans are the same under every release's switch
(the GammaBeta tile table by M among them); where the huge-M buffers change, `release.use` reproduces
it; and the large-tensor results (results/large_tensor.json) say what the releases page says."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from reimpl.checks import cases_backward as B
from reimpl.checks.cases import Case
from reimpl.checks.plan import host_launches
from reimpl.mirror import release

ROOT = Path(__file__).resolve().parents[1]
HOST = json.loads((ROOT / "reference" / "host_dispatch.json").read_text())


def test_host_facts_name_their_copies_and_lines():
    keys = {c["key"] for c in HOST["copies"]}
    assert keys == {"bv", "ci", "lf", "at", "ee"}
    for c in HOST["copies"]:
        assert len(c["commit"]) == 40 and c["repo"].endswith("/pytorch")
    manifest = json.loads((ROOT / "reference" / "upstream.json").read_text())["symbols"]
    for name, f in HOST["functions"].items():
        # the pin's side is the manifest's range; a function the pin lacks has none
        assert f["pin"] == (manifest[name]["lines"] if name in manifest else None), name
        for key, entry in f["copies"].items():
            a, b = entry["lines"]
            assert key in keys and 0 < a <= b, name
    assert {c["name"] for c in HOST["launch_altering_on_nvidia"]} == {
        "row offsets in 64 bits", "a leading int64 M on the fallback forward kernels",
        "huge-M GammaBeta scratch buffers sized per tensor"}


def _gamma_beta(launches):
    return [l for l in launches if l.kernel.startswith("GammaBetaBackwardCUDAKernelTemplate")]


@pytest.mark.parametrize("version", release.RELEASES)
def test_tile_table_by_m_is_the_same_in_every_release(version):
    """The table recorded from every copy is the mirror's, under every release's switch."""
    table = HOST["gamma_beta_tile_table_nvidia"]
    assert set(table["same_in"]) == {"pin", "bv", "ci", "lf", "at", "ee"}
    want = {"M < 64": (1, 8, True), "64 <= M < 128": (8, 64, False), "128 <= M < 256": (16, 128, False),
            "M >= 256": (32, 256, False), "M > 65536 and N // 32 < sm_count // 2": (1, 32, True)}
    assert {r["condition"]: (r["threads"][1], r["rows_per_block"], r["flag"]) for r in table["rows"]} == want
    for M, cond, N in ((1, "M < 64", 1024), (63, "M < 64", 1024), (64, "64 <= M < 128", 1024),
                       (127, "64 <= M < 128", 1024), (128, "128 <= M < 256", 1024), (255, "128 <= M < 256", 1024),
                       (256, "M >= 256", 1024), (4096, "M >= 256", 1024),
                       (65537, "M > 65536 and N // 32 < sm_count // 2", 100)):
        with release.use(version):
            gb = _gamma_beta(host_launches(B.BackwardCase("layer_norm", "fp32", (M, N))))
        by, rows, flag = want[cond]
        assert len(gb) == 1 and gb[0].block[1] == by, (M, gb)
        assert f", {by}u, {rows}u, {str(flag).lower()}," in gb[0].kernel, gb[0].kernel


@pytest.mark.parametrize("version", release.RELEASES[1:])
def test_launch_plans_are_the_pins_under_every_release(version):
    """Every recorded-launch case: the same kernels, grids, blocks and shared memory as 2.11."""
    from reimpl.checks.cases import launch_cases
    cases = launch_cases()[::7] + B.launch_cases()[::7]
    for case in cases:
        pin = host_launches(case)
        with release.use(version):
            assert host_launches(case) == pin, case.id


def test_fallback_forward_takes_the_row_count_from_2_14():
    """2.14's fallback forward kernels take M first: recorded under the switch, refused by our 2.11
    build, and, being unread, the same bits on the emulator."""
    from reimpl.device import runtime
    from reimpl.emulator import native_layer_norm
    case = Case("layer_norm", "fp32", (37, 1022))       # N % 4 != 0: the fallback kernels
    args = case.make_args("cpu", values=False)
    for version, lead in (("2.13.0", ()), ("2.14.1", (37,))):
        with release.use(version), runtime.use(runtime.RecordingRuntime()) as rt:
            case.run_host(*args)
        assert [(l.kernel.split("<")[0], l.grid, l.block) for l in rt.launches] == [
            ("RowwiseMomentsCUDAKernel", (37, 1, 1), (512, 1, 1)), ("LayerNormForwardCUDAKernel", (37, 1, 1), (256, 1, 1))]
        for kernel, _, a in rt.calls:
            assert tuple(a[:len(lead)]) == lead and a[len(lead)] == 1022, (version, a)
    kernel = rt.calls[0][0]
    with pytest.raises(runtime.KernelMissing, match="2.14"):
        runtime.TorchCupyRuntime._make_launcher(None, 0, kernel)  # refused before any device work
    x = np.random.default_rng(1).standard_normal((5, 1022)).astype(np.float32)
    pin = native_layer_norm(x, (1022,))
    with release.use("2.14.1"):
        later = native_layer_norm(x, (1022,))
    assert all(a.tobytes() == b.tobytes() for a, b in zip(pin, later))


def test_release_switch_is_per_context():
    assert release.current() == release.PIN
    with release.use("2.14.1"):
        assert release.at_least("2.14.0")
    assert not release.at_least("2.14.0")
    with pytest.raises(ValueError):
        with release.use("2.10.0"):
            pass


def _huge_m_rows(ns, seed=0):
    rng = np.random.default_rng(seed)
    M = 65537
    shape = (M, *ns)
    x = rng.standard_normal(shape).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    w, b = rng.standard_normal(ns).astype(np.float32), rng.standard_normal(ns).astype(np.float32)
    flat = x.reshape(M, -1)
    mean = flat.mean(1).astype(np.float32).reshape((M,) + (1,) * len(ns))
    rstd = (1 / np.sqrt(flat.var(1) + 1e-5)).astype(np.float32).reshape(mean.shape)
    return dy, x, mean, rstd, w, b


def test_huge_m_buffers_under_each_release():
    """2.11 cannot run a two-dim normalized_shape on the huge-M path (its kernel writes past the
    buffer) and returns an empty dbeta when dgamma is not wanted; under 2.14's switch both come back
    whole, within float32 summation error of the exact sums. A one-dim shape with dgamma is the
    same in both, bit for bit."""
    from reimpl.emulator import native_layer_norm_backward as bwd
    ns = (2, 50)
    dy, x, mean, rstd, w, b = _huge_m_rows(ns)
    with pytest.raises(NotImplementedError, match="past the\\s+end of the buffer|past the end"):
        bwd(dy, x, ns, mean, rstd, w, b, (False, True, True))
    with release.use("2.14.1"):
        _, dg, db = bwd(dy, x, ns, mean, rstd, w, b, (False, True, True))
    xhat = (x.astype(np.float64) - mean) * rstd
    assert dg.shape == ns and db.shape == ns
    assert np.abs(dg - (dy * xhat).sum(0)).max() < 1e-2 and np.abs(db - dy.astype(np.float64).sum(0)).max() < 1e-2
    dy1, x1, m1, r1 = dy.reshape(65537, 100), x.reshape(65537, 100), mean.reshape(-1, 1), rstd.reshape(-1, 1)
    w1, b1 = w.reshape(100), b.reshape(100)
    assert bwd(dy1, x1, (100,), m1, r1, w1, b1, (False, False, True))[2].shape == (0,)
    with release.use("2.14.1"):
        db14 = bwd(dy1, x1, (100,), m1, r1, w1, b1, (False, False, True))[2]
        dg14 = bwd(dy1, x1, (100,), m1, r1, w1, b1, (False, True, False))[1]
    assert db14.shape == (100,) and np.abs(db14 - dy1.astype(np.float64).sum(0)).max() < 1e-2
    assert dg14.tobytes() == bwd(dy1, x1, (100,), m1, r1, w1, b1, (False, True, False))[1].tobytes()


LARGE = ROOT / "results" / "large_tensor.json"


@pytest.mark.skipif(not LARGE.is_file(), reason="results/large_tensor.json is not committed")
def test_large_tensor_results():
    d = json.loads(LARGE.read_text())
    assert d["device"].startswith("NVIDIA H100") and d["torch"].startswith("2.11.0")
    by = {(r["shape"], r["implementation"]): r for r in d["records"]}
    for (shape, impl), r in by.items():
        if shape == "past_2^31":
            assert not r["forward_rows_wrong"] and not r["dx_rows_wrong"], impl
    wrong = by[("past_2^32", "torch 2.11")]
    assert wrong["forward_rows_wrong"] == wrong["dx_rows_wrong"] and all(
        r * 1024 >= 2 ** 32 for r in wrong["forward_rows_wrong"])
    assert wrong["forward_rows_wrong"] == [r for r in wrong["rows_checked"] if r * 1024 >= 2 ** 32]
    for impl in ("reimpl (mirror)", "torch 2.11.0 kernels"):
        assert by[("past_2^32", impl)]["forward_rows_wrong"] == wrong["forward_rows_wrong"]
        assert by[("past_2^32", impl)]["dx_rows_wrong"] == wrong["dx_rows_wrong"]
    for impl in ("torch 2.14.1 kernels", "reimpl (fast)"):
        assert not by[("past_2^32", impl)]["forward_rows_wrong"] and not by[("past_2^32", impl)]["dx_rows_wrong"]
