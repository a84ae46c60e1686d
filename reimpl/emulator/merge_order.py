"""Floating-point Welford merging is not associative, shown exactly on the CPU: one float32 row of 16
values, reduced to (mean, variance) along torch's tree (the vectorized forward's compute_stats, as
the emulator runs it) and along other trees built from the same primitives, cuWelfordOnlineSum and
cuWelfordCombine. In exact arithmetic every tree gives the same mean and M2; in float32 the bits
depend on the tree, which is why torch's LayerNorm bits depend on its reduction tree.

Rendered on the docs' pattern page at build time (reimpl/docsite/siblings_tables.py), printed by
scripts/merge_order_demo.py, checked by tests/test_siblings_cpu.py.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .block import make_block
from .fp import FLOAT
from .layer_norm_kernel import WelfordDataLN, compute_stats, cuWelfordCombine, cuWelfordOnlineSum

N = 16
f32 = np.float32


def make_row(seed: int) -> np.ndarray:
    """16 float32 values with a mean well away from zero (so the merges' rounding shows)."""
    return (np.random.default_rng(seed).standard_normal(N) + 10).astype(f32)


def _single(v) -> WelfordDataLN:
    """The state torch holds after one element: one online update from the empty state."""
    z = np.zeros(1, f32)
    return cuWelfordOnlineSum(False, np.asarray([v], f32), WelfordDataLN(z, z, z))


def torch_tree(x: np.ndarray) -> tuple[np.float32, np.float32]:
    """(mean, variance) as torch's vectorized kernel computes them: compute_stats on a (32, 4) block,
    run by the emulator (threads 0-3 fold 4 adjacent elements each, then shuffle-down and
    shared-memory rounds of cuWelfordCombine; empty lanes and warps merge in as empty states)."""
    blk = make_block(0, (32, 4, 1), 6 * 4)
    with np.errstate(all="ignore"):
        wd = compute_stats(blk, FLOAT, False, x, N, blk.shared.view(f32))
    return wd.mean[0], wd.sigma2[0]


def _finish(s: WelfordDataLN) -> tuple[np.float32, np.float32]:
    return s.mean[0], (s.sigma2 / f32(N))[0]  # IEEE division, as compute_stats ends


def left_to_right(x: np.ndarray) -> tuple[np.float32, np.float32]:
    """((x0 ⊕ x1) ⊕ x2) ⊕ ... : each element's state merged into the running one with cuWelfordCombine."""
    s = _single(x[0])
    for v in x[1:]:
        s = cuWelfordCombine(False, s, _single(v))
    return _finish(s)


def pairwise(x: np.ndarray) -> tuple[np.float32, np.float32]:
    """A balanced tree over adjacent pairs: (x0 ⊕ x1) ⊕ (x2 ⊕ x3), and so on up."""
    level = [_single(v) for v in x]
    while len(level) > 1:
        level = [cuWelfordCombine(False, a, b) for a, b in zip(level[::2], level[1::2])]
    return _finish(level[0])


def one_thread(x: np.ndarray) -> tuple[np.float32, np.float32]:
    """No merge at all: one thread folds the 16 elements in order with cuWelfordOnlineSum."""
    z = np.zeros(1, f32)
    s = WelfordDataLN(z, z, z)
    for v in x:
        s = cuWelfordOnlineSum(False, np.asarray([v], f32), s)
    return _finish(s)


TREES = {
    "torch": ("torch's tree: compute_stats of the vectorized forward, (32, 4) threads", torch_tree),
    "left_to_right": ("left to right: ((x0 ⊕ x1) ⊕ x2) ⊕ … ⊕ x15", left_to_right),
    "pairwise": ("balanced pairs: ((x0 ⊕ x1) ⊕ (x2 ⊕ x3)) ⊕ …", pairwise),
    "one_thread": ("one thread: cuWelfordOnlineSum over x0 … x15, no merge", one_thread),
}


def bits(v) -> str:
    return f"0x{int(np.asarray(v, f32).view(np.uint32)):08x}"


def exact(x: np.ndarray) -> tuple[Fraction, Fraction]:
    q = [Fraction(float(v)) for v in x]
    mean = sum(q) / N
    return mean, sum((v - mean) ** 2 for v in q) / N


def demo(max_seed: int = 1000) -> dict:
    """The first seed whose row gives torch's tree and left-to-right merging different bits in both
    the mean and the variance, with every tree's result and the exact values rounded to float32."""
    for seed in range(max_seed):
        x = make_row(seed)
        got = {k: fn(x) for k, (_, fn) in TREES.items()}
        t, l = got["torch"], got["left_to_right"]
        if bits(t[0]) != bits(l[0]) and bits(t[1]) != bits(l[1]):
            m, v = exact(x)
            return {"seed": seed, "row": [float(v) for v in x], "row_bits": [bits(v) for v in x],
                    "exact": {"mean": bits(f32(float(m))), "var": bits(f32(float(v))),
                              "mean_value": float(f32(float(m))), "var_value": float(f32(float(v)))},
                    "trees": {k: {"what": TREES[k][0], "mean": bits(mv[0]), "var": bits(mv[1]),
                                  "mean_value": float(mv[0]), "var_value": float(mv[1])}
                              for k, mv in got.items()}}
    raise RuntimeError(f"no row among seeds 0..{max_seed - 1} separates the trees")
