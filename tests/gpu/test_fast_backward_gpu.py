"""GPU: reimpl.fast's fused backward kernel (dX and the dgamma/dbeta chains in one pass, then the
chains' finish) gives torch's dX, dgamma and dbeta bit for bit (NaN by position), on every GammaBeta
tile it replaces (<32, Y, 8 Y>, Y = 1, 8, 16, 32), every row length its plan takes (R = 1 .. 16),
rows past M in torch's last tile, every value kind, eps, mask and dtype; and through launch plans
(replays), CUDA graphs, side streams and threads. The route's floors (backward.MIN_ELEMENTS,
backward.MIN_ROW_BYTES) are lowered to 0 here, so small and narrow cases take it too. Counts go to the backward GPU summary
under bwd_fused_* groups; `bwd_fused_kernel_cases` counts cases that launched the fused kernel and
its finish."""
import random

import pytest
import torch

from reimpl.checks import cases_backward as bwd
from reimpl.checks.cases import VALUE_KINDS
from tests.gpu import fast_runs
from tests.gpu.fast_runs import replays_graphs_streams_and_threads, run_fast

pytestmark = pytest.mark.gpu

# M at and around each GammaBeta tile threshold (Y = 1 below 64, 8 below 128, 16 below 256, then 32)
# and around whole tiles of 8 Y rows; N at each R of the plan and off the 32-column tiles
FUSED_MS = (1, 7, 8, 9, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256, 257, 300, 513, 1000, 2051)
FUSED_NS = (4, 28, 252, 508, 512, 516, 1020, 1024, 1028, 2044, 2048, 2052, 4092, 4096, 4100, 6144, 8188, 8192)


@pytest.fixture(autouse=True)
def every_size_fuses(monkeypatch):
    from reimpl.fast import backward
    monkeypatch.setattr(backward, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(backward, "MIN_ROW_BYTES", 0)
    monkeypatch.setattr(backward, "ENABLED", True)
    from reimpl.fast import fast_runtime
    fast_runtime().plans.clear()  # plans recorded under the floors would replay the two-kernel route
    yield
    fast_runtime().plans.clear()  # and the plans recorded here would keep small shapes fused after


def tile_cases() -> list[bwd.BackwardCase]:
    return fast_runs.tile_cases(FUSED_NS, FUSED_MS, long_from=2052, stride=3)


def mask_cases() -> list[bwd.BackwardCase]:
    """Every output mask, with bias (LayerNorm) and without (dgamma alone), on each tile class."""
    return fast_runs.mask_cases(((7, 1028), (64, 1024), (200, 1028), (1000, 2048)))


def fused_sweep(rows_wanted: int = 100_000, seed: int = 31) -> list[bwd.BackwardCase]:
    """Random cases the fused plan takes: N a multiple of 4 up to 8192, M across every tile."""
    rng = random.Random(seed)
    out, rows = [], 0
    while rows < rows_wanted:
        n = 4 * rng.choice((rng.randint(1, 128), rng.randint(1, 1024), rng.randint(1, 2048)))
        m = rng.choice((rng.randint(1, 63), rng.randint(64, 255), rng.randint(256, 3000)))
        op = rng.choice(("layer_norm", "rms_norm"))
        bias = op == "layer_norm" and rng.random() < 0.8  # without one, dgamma alone (torch asks no dbeta)
        out.append(bwd.BackwardCase(op, rng.choice(("fp32", "fp16", "bf16")), (m, n), weight=True, bias=bias,
                                    mask=(True, True, bias),
                                    values=rng.choice(VALUE_KINDS + ("normal",) * 3),
                                    dy_values=rng.choice(VALUE_KINDS + ("normal",) * 5),
                                    eps=rng.choice((1e-5, 1e-6, 0.0, 1e-2, 10.0)), seed=len(out)))
        rows += m
    return out


def _run(group: str, cs):
    return run_fast(f"bwd_fused_{group}", "bwd_fused_kernel_cases", "fused_launches", cs)


@pytest.mark.parametrize("group", ["tiles", "masks"])
def test_fused_backward_matches_torch(group):
    cs = tile_cases() if group == "tiles" else mask_cases()
    bad, fused = _run(group, cs)
    assert not bad, bad[:10]
    # every case with dX asked (and the weight torch's dgamma needs) runs the fused kernel
    assert fused == sum(1 for c in cs if c.output_mask[0])


def test_fused_backward_sweep_of_100000_rows():
    cs = fused_sweep()
    assert sum(c.shape[0] for c in cs) >= 100_000
    bad, fused = _run("sweep", cs)
    assert not bad, bad[:10]
    assert fused == len(cs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_backward_replays_graphs_streams_and_threads(dtype):
    """The same signature three times, a CUDA graph of the backward replayed on new data, a side
    stream, and four host threads at once: each gives torch's gradients, and the finish ran in place of torch's GammaBeta."""
    replays_graphs_streams_and_threads(dtype, 1000, 2048, "fused_launches")
