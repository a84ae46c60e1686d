"""WarpReduceSum and BlockReduceSum (reimpl/mirror/cuda/block_reduce.cuh) on per-thread arrays, as the
backward grad-input kernels call them (B = Block1D, T = T_ACC).

Values hold one entry per thread of one or more whole blocks, block-major, threads in linear order
(so warp w of the batch is entries [32w, 32w + 32) and never straddles two blocks). `shared` is the
blocks' dynamic shared memory as an array [blocks, slots] of T_ACC.

SASS (sm_90, every T): each round is SHFL.DOWN then one FADD (DADD for double); nothing is fused.
"""
from __future__ import annotations

import numpy as np

from . import trace
from .warp import C10_WARP_SIZE, WARP_SHFL_DOWN


# upstream: aten/src/ATen/native/cuda/block_reduce.cuh#L29-L36
# ours: reimpl/mirror/cuda/block_reduce.cuh [WarpReduceSum]
def WarpReduceSum(val: np.ndarray, *, _emit=None, _active=True, _phase: str = "") -> np.ndarray:
    """`_emit(kind, index, detail, active, aux, **values)`, `_active`, `_phase`: for the trace only."""
    offset = C10_WARP_SIZE >> 1
    while offset > 0:
        val = val + WARP_SHFL_DOWN(val, offset)                     # FADD
        if _emit is not None and trace.active():
            tid = np.arange(len(val))
            _emit("sum_shfl_down", 4 - int(np.log2(offset)), f"{_phase}offset = {offset}", _active,
                  WARP_SHFL_DOWN(tid, offset) % _emit.nthreads, val=val)
        offset >>= 1
    return val


# upstream: aten/src/ATen/native/cuda/block_reduce.cuh#L76-L92
# ours: reimpl/mirror/cuda/block_reduce.cuh [BlockReduceSum] (B = Block1D)
def BlockReduceSum(val: np.ndarray, shared: np.ndarray, tid: np.ndarray, blockDim_x: int, *,
                   _emit=None, _phase: str = "") -> np.ndarray:
    """Only thread 0 of each block holds its block's sum afterwards, as on the GPU."""
    lid = tid % C10_WARP_SIZE
    wid = tid // C10_WARP_SIZE
    warps = blockDim_x // C10_WARP_SIZE                              # Block1D::Warps()
    nblocks = len(val) // blockDim_x
    blk = np.arange(len(val)) // blockDim_x                         # which block of the batch
    val = WarpReduceSum(val, _emit=_emit, _phase=f"{_phase}each warp: ")
    # __syncthreads()
    writers = lid == 0
    shared[blk[writers], wid[writers]] = val[writers]               # if (lid == 0) shared[wid] = val
    if _emit is not None:
        _emit("sum_smem_write", 0, f"{_phase}lane 0 of each warp writes shared[wid]", writers, wid, val=val)
    # __syncthreads()
    reads = tid < warps
    val = np.where(reads, shared.reshape(nblocks, -1)[blk, np.where(reads, lid, 0)],
                   val.dtype.type(0))                                # (tid < Warps()) ? shared[lid] : T(0)
    if _emit is not None:
        _emit("sum_smem_read", 0, f"{_phase}threads < warps read shared[lid], the rest 0", True,
              np.where(reads, lid, trace.AUX_NONE), val=val)
    w0 = wid == 0
    return np.where(w0, WarpReduceSum(val, _emit=_emit, _active=w0, _phase=f"{_phase}warp 0: "), val)  # if (wid == 0)
