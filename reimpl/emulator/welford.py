"""WelfordData / WelfordOps (SharedReduceOps.h) and WarpReduce / BlockReduce (block_reduce.cuh),
as used by RowwiseMomentsCUDAKernel, on per-thread arrays.

Instruction notes (SASS of our sm_90 cubin, float and double alike, D* for double): the
divisions are IEEE (MUFU.RCP + FFMA refinement + FCHK slow path), i.e. correctly rounded, which
NumPy's `/` is too.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import trace
from .fp import fma
from .warp import C10_WARP_SIZE, WARP_SHFL_DOWN


# upstream: aten/src/ATen/native/SharedReduceOps.h#L79-L94
# ours: reimpl/mirror/cuda/SharedReduceOps.h [WelfordData]
@dataclass
class WelfordData:
    mean: np.ndarray
    m2: np.ndarray
    n: np.ndarray     # int64
    nf: np.ndarray

    @classmethod
    def filled(cls, threads: int, acc, mean=0, m2=0, n=0, nf=0) -> "WelfordData":
        return cls(np.full(threads, mean, acc), np.full(threads, m2, acc),
                   np.full(threads, n, np.int64), np.full(threads, nf, acc))

    def where(self, cond, other: "WelfordData") -> "WelfordData":
        """Per thread: self where cond, else other (threads outside an `if` keep their state)."""
        return WelfordData(*(np.where(cond, a, b) for a, b in zip(self.fields(), other.fields())))

    def fields(self):
        return (self.mean, self.m2, self.n, self.nf)


# upstream: aten/src/ATen/native/SharedReduceOps.h#L97-L161
# ours: reimpl/mirror/cuda/SharedReduceOps.h [WelfordOps]
@dataclass
class WelfordOps:
    correction: float
    take_sqrt: bool

    def reduce(self, acc: WelfordData, data, idx) -> WelfordData:
        new_n = acc.n + 1
        new_nf = new_n.astype(acc.mean.dtype)                 # I2F: exact below 2^24 (2^53)
        delta = data - acc.mean                               # FADD
        new_mean = acc.mean + delta / new_nf                  # IEEE division, then FADD (not fused)
        new_delta = data - new_mean                           # FADD
        return WelfordData(new_mean,
                           fma(delta, new_delta, acc.m2),     # FFMA
                           new_n, new_nf)

    def combine(self, a: WelfordData, b: WelfordData) -> WelfordData:
        delta = b.mean - a.mean                               # FADD
        new_count = a.nf + b.nf                               # FADD
        nb_over_n = b.nf / new_count                          # IEEE division
        merged = WelfordData(
            fma(delta, nb_over_n, a.mean),                    # FFMA
            fma(delta * delta * a.nf, nb_over_n, a.m2 + b.m2),  # FMUL, FMUL; FADD; FFMA
            np.full_like(a.n, -1),
            new_count)
        # the early returns: an empty side gives back the other unchanged
        return merged.where(b.nf != 0, a).where(a.nf != 0, b)

    def project(self, acc: WelfordData):
        """(variance, mean), as thrust::pair."""
        mean = acc.mean
        divisor = np.where(acc.nf > self.correction, acc.nf - acc.mean.dtype.type(self.correction), 0)
        var = acc.m2 / divisor.astype(acc.m2.dtype)          # IEEE division
        return (np.sqrt(var) if self.take_sqrt else var), mean

    def warp_shfl_down(self, acc: WelfordData, offset: int) -> WelfordData:
        return WelfordData(WARP_SHFL_DOWN(acc.mean, offset), WARP_SHFL_DOWN(acc.m2, offset),
                           WARP_SHFL_DOWN(acc.n, offset), WARP_SHFL_DOWN(acc.nf, offset))


# upstream: aten/src/ATen/native/cuda/block_reduce.cuh#L119-L126
# ours: reimpl/mirror/cuda/block_reduce.cuh [WarpReduce]
def WarpReduce(val: WelfordData, op: WelfordOps, *, _active=True, _phase: str = "") -> WelfordData:
    """`_active`, `_phase`: for the trace only (which threads run this call, and which call it is)."""
    offset = C10_WARP_SIZE >> 1
    while offset > 0:
        val = op.combine(val, op.warp_shfl_down(val, offset))
        if trace.active():
            tid = np.arange(len(val.mean))
            trace.emit("warp_reduce", 4 - int(np.log2(offset)), f"{_phase}offset = {offset}", _active,
                       WARP_SHFL_DOWN(tid, offset), mean=val.mean, m2=val.m2, n=val.n, nf=val.nf)
        offset >>= 1
    return val


# upstream: aten/src/ATen/native/cuda/block_reduce.cuh#L128-L145
# ours: reimpl/mirror/cuda/block_reduce.cuh [BlockReduce] (B = Block1D)
def BlockReduce(val: WelfordData, op: WelfordOps, identity_element: WelfordData, shared: list,
                tid: np.ndarray, blockDim_x: int) -> WelfordData:
    """`shared` is a list of C10_WARP_SIZE slots (one WelfordData per warp); `identity_element`
    holds one value per thread. Only thread 0's result is the block's."""
    lid = tid % C10_WARP_SIZE
    wid = tid // C10_WARP_SIZE
    warps = blockDim_x // C10_WARP_SIZE
    val = WarpReduce(val, op, _phase="each warp: ")
    # __syncthreads()
    for w in range(warps):                                   # if (lid == 0) shared[wid] = val
        shared[w] = tuple(f[w * C10_WARP_SIZE] for f in val.fields())
    trace.emit("block_write", 0, "lane 0 of each warp writes shared[wid]", lid == 0, wid,
               mean=val.mean, m2=val.m2, n=val.n, nf=val.nf)
    # __syncthreads()
    slot = [shared[l] if l < warps else None for l in range(C10_WARP_SIZE)]
    read = WelfordData(*(np.array([slot[l][k] if l < warps else f[0] for l in lid], dtype=f.dtype)
                         for k, f in enumerate(identity_element.fields())))
    val = read.where(tid < warps, identity_element)
    trace.emit("block_read", 0, "threads < warps read shared[lid], the rest the identity", True,
               np.where(tid < warps, lid, trace.AUX_NONE), mean=val.mean, m2=val.m2, n=val.n, nf=val.nf)
    return WarpReduce(val, op, _active=wid == 0, _phase="warp 0: ").where(wid == 0, val)  # if (wid == 0)
