"""CPU-only: the lane kernel's order of merges (one lane per row, torch's tree evaluated depth first;
reimpl/emulator/lane_tree.py, as fast_layer_norm_lane_kernel's lane_tree) gives the bits of torch's
own order (compute_stats, the emulator's vectorized forward: shuffle-down rounds and shared memory),
for every row length the kernel takes and others, LayerNorm and RMSNorm, on values that exercise
cancellation, overflow, subnormals, infinities and NaN. NaN compared by position."""
import numpy as np
import pytest

from reimpl.emulator.block import make_block
from reimpl.emulator.fp import FLOAT
from reimpl.emulator.lane_tree import lane_stats
from reimpl.emulator.layer_norm_kernel import compute_stats

f32 = np.float32


def _torch_stats(rms_norm: bool, rows: np.ndarray):
    means, variances = [], []
    for row in rows:
        blk = make_block(0, (32, 4, 1), 6 * 4)
        with np.errstate(all="ignore"):
            wd = compute_stats(blk, FLOAT, rms_norm, row, row.shape[0], blk.shared.view(f32))
        means.append(wd.mean[0])
        variances.append(wd.sigma2[0])
    return np.array(means, f32), np.array(variances, f32)


def _rows(N: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = [rng.standard_normal(N) + 10, rng.standard_normal(N) * 1e-3 + 1e4, rng.standard_normal(N) * 1e-40,
            rng.standard_normal(N) * 3e19, rng.standard_normal(N) * 1e38, np.zeros(N), -np.ones(N) * 1e-45,
            rng.standard_normal(N)]
    specials = rng.standard_normal(N)
    specials[N // 3] = np.inf
    nan_row = rng.standard_normal(N)
    nan_row[-1] = np.nan
    mixed = rng.standard_normal(N) * 10.0 ** rng.integers(-30, 30, N)
    return np.array(rows + [specials, nan_row, mixed], f32)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    return bool((nan_a == nan_b).all() and (a.view(np.uint32)[~nan_a] == b.view(np.uint32)[~nan_b]).all())


@pytest.mark.parametrize("N", [4, 32, 60, 64, 128, 200, 256, 512])
@pytest.mark.parametrize("rms_norm", [False, True])
def test_lane_order_gives_torchs_bits(N, rms_norm):
    rows = _rows(N, seed=N)
    lane_mean, lane_var = lane_stats(rms_norm, rows)
    torch_mean, torch_var = _torch_stats(rms_norm, rows)
    assert _same(lane_var, torch_var)
    if not rms_norm:
        assert _same(lane_mean, torch_mean)


def test_a_different_order_would_show():
    """The check can fail: merging the four warps' results in another order (0 with 1, then with 2
    and 3) changes the bits of some rows, so equality above is not a property of any order."""
    from reimpl.emulator import lane_tree as L
    rows = np.random.default_rng(7).standard_normal((400, 512)).astype(f32) + 10  # all four warps hold data
    with np.errstate(all="ignore"):
        w = [L.lane_tree(False, rows, 32 * k, 1) for k in range(4)]
        combine = L.cuWelfordCombine
        other = combine(False, combine(False, combine(False, w[0], w[1]), w[2]), w[3])
    _, torch_var = _torch_stats(False, rows)
    assert not _same(other.sigma2 / f32(512), torch_var)
