"""Warp shuffles on per-thread arrays, mirroring reimpl/mirror/cuda/DeviceUtils.cuh.

`value` has one entry per thread of the block, in linear thread order (threadIdx.x fastest), so
warp w is entries [32w, 32w + 32). CUDA's __shfl_*_sync pass PTX `shfl.sync` the clamp word
c = ((32 - width) << 8) | 0x1f; PTX then computes, per lane,
    segmask = 32 - width;  maxLane = (lane & segmask) | (31 & ~segmask);  minLane = lane & segmask
    down: j = lane + delta          kept if j <= maxLane
    bfly: j = lane ^ laneMask       kept if j <= maxLane
    idx:  j = minLane | (srcLane & 31 & ~segmask)   (always in range: srcLane wraps modulo width)
and a lane whose j is not kept returns its own value. All lanes take part (mask 0xffffffff).
"""
from __future__ import annotations

import numpy as np

C10_WARP_SIZE = 32


def _lanes(n: int):
    tid = np.arange(n)
    return tid, tid % C10_WARP_SIZE, tid - tid % C10_WARP_SIZE


def _gather(value, j, keep, lane, base):
    src = np.where(keep, base + j, base + lane)
    return np.asarray(value)[src]


def _clamp(lane, width: int):
    segmask = C10_WARP_SIZE - width
    return segmask, (lane & segmask) | (31 & ~segmask), lane & segmask


# upstream: aten/src/ATen/cuda/DeviceUtils.cuh#L39-L47
# ours: reimpl/mirror/cuda/DeviceUtils.cuh [WARP_SHFL_XOR]
def WARP_SHFL_XOR(value, laneMask: int, width: int = C10_WARP_SIZE):
    _, lane, base = _lanes(len(value))
    _, max_lane, _ = _clamp(lane, width)
    j = lane ^ laneMask
    return _gather(value, j, j <= max_lane, lane, base)


# upstream: aten/src/ATen/cuda/DeviceUtils.cuh#L49-L57
# ours: reimpl/mirror/cuda/DeviceUtils.cuh [WARP_SHFL]
def WARP_SHFL(value, srcLane: int, width: int = C10_WARP_SIZE):
    _, lane, base = _lanes(len(value))
    segmask, max_lane, min_lane = _clamp(lane, width)
    j = min_lane | (srcLane & 31 & ~segmask)
    return _gather(value, j, j <= max_lane, lane, base)


# upstream: aten/src/ATen/cuda/DeviceUtils.cuh#L69-L77
# ours: reimpl/mirror/cuda/DeviceUtils.cuh [WARP_SHFL_DOWN]
def WARP_SHFL_DOWN(value, delta: int, width: int = C10_WARP_SIZE):
    _, lane, base = _lanes(len(value))
    _, max_lane, _ = _clamp(lane, width)
    j = lane + delta
    return _gather(value, j, j <= max_lane, lane, base)
