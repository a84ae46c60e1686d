"""CPU-only: the order of additions written down in reimpl/emulator/gamma_beta_order.py (chains per
column, which rows each adds in which order, the tree, the partial path's chains stored in T and
torch's .sum(0)) gives torch's own dgamma and dbeta, bit for bit (NaN by position), as the H100
recorded them (tests/golden/emulator_golden_backward.npz, scripts/gpu/golden_vectors_backward.py):
every case there that asks for either (every GammaBeta tile, aligned or not, every dtype, output
mask and value kind) and every tall case of the partial path. The comparison can fail: another
split of the rows into chains, or another tree, gives other bits."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from reimpl.checks.cases_backward import BackwardCase
from reimpl.emulator import api
from reimpl.emulator import gamma_beta_order as G
from reimpl.emulator.fp import BY_NAME

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "emulator_golden_backward.npz"
STORAGE = {"fp32": np.float32, "fp64": np.float64, "fp16": np.float16, "bf16": np.uint16}
ACC = {"fp32": np.float32, "fp64": np.float64, "fp16": np.float32, "bf16": np.float32}
ELEMENT = {"fp32": BY_NAME["float"], "fp64": BY_NAME["double"], "fp16": BY_NAME["c10::Half"],
           "bf16": BY_NAME["c10::BFloat16"]}

needs_golden = pytest.mark.skipif(not GOLDEN.is_file(), reason=f"{GOLDEN} absent")


def _load():
    if not GOLDEN.is_file():
        return {}, {"cases": [], "tall": []}
    with np.load(GOLDEN) as z:
        data = {k: z[k] for k in z.files}
    return data, json.loads(str(data.pop("meta")))


DATA, META = _load()
CASES = [BackwardCase.from_dict(c) for c in META["cases"]]
WITH_GRADS = [i for i, c in enumerate(CASES) if any(c.output_mask[1:])]


def _golden_script():
    path = ROOT / "scripts" / "gpu" / "golden_vectors_backward.py"
    spec = importlib.util.spec_from_file_location("golden_vectors_backward", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _same(ours, theirs) -> bool:
    """Identical bits, NaN compared by position (its payload is the GPU's, not NumPy's)."""
    a, b = np.asarray(ours).reshape(-1), np.asarray(theirs).reshape(-1)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    f = (lambda v: (v.astype(np.uint32) << 16).view(np.float32)) if a.dtype == np.uint16 else (lambda v: v)
    nan = np.isnan(f(a)) & np.isnan(f(b))
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize]
    return bool(np.all((a.view(bits) == b.view(bits)) | nan)) and np.array_equal(np.isnan(f(a)), np.isnan(f(b)))


def _check(op, dtype, dy, x, mean, rstd, want_dg, want_db):
    dg, db = G.gamma_beta(ELEMENT[dtype], op == "rms_norm", dy, x, mean, rstd)
    if want_dg is not None:
        assert _same(dg, want_dg.view(STORAGE[dtype]))
    if want_db is not None:
        assert _same(db, want_db.view(STORAGE[dtype]))


@needs_golden
def test_the_golden_cases_cover_every_tile():
    tiles = {G.tile(int(np.prod(CASES[i].shape[:len(CASES[i].shape) - CASES[i].norm_ndim])),
                    int(np.prod(CASES[i].normalized_shape)), META["multiProcessorCount"]) [:2] for i in WITH_GRADS}
    assert {(1, 8), (8, 64), (16, 128), (32, 256)} <= tiles
    assert len(META["tall"]) >= 20


@needs_golden
@pytest.mark.parametrize("i", WITH_GRADS, ids=[CASES[i].id for i in WITH_GRADS])
def test_the_written_order_gives_torchs_bits(i):
    case = CASES[i]
    N = int(np.prod(case.normalized_shape))
    M = int(np.prod(case.shape)) // N if N else 0

    def get(name, acc=False):
        a = DATA.get(f"b{i}_{name}")
        return None if a is None else a.view(ACC[case.dtype] if acc else STORAGE[case.dtype])
    if M == 0 or N == 0:
        pytest.skip("no rows or no columns: torch launches no GammaBeta kernel")
    names = ("dgamma", "dbeta") if case.op == "layer_norm" else ("dweight", None)
    _check(case.op, case.dtype, get("dy").reshape(M, N), get("x").reshape(M, N), get("mean", True),
           get("rstd", True), DATA.get(f"b{i}_{names[0]}"), DATA.get(f"b{i}_{names[1]}") if names[1] else None)


@needs_golden
@pytest.mark.parametrize("i", range(len(META["tall"])),
                         ids=[f"{c['op']}-{c['dtype']}-{c['M']}x{c['N']}" for c in META["tall"]])
def test_the_partial_path_is_chains_in_T_then_torchs_sum(i):
    c = META["tall"][i]
    assert G.tile(c["M"], c["N"], META["multiProcessorCount"])[2] > 1
    d = _golden_script().tall_inputs(c)
    names = ("dgamma", "dbeta") if c["op"] == "layer_norm" else ("dweight", None)
    if names[1] and not c["mask"][1] and DATA.get(f"t{i}_dbeta") is not None:
        # torch 2.11 sizes the partial dbeta buffer from dgamma's: without dgamma it returns an
        # empty dbeta (reimpl/mirror/layer_norm_kernel.py), so no order is there to check
        assert DATA[f"t{i}_dbeta"].size == 0
        names = (names[0], None)
    _check(c["op"], c["dtype"], d["dy"].reshape(c["M"], c["N"]), d["x"].reshape(c["M"], c["N"]), d.get("mean"),
           d["rstd"], DATA.get(f"t{i}_{names[0]}"), DATA.get(f"t{i}_{names[1]}") if names[1] else None)


def test_another_order_differs():
    """Chains of rows Y apart instead of runs of k, or a tree that adds neighbours first, give other
    bits on the same inputs (the emulated kernel, torch's bits, is the reference here)."""
    M, N = 768, 33  # three whole tiles of 256 rows, 32 chains of 8 rows each
    rng = np.random.default_rng(1)
    dy, x = rng.standard_normal((M, N)).astype(np.float32), (rng.standard_normal((M, N)) * 3 + 1).astype(np.float32)
    w, b = np.ones(N, np.float32), np.zeros(N, np.float32)
    _, mean, rstd = api.native_layer_norm(x, (N,), w, b, 1e-5)
    _, dg, _ = api.native_layer_norm_backward(dy, x, (N,), mean, rstd, w, b, (False, True, False))
    mean, rstd = mean.reshape(-1), rstd.reshape(-1)
    T = ELEMENT["fp32"]
    Y, R, _ = G.tile(M, N)
    k = R // Y
    steps = G.tile_steps(M, Y, R, 1)
    chains = G._chains(T, False, dy, x, mean, rstd, steps, k)[0]
    assert _same(T.store(G._tree(chains)), dg)
    # row t*R + k*y + i of the permuted arrays is row t*R + Y*i + y: each chain then adds rows Y apart
    perm = np.array([t * R + Y * i + y for t in range(M // R) for y in range(Y) for i in range(k)])
    strided = G._chains(T, False, dy[perm], x[perm], mean[perm], rstd[perm], steps, k)[0]
    assert not _same(T.store(G._tree(strided)), dg)
    neighbours = chains.copy()
    while len(neighbours) > 1:
        neighbours = neighbours[0::2] + neighbours[1::2]
    assert not _same(T.store(neighbours[0]), dg)
