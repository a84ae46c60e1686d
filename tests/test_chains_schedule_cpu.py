"""CPU-only: the chains kernel (reimpl/fast/cuda/fast_backward.cu, fast_gamma_beta_chains_kernel), its
loops written out in Python, keeps torch's order: chain y of a column adds the rows of torch's tiles
t = 0, 1, ... in order, rows 8 Y t + 8 y + i (i = 0..7), and no tile past the last, which is the
order reimpl/emulator/gamma_beta_order.py states (and holds equal to torch's bits); a ring slot is
refilled only after the tile in it was added, whatever S and the number of tiles; and the copies of a
stage cover each of its 8 rows' 32 words exactly once, for every copy width V and block of 32 C
threads. The statements modelled are checked against the kernel's own lines. The GPU tests check
the bits; this checks the schedule for sizes they do not reach."""
import itertools
from pathlib import Path

import pytest

from reimpl.emulator import gamma_beta_order as order
from reimpl.fast import backward

SOURCE = (Path(backward.__file__).parent / "cuda" / "fast_backward.cu").read_text()
KERNEL = SOURCE[SOURCE.index("fast_gamma_beta_chains_kernel("):
                SOURCE.index("// --8<-- [end:fast_gamma_beta_chains_kernel]")]


def test_the_modelled_lines_are_the_kernels():
    for line in ("for (int k = 0; k < S - 1; k++) issue(k);",
                 "for (int64_t k = 0; k < tiles; k++) {",
                 "issue(k + S - 1);",
                 'asm volatile("cp.async.wait_group %0;\\n" ::"n"(S - 1));',
                 "const int b = (int)(k % S);",
                 "const int64_t row0 = k * rows_a_tile + 8 * y;",
                 "for (int q = 0; q < 8 * PIECES / (32 * C); q++) {",
                 "const int c = threadIdx.x + 32 * C * q;",
                 "const int i = c / PIECES, off = V * (c % PIECES);",
                 "const int y = (int)(blockIdx.x / slabs);",
                 "if (k < tiles) {"):
        assert line in KERNEL, line
    assert KERNEL.count("__syncthreads();") == 2  # before the refill, and after the wait


def schedule(M: int, Y: int, S: int):
    """The kernel's events for chain row y of one block, in program order: ("issue", tile, slot) and
    ("add", tile, slot, rows). Issues of tiles past the last commit an empty group (no event)."""
    tiles = -(-M // (8 * Y))
    events = []

    def issue(k):
        if k < tiles:
            events.append(("issue", k, k % S))
    for k in range(S - 1):
        issue(k)
    for k in range(tiles):
        issue(k + S - 1)
        events.append(("add", k, k % S))
    return tiles, events


@pytest.mark.parametrize("S", backward.CHAIN_STAGES)
@pytest.mark.parametrize("M", [1, 7, 8, 63, 64, 100, 200, 255, 256, 257, 1000, 4096, 4097, 65536])
def test_each_chain_adds_torchs_rows_in_order_from_a_slot_still_holding_them(S, M):
    Y, R, G = order.tile(M, 1024)
    assert G == 1  # (torch's partial path, M > 65536 here, keeps its own launch)
    tiles, events = schedule(M, Y, S)
    holds = {}  # slot -> tile it holds
    added = []
    for e in events:
        if e[0] == "issue":
            _, k, slot = e
            assert holds.get(slot) is None, (M, S, e)  # the tile it held was added before the refill
            holds[slot] = k
        else:
            _, k, slot = e
            assert holds.pop(slot) == k, (M, S, e)  # this tile's copies, not a later tile's
            added.append(k)
    assert added == list(range(tiles))
    # chain y's rows, tile by tile, are the emulator's statement of torch's order
    steps = order.tile_steps(M, Y, R, G)
    for y in range(Y):
        mine = [8 * Y * k + 8 * y + i for k in added for i in range(8)]
        stated = [int(first[y]) + i for _, first in steps for i in range(R // Y)]
        assert mine == stated


@pytest.mark.parametrize("V, C", list(itertools.product(backward.CHAIN_PIECES, (1, 2))))
def test_a_stages_copies_cover_each_word_once(V, C):
    PIECES = 32 // V
    seen = []
    for t in range(32 * C):
        for q in range(8 * PIECES // (32 * C)):
            c = t + 32 * C * q
            i, off = c // PIECES, V * (c % PIECES)
            seen += [(i, off + v) for v in range(V)]
    assert sorted(seen) == [(i, w) for i in range(8) for w in range(32)]
