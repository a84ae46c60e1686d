"""The backward emulator against torch's own bits, recorded on the H100 by
scripts/gpu/golden_vectors_backward.py (tests/golden/emulator_golden_backward.npz; the tests skip, naming the
file and its generator, only while it is absent). Every output must match bit for bit, NaN by
position: the small cases (both grad-input kernels, every GammaBeta tile, aligned or not, every
dtype, output_mask and value kind), the partial GammaBeta path ended by torch's .sum(0), and .sum(0)
alone on the (R, N) shapes that path makes.
"""
import importlib.util
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from reimpl.checks.cases_backward import BackwardCase
from reimpl.emulator import api
from reimpl.emulator.fp import BY_NAME
from reimpl.emulator.layer_norm_backward import setReduceConfig, torch_sum0

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(os.environ.get("REIMPL_EMULATOR_GOLDEN_BACKWARD", ROOT / "tests" / "golden" / "emulator_golden_backward.npz"))
SCRIPT = ROOT / "scripts" / "gpu" / "golden_vectors_backward.py"
STORAGE = {"fp32": np.float32, "fp64": np.float64, "fp16": np.float16, "bf16": np.uint16}
ACC = {"fp32": np.float32, "fp64": np.float64, "fp16": np.float32, "bf16": np.float32}
ELEMENT = {"fp32": BY_NAME["float"], "fp64": BY_NAME["double"], "fp16": BY_NAME["c10::Half"],
           "bf16": BY_NAME["c10::BFloat16"]}

needs_golden = pytest.mark.skipif(
    not GOLDEN.is_file(),
    reason=f"{GOLDEN} absent: make it on a CUDA machine with `python {SCRIPT.relative_to(ROOT)} {GOLDEN}`")


def _script():
    spec = importlib.util.spec_from_file_location("golden_vectors_backward", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _load():
    if not GOLDEN.is_file():
        return {}, {"cases": [], "tall": [], "sums": []}
    with np.load(GOLDEN) as z:
        data = {k: z[k] for k in z.files}
    return data, json.loads(str(data.pop("meta")))


DATA, META = _load()
CASES = [BackwardCase.from_dict(c) for c in META["cases"]]
G = _script()


def _same_bits(got, want):
    """Bit equality, NaN compared by position only."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    nan_g, nan_w = np.isnan(_f64(got)), np.isnan(_f64(want))
    np.testing.assert_array_equal(nan_g, nan_w)
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    np.testing.assert_array_equal(got[~nan_g].view(width), want[~nan_w].view(width))


def _f64(a):
    if a.dtype == np.uint16:   # bfloat16 bits
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def _compare(names, got, prefix, storage):
    for name, g in zip(names, got):
        key = f"{prefix}_{name}"
        if key not in DATA:
            assert g is None, f"{name}: torch returned None, the emulator did not"
            continue
        assert g is not None, f"{name}: the emulator returned None"
        _same_bits(g.reshape(-1), DATA[key].view(storage).reshape(-1))


@needs_golden
def test_golden_file_is_stamped_and_covers_every_path():
    assert META["torch"].startswith("2.11") and META["git"] == "70d99e998b4955e0049d13a98d77ae1b14db1f45"
    assert "H100" in META["device"]
    assert len(CASES) >= 200
    assert {c.dtype for c in CASES} == set(STORAGE) and {c.op for c in CASES} == {"layer_norm", "rms_norm"}
    assert {tuple(c.output_mask) for c in CASES if c.op == "layer_norm"} == {
        (a, b, c) for a in (False, True) for b in (False, True) for c in (False, True)}
    assert {"subnormal", "inf", "nan"} <= {c.values for c in CASES} & {c.dy_values for c in CASES}


def _emulate(case: BackwardCase, get):
    ns = case.normalized_shape
    dy, x = get("dy").reshape(case.shape), get("x").reshape(case.shape)
    w, b = get("w"), get("b")
    w = None if w is None else w.reshape(ns)
    b = None if b is None else b.reshape(ns)
    if case.op == "layer_norm":
        return api.native_layer_norm_backward(dy, x, ns, get("mean", True), get("rstd", True), w, b, case.output_mask,
                                              offsets=(case.dy_offset, case.x_offset, case.w_offset, case.b_offset))
    return api.fused_rms_norm_backward(dy, x, ns, get("rstd", True), w, case.output_mask,
                                       offsets=(case.dy_offset, case.x_offset, case.w_offset))


@needs_golden
@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.id for c in CASES])
def test_backward_matches_torch_bits(i):
    case = CASES[i]

    def get(name, acc=False):
        a = DATA.get(f"b{i}_{name}")
        return None if a is None else a.view(ACC[case.dtype] if acc else STORAGE[case.dtype])
    got = _emulate(case, get)
    _compare(case.output_names, got, f"b{i}", STORAGE[case.dtype])


@needs_golden
@pytest.mark.parametrize("i", range(len(META["tall"])),
                         ids=[f"{c['op']}-{c['dtype']}-{c['M']}x{c['N']}-m{''.join(str(int(m)) for m in c['mask'])}"
                              for c in META["tall"]])
def test_partial_path_matches_torch_bits(i):
    c = META["tall"][i]
    d = G.tall_inputs(c)
    assert G.digest(*d.values()) == c["sha256"], "counter_values no longer makes the recorded inputs"
    ns = (c["N"],)
    if c["op"] == "layer_norm":
        got = api.native_layer_norm_backward(d["dy"], d["x"], ns, d["mean"], d["rstd"], d["w"], d["b"], c["mask"])
        names = ("dX", "dgamma", "dbeta")
    else:
        got = api.fused_rms_norm_backward(d["dy"], d["x"], ns, d["rstd"], d["w"], c["mask"])
        names = ("dX", "dweight")
    _compare(names, got, f"t{i}", STORAGE[c["dtype"]])


@needs_golden
@pytest.mark.parametrize("i", range(len(META["sums"])),
                         ids=[f"{p['dtype']}-{p['R']}x{p['N']}-{p['kind']}" for p in META["sums"]])
def test_sum0_matches_torch_bits(i):
    p = META["sums"][i]
    a = G.probe_input(p)
    assert G.digest(a) == p["sha256"], "counter_values no longer makes the recorded inputs"
    _same_bits(torch_sum0(a, ELEMENT[p["dtype"]]), DATA[f"s{i}_out"].view(STORAGE[p["dtype"]]))


@needs_golden
@pytest.mark.parametrize("i", range(len(META["sums"])),
                         ids=[f"{p['dtype']}-{p['R']}x{p['N']}" for p in META["sums"]])
def test_sum0_launch_configuration_is_torchs(i):
    """setReduceConfig gives the block, grid and output vector size of the reduce_kernel torch ran."""
    p = META["sums"][i]
    (launch,) = [k for k in p["launches"] if "reduce_kernel" in k["kernel"]]
    m = re.match(r"void at::native::reduce_kernel<(\d+), (\d+), .*, (\d+), (\d+)> >\(", launch["kernel"])
    max_threads_over_vec, ovs, vt0, input_vec_size = map(int, m.groups())
    cfg = setReduceConfig(p["R"], p["N"], np.dtype(STORAGE[p["dtype"]]).itemsize,
                          sm_count=META["multiProcessorCount"], max_threads_per_sm=META["maxThreadsPerMultiProcessor"])
    assert (cfg.output_vec_size, vt0, input_vec_size) == (ovs, 4, 8 if p["dtype"] in ("fp16", "bf16") else 4)
    assert max_threads_over_vec == 512 // ovs
    assert list(cfg.block()) + [1] == launch["block"]
    assert list(cfg.grid()) + [1] == launch["grid"]
