"""Counts stated in prose, computed from the kernels' structure: the merges and shuffles of torch's
reduction tree when one warp plays the (32, 4) block, against those of reimpl.fast's warp_tree
(docs/ladder/fast.md)."""
from __future__ import annotations

import math
from pathlib import Path

from reimpl.emulator.warp import C10_WARP_SIZE

ROOT = Path(__file__).resolve().parents[1]
FIELDS = 3            # mean, sigma2, count: three shuffles per merged state
BLOCK_Y = 4           # torch's vectorized block is (32, 4): four warps, which one warp plays


def torch_tree_counts():
    rounds = int(math.log2(C10_WARP_SIZE))                 # offsets 16, 8, 4, 2, 1
    shuffle_merges = BLOCK_Y * rounds                      # every lane merges each of its 4 states each round
    smem_merges = sum(BLOCK_Y >> k for k in range(1, int(math.log2(BLOCK_Y)) + 1))   # 2 + 1
    return shuffle_merges, shuffle_merges * FIELDS, smem_merges


def fast_tree_counts():
    # offset 16: 2 folds; offset 8: 1 fold; offsets 4, 2, 1: one shuffle-down each; the two
    # shared-memory rounds become two more exchanges (docs/ladder/fast.md#warp-tree)
    merges = 2 + 1 + 3 + int(math.log2(BLOCK_Y))
    return merges, merges * FIELDS


def test_fast_page_counts():
    text = " ".join((ROOT / "docs" / "ladder" / "fast.md").read_text().split())
    merges, shuffles, smem = torch_tree_counts()
    assert f"its shuffle rounds cost {merges} merges and {shuffles} shuffles a lane, and the shared-memory rounds {smem} more merges" in text
    fm, fs = fast_tree_counts()
    assert f"That is {fm} merges and {fs} shuffles instead of {merges + smem} and {shuffles}." in text
