"""CPU-only: the fused backward kernel's schedule (reimpl/fast/cuda/fast_backward.cu), its index
arithmetic written out in Python, covers what torch's order needs exactly once: every row gets its dX
from one block; every (thread row y, vector v) chain is owned by one warp-unit; each unit walks every
tile of its chain, in ascending order, once; and the plan's grids (reimpl/fast/backward.py) leave no
unit unowned. The GPU tests check the bits; this checks, for shapes and grids they do not reach, that
no chain is dropped, doubled or walked out of order."""
import itertools
from pathlib import Path

import pytest

from reimpl.docsite import fused_tables as F
from reimpl.fast import backward
from reimpl.mirror import kernel_table as K

WARPS, UNITS = backward.WARPS, backward.CHAIN_UNITS


def schedule(M: int, N: int, Y: int, blocks: int):
    """What the kernel does, as fast_backward.cu's loops index it (the sweep and the units' owners as the
    page's table has them, reimpl/docsite/fused_tables.py): (dX rows per block, chains per
    (block, warp, q) with the tiles it walks in order)."""
    n_vec = N // 4
    slabs = -(-n_vec // 32)
    units = slabs * Y
    steps = list(F.sweep(M, Y, blocks))
    tiles = -(-M // (8 * Y))  # torch's tiles of 8 Y rows: what every chain must walk
    rows, walks = {}, {}
    for b in range(blocks):
        owned = []
        for warp in range(WARPS):
            for q in range(UNITS):
                u = b + blocks * (warp + 4 * q)  # unit_of(q)
                if u >= units:
                    break
                assert F.unit_owner(u, blocks) == (b, warp, q)
                owned.append((warp, q, u // slabs, 32 * (u % slabs)))  # chain y, the slab's first vector
        done = []
        for j, first, end, front, t0, t1 in steps:
            if b + blocks * j < M:
                rows.setdefault(b + blocks * j, []).append(b)
            done += range(t0, t1)
        for warp, q, y, v0 in owned:
            for lane in range(32):
                if v0 + lane < n_vec:
                    walks.setdefault((y, v0 + lane), []).append(((b, warp, q), list(done)))
    return rows, walks, tiles, n_vec


def test_the_sites_shape_is_the_kernels():
    assert (F.WARPS, F.CHAIN_UNITS, F.SLAB) == (WARPS, UNITS, backward.SLAB)
    # the sweep table's input: the plan's grid and tile for bf16 16384 x 4096 on 132 SMs
    p = backward.plan(K.BFloat16, False, True, F.SWEEP_M, F.SWEEP_N, 132)
    assert (p.grid[0], p.Y) == (F.SWEEP_BLOCKS, F.SWEEP_Y)
    text = F.fused_sweep()
    steps = list(F.sweep(F.SWEEP_M, F.SWEEP_Y, F.SWEEP_BLOCKS))
    assert text.count("\n| ") == 2 * F.SWEEP_SHOWN + 1 + 1  # the shown steps, the ellipsis, the header
    assert f"| {steps[-1][0]} | {steps[-1][1]}–{F.SWEEP_M - 1} | {F.SWEEP_M} |" in text


SHAPES = [(M, N) for M in (256, 257, 511, 1000, 4096, 5000) for N in (4, 508, 1536, 2052, 4100, 8192)]


@pytest.mark.parametrize("M, N", SHAPES)
def test_every_row_and_chain_once_and_in_order(M, N):
    """On the fewest blocks whose warps hold the units (the plan's floor), one more, an odd count
    past twice that, and a grid of 528 (an H100's resident count for 16-bit rows of 2049 to 4096)."""
    Y = backward.thread_rows(M, N, 132)
    least = -(-(-(-(N // 4) // 32) * Y) // (WARPS * UNITS))  # slabs of 32 vectors x chains, over the warps
    for blocks in sorted({least, least + 1, 2 * least + 3, max(least, 528)}):
        rows, walks, tiles, n_vec = schedule(M, N, Y, blocks)
        assert sorted(rows) == list(range(M)) and all(len(v) == 1 for v in rows.values())
        assert set(walks) == set(itertools.product(range(Y), range(n_vec)))
        for key, owners in walks.items():
            assert len(owners) == 1, (blocks, key)
            assert owners[0][1] == list(range(tiles)), (blocks, key)
    assert least * WARPS * UNITS >= -(-(N // 4) // 32) * Y > (least - 1) * WARPS * UNITS


@pytest.mark.parametrize("T", [K.float_, K.BFloat16])
@pytest.mark.parametrize("M, N", [(4096, 1536), (300, 8192), (65536, 2048), (8192, 4100)])
@pytest.mark.parametrize("sms", [8, 132])
def test_the_plans_grid_owns_every_unit(monkeypatch, T, M, N, sms):
    monkeypatch.setattr(backward, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(backward, "MIN_ROW_BYTES", 0)  # the fused kernel on rows it would leave to the chains kernel
    p = backward.plan(T, False, True, M, N, sms)
    assert p is not None
    rows, walks, tiles, n_vec = schedule(M, N, p.Y, p.grid[0])
    assert len(walks) == p.Y * n_vec and all(len(o) == 1 and o[0][1] == list(range(tiles)) for o in walks.values())


def test_the_model_is_the_kernels_indexing():
    """The lines of fast_backward.cu that `schedule` writes out, as they stand there."""
    src = (Path(backward.__file__).parent / "cuda" / "fast_backward.cu").read_text()
    for line in ("const auto unit_of = [&](const int q) { return blockIdx.x + blocks * (warp + 4 * q); };",
                 "if (u >= units) break;",
                 "const int v = 32 * (int)(u % slabs) + lane;",
                 "const int64_t row0 = k * rows_a_tile + 8 * (u / slabs);",
                 "const int64_t row = blockIdx.x + blocks * j;",
                 "const int64_t front = row < M ? blocks * (j + 1) : M;",
                 "const int64_t passed = front >= M ? tiles : front / rows_a_tile;",
                 "for (; next_tile < passed; next_tile++) chain_tile(next_tile);",
                 "if (front >= M) break;",
                 f"constexpr int CHAIN_UNITS = {backward.CHAIN_UNITS};",
                 f"constexpr int CHAIN_REGS = {backward.CHAIN_REGS};"):
        assert line in src, line


def test_the_pages_sweep_sentence():
    page = (Path(backward.__file__).parents[2] / "docs/ladder/fast.md").read_text()
    assert f"Each step reads {F.SWEEP_BLOCKS} rows for dX, a little over two\ntiles" in page
    assert 2 < F.SWEEP_BLOCKS / (8 * F.SWEEP_Y) < 2.5


@pytest.mark.parametrize("units, blocks", [(1024, 528), (2048, 396), (96, 660), (4096, 512)])
def test_no_block_holds_more_than_one_unit_beyond_another(units, blocks):
    """"dealt out over the blocks like cards (unit u to block u mod G)": a block's count of units is
    floor(units / G) or one more."""
    held = [0] * blocks
    for u in range(units):
        held[F.unit_owner(u, blocks)[0]] += 1
    assert max(held) - min(held) <= 1
    page = (Path(backward.__file__).parents[2] / "docs/ladder/fast.md").read_text()
    assert "so no block holds more\n   than one unit beyond any other" in page

