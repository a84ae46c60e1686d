"""What fixes the bits of torch's dgamma and dbeta, and nothing else: the order of additions that any
kernel must keep to give torch 2.11's results (the same on every GPU, since every rounding is IEEE).

torch's GammaBetaBackwardCUDAKernelTemplate tiles its columns 32 wide and splits each tile's rows over
Y thread rows. Stripped of threads, blocks and shared memory, each column j is computed as:

    chains   Y running sums per column, each from 0.f (dgamma and dbeta alike). Chain y adds, tile by
             tile (t = 0, 1, ...), the rows t*R + k*y + i, i = 0..k-1 (R rows a tile, k = R / Y),
             each as dg = fma(rstd, dy * (x - mean), dg) and db = db + dy (RMSNorm: fma(rstd, dy * x, dg)).
             In the last tile, a row past M adds dy = x = mean = rstd = 0, so +0.f; no tile past M is added.
    the tree the Y chains meet pairwise, Y/2 apart, then Y/4, ... 1 (a warp's XOR shuffles; what lane 0
             holds is what is stored), rounded once to T.

The tile (Y, R) follows M: (1, 8) below 64 rows, (8, 64) below 128, (16, 128) below 256, (32, 256)
above; tall and narrow inputs (M > 65536, N / 32 < SMs / 2) take the partial path instead: Y = 1,
R = 32 and the rows split over gridDim.y chains (chain c adds the tiles c, c + G, c + 2G, ...), each
chain's sum stored in T, and torch's own `.sum(0)` adds the chains (layer_norm_backward.torch_sum0).

Nothing else enters: which thread loads a value, how wide the load is, where a chain lives, whether
the tree runs in shuffles or in one thread. `gamma_beta` computes the two gradients from this
statement alone; tests/test_gamma_beta_order_cpu.py holds it equal to the emulated kernel, which is
torch's bit for bit on the H100.
"""
from __future__ import annotations

import numpy as np

from .fp import ElementType, fma
from .layer_norm_backward import torch_sum0

H100_SMS = 132


def tile(M: int, N: int, sms: int = H100_SMS) -> tuple[int, int, int]:
    """(Y chains a column, R rows a tile, G chains in M for the partial path, else 1)."""
    if M > 64 * 1024 and N // 32 < sms // 2:
        blocks_x = -(-N // 32)
        return 1, 32, min((64 * 1024 // 2) // blocks_x, -(-M // 32))
    if M < 64:
        return 1, 8, 1
    if M < 128:
        return 8, 64, 1
    if M < 256:
        return 16, 128, 1
    return 32, 256, 1


def _chains(T: ElementType, rms_norm: bool, dy, x, mean, rstd, steps, k: int):
    """(dg, db) chains, shape (Q, N). `steps`: per step, in order, (tile, first): each chain's tile
    start and the first of the k rows it adds there, arrays of shape (Q,). A chain whose tile starts
    at or past M adds nothing; rows past M inside a tile add zeros."""
    M, N = dy.shape
    acc = T.acc
    Q = len(steps[0][0]) if steps else 1
    dg, db = np.zeros((Q, N), acc), np.zeros((Q, N), acc)
    with np.errstate(all="ignore"):
        for tile_start, first in steps:
            running = (tile_start < M)[:, None]
            for i in range(k):
                rows = first + i
                inside = rows < M
                r = np.minimum(rows, M - 1)
                d = np.where(inside[:, None], T.load(dy[r]), acc(0))
                xx = np.where(inside[:, None], T.load(x[r]), acc(0))
                s = np.where(inside, rstd[r], acc(0)).astype(acc)[:, None]
                if rms_norm:
                    dg = np.where(running, fma(s, d * xx, dg), dg)
                else:
                    m = np.where(inside, mean[r], acc(0)).astype(acc)[:, None]
                    dg = np.where(running, fma(s, d * (xx - m), dg), dg)
                    db = np.where(running, db + d, db)
    return dg, db


def tile_steps(M: int, Y: int, R: int, G: int) -> list:
    """The steps of _chains for a tile (Y, R, G): whole-grid tiles of R rows, chain y of a tile taking
    rows k*y .. k*y + k - 1 of it (k = R / Y); with G > 1 (Y = 1), chain c the tiles c, c + G, ..."""
    k = R // Y
    if G == 1:
        return [(np.full(Y, t * R), t * R + k * np.arange(Y)) for t in range(-(-M // R))]
    c = np.arange(G)
    return [((c + s * G) * R, (c + s * G) * R) for s in range(-(-M // (R * G)))]


def _tree(chains: np.ndarray) -> np.ndarray:
    """Lane 0 of the XOR-shuffle tree over the chains (axis 0)."""
    v = chains.copy()
    half = len(v) // 2
    with np.errstate(all="ignore"):
        while half >= 1:
            v[:half] = v[:half] + v[half:2 * half]
            half //= 2
    return v[0]


def gamma_beta(T: ElementType, rms_norm: bool, dy, x, mean, rstd, sms: int = H100_SMS):
    """(dgamma, dbeta) in T's storage for (M, N) storage arrays dy and x and the (M,) statistics
    (mean is not read for RMSNorm, whose dbeta is None), from the statement above."""
    M, N = dy.shape
    rstd = np.asarray(rstd).reshape(-1)  # torch's statistics keep the leading dims: (M, 1) here
    mean = None if mean is None else np.asarray(mean).reshape(-1)
    Y, R, G = tile(M, N, sms)
    dg, db = _chains(T, rms_norm, dy, x, mean, rstd, tile_steps(M, Y, R, G), R // Y)
    with np.errstate(over="ignore"):  # a sum past T's range stores inf, as on the GPU
        if G > 1:  # partial path: each chain's sum stored in T, then torch's .sum(0) over the chains
            return torch_sum0(T.store(dg), T), (None if rms_norm else torch_sum0(T.store(db), T))
        return T.store(_tree(dg)), (None if rms_norm else T.store(_tree(db)))
