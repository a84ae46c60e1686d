"""GPU: reimpl.fast's chains route (torch's GammaBeta launch replaced by the chains kernel and the
finish, after a dX kernel of its own) gives torch's dX, dgamma and dbeta bit for bit (NaN by
position): every GammaBeta tile it replaces (Y = 1, 8, 16, 32), rows past M in torch's last tile and
tiles past the last in the ring, rows whose words do not fill a slab, every ring of S stages the
kernel is built with, every value kind, eps, mask and dtype, a sweep of more than 100,000 rows; and through
launch plans, a CUDA graph, side streams and threads. The fused route is switched off and the
route's floor lowered to 0 here, so every size takes it. Counts go to the backward GPU summary under
bwd_chains_* groups; `bwd_chains_kernel_cases` counts cases that launched the chains kernel."""
import itertools
import random

import pytest
import torch

from reimpl.checks import cases_backward as bwd
from reimpl.checks.cases import VALUE_KINDS
from tests.gpu import fast_runs
from tests.gpu.fast_runs import replays_graphs_streams_and_threads, run_fast

pytestmark = pytest.mark.gpu

# M around each tile threshold, and tiles (of 256 rows from 256 up) fewer or more than the ring's stages
CHAIN_MS = (1, 7, 8, 63, 64, 65, 127, 128, 200, 255, 256, 257, 511, 512, 1023, 1024, 1025, 2047, 2049, 4096, 5000)
# N: 16-bit words in part of a slab (64 columns), whole slabs, odd widths (16-bit: torch's GammaBeta)
CHAIN_NS = (2, 30, 62, 64, 66, 126, 768, 770, 1000, 1024, 1536, 2050, 4096, 5120)


@pytest.fixture(autouse=True)
def every_size_takes_chains(monkeypatch):
    from reimpl.fast import backward, fast_runtime
    monkeypatch.setattr(backward, "ENABLED", False)
    monkeypatch.setattr(backward, "CHAINS_MIN_ELEMENTS", 0)
    fast_runtime().plans.clear()  # plans recorded under the floor would replay torch's GammaBeta
    yield
    fast_runtime().plans.clear()


def _takes_chains(c: bwd.BackwardCase) -> bool:
    """Whether the mirror's GammaBeta launch of `c` becomes the chains kernel: a gradient of the
    weights asked for, words of 32 bits, and a tile that reduces each column in one block."""
    from reimpl.fast import backward
    M, N = c.shape[0], c.shape[-1]
    wants = (c.output_mask[1] and c.weight) or (c.op == "layer_norm" and c.output_mask[2] and c.bias)
    row_bytes = N * {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8}[c.dtype]
    words = row_bytes % 4 == 0 and c.dtype != "fp64"
    torch_tile = c.dtype == "fp32" and row_bytes > backward.TORCH_TILE_FLOAT_BYTES  # torch's tile is kept
    return wants and words and not torch_tile and backward.thread_rows(M, N, 132) is not None


def tile_cases() -> list[bwd.BackwardCase]:
    return fast_runs.tile_cases(CHAIN_NS, CHAIN_MS, long_from=1024, stride=2)


def mask_cases() -> list[bwd.BackwardCase]:
    return fast_runs.mask_cases(((7, 1030), (64, 1024), (200, 770), (3000, 2048)))


def chains_sweep(rows_wanted: int = 100_000, seed: int = 47) -> list[bwd.BackwardCase]:
    """Random cases: N of any length up to 12288 (odd ones included), M across every tile."""
    rng = random.Random(seed)
    out, rows = [], 0
    while rows < rows_wanted:
        n = rng.choice((rng.randint(1, 256), 2 * rng.randint(1, 1024), 2 * rng.randint(1, 6144)))
        m = rng.choice((rng.randint(1, 63), rng.randint(64, 255), rng.randint(256, 4000)))
        op = rng.choice(("layer_norm", "rms_norm"))
        bias = op == "layer_norm" and rng.random() < 0.8
        out.append(bwd.BackwardCase(op, rng.choice(("fp32", "fp16", "bf16")), (m, n), weight=True, bias=bias,
                                    mask=(rng.random() < 0.9, True, bias),
                                    values=rng.choice(VALUE_KINDS + ("normal",) * 3),
                                    dy_values=rng.choice(VALUE_KINDS + ("normal",) * 5),
                                    eps=rng.choice((1e-5, 1e-6, 0.0, 1e-2, 10.0)), seed=len(out)))
        rows += m
    return out


def _run(group: str, cs):
    return run_fast(f"bwd_chains_{group}", "bwd_chains_kernel_cases", "chains_launches", cs)


@pytest.mark.parametrize("S", [4, 8, 16])
def test_chains_match_torch_for_every_ring_size(monkeypatch, S):
    from reimpl.fast import backward
    monkeypatch.setattr(backward, "CHAIN_STAGE", S)
    monkeypatch.setattr(backward, "DEEP_RING_BLOCKS_PER_SM", 0)  # S on every grid
    cs = tile_cases()
    bad, chained = _run(f"tiles_S{S}", cs)
    assert not bad, bad[:10]
    assert chained == sum(map(_takes_chains, cs))


def test_chains_match_torch_for_every_mask():
    cs = mask_cases()
    bad, chained = _run("masks", cs)
    assert not bad, bad[:10]
    assert chained == sum(map(_takes_chains, cs))


def test_chains_sweep_of_100000_rows():
    cs = chains_sweep()
    assert sum(c.shape[0] for c in cs) >= 100_000
    bad, chained = _run("sweep", cs)
    assert not bad, bad[:10]
    assert chained == sum(map(_takes_chains, cs))


def test_chains_on_large_inputs():
    """Shapes past CHAINS_MIN_ELEMENTS, tall ones included (fp32 2048 x 12288 keeps torch's tile)."""
    cs = [bwd.BackwardCase(op, dt, (m, n), bias=op == "layer_norm", seed=i)
          for i, (op, dt, (m, n)) in enumerate(itertools.product(
              ("layer_norm", "rms_norm"), ("fp32", "bf16", "fp16"),
              ((65536, 768), (16384, 1024), (32768, 2048), (4099, 4096), (2048, 12288), (65536, 66))))]
    bad, chained = _run("large", cs)
    assert not bad, bad[:10]
    assert chained == sum(map(_takes_chains, cs)) == len(cs) - 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chains_replay_graphs_streams_and_threads(dtype):
    """The same signature three times, a CUDA graph of the backward replayed on new data, a side
    stream, and four host threads at once: each gives torch's gradients, and the chains kernel ran
    in place of torch's GammaBeta."""
    replays_graphs_streams_and_threads(dtype, 3000, 1024, "chains_launches")
