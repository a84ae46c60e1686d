"""BatchNorm's training forward and backward with each channel's reduction split over many blocks
(cuda/batchnorm_split.cu; its entry is `bn_split` in registry.py). `bn_kernel` gives a channel one
block; here S blocks share a channel, each folds a slice of its values into a Welford state, and the
block that arrives last (an atomic counter per channel or column tile) merges the S states with
Chan's formula in slice order (a warp per channel), so no kernel of its own. Two launches a
direction (three for channels-last tiles too wide to merge in one block, `Plan.last_block`):

    forward:  statistics per slice, the last block merging (save_mean, save_invstd, running
              statistics, coefficients) -> y = (x - mean) * (invstd * w) + b
    backward: sum(dy), sum(dy * (x - mean)) per slice, the last block adding (dweight, dbias,
              coefficients) -> dx = (dy - mean_dy - (x - mean) * invstd^2 * mean_dy_xmu) * invstd * w

NCHW input with short channels (at most ONE_BLOCK_VALUES values; the forward, in 16-byte words,
HELD_FORWARD_VALUES) and about as many channels as SMs takes one block per channel instead, one
launch a direction, the channel held in registers so that x (and dy) is read once:
`bn_forward_held` and `bn_backward_held` (`one_block_per_channel`, `held_shape`).

Columns input from RESIDENT_FROM_BYTES on takes one cooperative launch a direction instead:
`bn_forward_cl_resident` and `bn_backward_cl_resident`, a grid that stays resident (`resident_plan`)
so that a tile's blocks can wait for each other at a barrier between the passes. Given the same
plan, their outputs are the split launches' bits.

    batch_norm_train_forward_split(x, weight, bias, running_mean, running_var, momentum, eps)
        -> (y, save_mean, save_invstd)
    batch_norm_train_backward_split(dy, x, weight, save_mean, save_invstd) -> (dx, dweight, dbias)

x is NCHW-contiguous of any rank, read as (N, C, HW), or 4-D channels-last, read as (R, C) columns
with R = N * H * W (as is NCHW input with HW = 1, (N, C) included); anything else is made
contiguous. y and dx come back in x's memory format. With autograd recording (x, weight or bias
requiring grad), the forward records the split backward, so `batch_norm(..., kernel=True)` and
`BatchNorm2d(kernel=True)` (batchnorm.py) train through these kernels.

The plan (how many blocks share a channel, which values each folds, the tiles of channels-last
input) is pure Python: `nchw_plan`, `columns_plan`, `elementwise_plan`, `slice_bounds`, checked on
the CPU (tests/test_batchnorm_split_cpu.py: every value folded once; the rounding levels within
the stated bound of reimpl/ladder/accuracy.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import torch

from ..device import runtime
from ..device.kernel_types import KernelTemplate, float_
from . import registry
from .batchnorm import check_train_inputs
from .launch import STORAGE, cuda_source, launch, launch_cooperative

PARTIAL_THREADS = 256      # threads of an NCHW statistics block: 8 warps merged by block_merge
COLUMN_THREADS = 256       # threads of a columns block, (TX, 256 / TX) (cuda: COLUMN_THREADS)
COLUMN_TX = 8              # at most: 8 threads x 16 bytes cover a 128-byte line of a row; narrow
                           # tiles make more blocks for the same S
ELEMENTWISE_THREADS = 256
FINALIZE_THREADS = 256     # a warp per channel, 8 channels a block
# A columns tile's last block merges width x S states (12 or 8 bytes) alone: past this many, the
# finalize kernel, spread over C / 8 blocks, is launched instead. Measured (results/bn_plans.json,
# scripts/gpu/bn_probe.py), the finalize launch was as fast or faster on every channels-last shape
# of the grid, the small ones included: so always (0); the last-block merge stays for NCHW channels.
LAST_BLOCK_STATES = 0
# One block per channel (NCHW) up to this many values a channel (16 a thread of CHANNEL_THREADS;
# the backward holds x and dy), where C leaves at most a tenth of the SMs idle (one_block_per_channel).
# Measured on an H100, fp16 forward: at 6272 and 1568 values (32 x C x 14 x 14, 7 x 7) even bn_kernel's
# two reads beat the split (13.7 vs 20.6 us at C = 256, 37.2 vs 41.3 at C = 1024; even at C = 2048).
ONE_BLOCK_VALUES = 8192
CHANNEL_THREADS = 512      # the held kernels' block (cuda: HELD_THREADS), as bn_kernel's (batchnorm.BLOCK)
CHUNK = 4                  # values of a channel a thread loads before folding them (cuda: CHUNK)
MIN_VALUES = 16384         # a block folds at least this many values: below, its merges cost more than its loads
STATE_BYTES = 24           # a columns slice leaves 12 bytes a column, written once and read once...
STATE_SHARE = 8            # ...and its rows hold at least 8 times that in x
MAX_SLICES = 512           # the merging lanes take S / 32 states each: a chain of at most 16 + 5
WAVES = 1                  # aim at this many full waves of resident blocks
# MIN_VALUES, MAX_SLICES and WAVES together, with LAST_BLOCK_STATES, are the setting of the probe
# (scripts/gpu/bn_probe.py) with the lowest geometric mean of forward times over the grid;
# tests/test_batchnorm_split_cpu.py holds them to results/bn_plans.json
THREADS_PER_SM = 2048      # resident threads per SM (H100, and every GPU since Volta)
# Channels-last input takes one launch a direction (bn_forward_cl_resident, bn_backward_cl_resident):
# a grid that stays resident, so that a tile's blocks can wait for each other. The device's own count
# of resident blocks (cuOccupancyMaxActiveBlocksPerMultiprocessor) sizes the grid; without a device,
# RESIDENT_BLOCKS stands for it. False: the split's three launches.
# From how many bytes of x, per direction and element size, one launch is taken: the thresholds
# with the smallest worst ratio to the faster route over results/bn_resident.json's cells
# (scripts/gpu/bn_probe.py). The forward's split is the faster below 16 MB, where its larger S
# spreads the first pass over more blocks than stay resident; the backward's one launch at every size.
RESIDENT = True
RESIDENT_BLOCKS = 4
RESIDENT_FROM_BYTES = {"forward": {4: 16 << 20, 2: 16 << 20}, "backward": {4: 0, 2: 0}}


@dataclass(frozen=True)
class Plan:
    """How the statistics pass splits each channel: `columns` (x read as (R, C) rows) or NCHW;
    `vec` elements per load; `slices` (S) blocks per channel, slice s folding the `per_slice`
    values from s * per_slice of the walk k = n * HW + p (NCHW), or those rows (columns); the grid
    and block; `levels`, the rounding levels on a channel's statistics (values a thread folds, as
    chunk merges plus the chunk's additions, then the block's tree, then the last block's S / 32
    merges per lane and its warp's 5 butterfly levels), which accuracy.py's bound counts;
    `last_block`: the last block of a channel or tile merges (else a finalize launch, same order)."""
    columns: bool
    vec: int
    slices: int
    per_slice: int
    grid: tuple
    block: tuple
    levels: int
    last_block: bool = True


@dataclass(frozen=True)
class Elementwise:
    """The elementwise pass (y or dx): `cl` (vectors of channels c .. c + vec - 1) or one channel
    per vector; `hw` the run length the channel is carried over (1 for columns input)."""
    cl: bool
    vec: int
    hw: int
    grid: tuple
    block: tuple


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _merge_levels(S: int) -> int:
    return _cdiv(S, 32) + 5


def _slices(target_blocks: int, blocks_per_slice: int, extent: int, min_extent: int) -> tuple[int, int]:
    """(S, per_slice): about target_blocks blocks in all, at least min_extent of the extent each, at
    most MAX_SLICES; then per_slice rounded so that no slice is empty."""
    S = max(1, min(_cdiv(target_blocks, blocks_per_slice), extent // min_extent, MAX_SLICES))
    per_slice = _cdiv(extent, S)
    return _cdiv(extent, per_slice), per_slice


def one_block_per_channel(N: int, C: int, HW: int, columns: bool, sms: int = 132,
                          values: int = ONE_BLOCK_VALUES) -> bool:
    """Whether an NCHW pass takes one block per channel (bn_forward_held, bn_backward_held): channels
    of at most `values` values, short enough for one block's registers, where the split's second
    launch, its tail and its second read cost more than the work; channels enough that C blocks
    leave at most a tenth of the SMs idle; and fewer than 2^31 elements (the kernels' offsets)."""
    return not columns and N * HW <= values and 10 * C >= 9 * sms and N * C * HW < 2**31


def held_forward_values(HW: int, itemsize: int, aligned: bool) -> int:
    """The longest channel the forward holds: HELD_FORWARD_VALUES where it is read in 16-byte words
    (64 values a thread: the backward, holding dy as well, stops at ONE_BLOCK_VALUES), else
    ONE_BLOCK_VALUES."""
    return HELD_FORWARD_VALUES if aligned and HW % (16 // itemsize) == 0 else ONE_BLOCK_VALUES


def one_block_levels(count: int) -> int:
    """Rounding levels on a channel's sums in the one-block kernels: values per thread, then the tree."""
    return _cdiv(count, CHANNEL_THREADS) + int(math.log2(CHANNEL_THREADS))


HELD_WORDS = (1, 2, 4, 8, 16)  # words a thread of the held kernels holds
HELD_FORWARD_VALUES = 32768    # 64 values a thread of 512: the forward's longest held channel


def held_shape(count: int, HW: int, itemsize: int, aligned: bool) -> tuple[int, int]:
    """(vec, words) of bn_forward_held / bn_backward_held for a channel of `count` values in runs of
    HW: 16-byte words where the runs are whole words, and the fewest words a thread (a power of
    two) that hold the channel in CHANNEL_THREADS threads."""
    V = 16 // itemsize
    vec = V if aligned and HW % V == 0 else 1
    need = _cdiv(count, CHANNEL_THREADS * vec)
    return vec, next(w for w in HELD_WORDS if w >= need)


def _held_instances(values: int, vecs: tuple) -> list[tuple[int, int]]:
    """The (vec, words) instantiated for channels of up to `values` values."""
    return [(v, w) for v in vecs for w in HELD_WORDS if v * w <= values // CHANNEL_THREADS]


@lru_cache(maxsize=1024)
def nchw_plan(N: int, C: int, HW: int, itemsize: int, aligned: bool, sms: int = 132) -> Plan:
    """Grid (C, S) of PARTIAL_THREADS: slices of whole vectors when HW is a multiple of the 16-byte
    vector (and x is aligned), so that a vector never crosses a sample's run of HW values. The last
    block merges: one channel's S states, a warp's work, as the finalize kernel would give it."""
    count = N * HW
    assert count > 0 and C > 0
    V = 16 // itemsize
    vec = V if aligned and HW % V == 0 else 1
    target = WAVES * sms * (THREADS_PER_SM // PARTIAL_THREADS)
    S, per_slice = _slices(target, C, count // vec, MIN_VALUES // vec)
    per_slice *= vec  # in values; count is a multiple of vec
    fold = vec if vec > 1 else CHUNK
    levels = _cdiv(per_slice, PARTIAL_THREADS * fold) + fold + int(math.log2(PARTIAL_THREADS)) + _merge_levels(S)
    return Plan(False, vec, S, per_slice, (C, S), (PARTIAL_THREADS,), levels)


def _column_tiles(C: int, itemsize: int, aligned: bool) -> tuple[int, int, int, int]:
    """(vec, TX, TY, tiles) of columns input: 16-byte vectors where C allows, TX threads across a
    tile of TX * vec columns (fewer than COLUMN_TX when C is narrow), TY = COLUMN_THREADS / TX."""
    V = 16 // itemsize
    vec = V if aligned and C % V == 0 else 1
    TX = min(COLUMN_TX, 1 << (_cdiv(C, vec) - 1).bit_length())
    return vec, TX, COLUMN_THREADS // TX, _cdiv(C, TX * vec)


@lru_cache(maxsize=1024)
def columns_plan(R: int, C: int, itemsize: int, aligned: bool, sms: int = 132) -> Plan:
    """Grid (column tiles, S), block (TX, TY): TX threads across a tile of TX * vec columns (fewer
    than COLUMN_TX when C is narrow), TY = COLUMN_THREADS / TX row-threads; a slice is at least
    CHUNK rows per row-thread, MIN_VALUES values, and STATE_SHARE times the bytes of its states.
    The last block merges a tile's S states per column when they number at most LAST_BLOCK_STATES."""
    assert R > 0 and C > 0
    vec, TX, TY, tiles = _column_tiles(C, itemsize, aligned)
    width = TX * vec
    target = WAVES * sms * (THREADS_PER_SM // COLUMN_THREADS)
    min_rows = max(TY * CHUNK, _cdiv(MIN_VALUES, min(width, C)), _cdiv(STATE_SHARE * STATE_BYTES, itemsize))
    S, per_slice = _slices(target, tiles, R, min_rows)
    levels = _cdiv(per_slice, TY * CHUNK) + CHUNK + int(math.log2(TY)) + _merge_levels(S)
    return Plan(True, vec, S, per_slice, (tiles, S), (TX, TY), levels, min(width, C) * S <= LAST_BLOCK_STATES)


@lru_cache(maxsize=1024)
def resident_plan(R: int, C: int, itemsize: int, aligned: bool, capacity: int) -> Plan | None:
    """columns_plan's tiles for the resident kernels: S blocks a tile, all `capacity` resident blocks
    shared among the tiles (floor: the grid must fit), a slice at least a chunk a row-thread and
    STATE_SHARE times its states' bytes, at most MAX_SLICES; None where the tiles alone do not fit."""
    assert R > 0 and C > 0
    vec, TX, TY, tiles = _column_tiles(C, itemsize, aligned)
    if tiles > capacity:
        return None
    min_rows = max(TY * CHUNK, _cdiv(STATE_SHARE * STATE_BYTES, itemsize))
    S = max(1, min(capacity // tiles, R // min_rows, MAX_SLICES))
    per_slice = _cdiv(R, S)
    S = _cdiv(R, per_slice)
    levels = _cdiv(per_slice, TY * CHUNK) + CHUNK + int(math.log2(TY)) + _merge_levels(S)
    return Plan(True, vec, S, per_slice, (tiles, S), (TX, TY), levels, False)


@lru_cache(maxsize=1024)
def elementwise_plan(total: int, C: int, HW: int, columns: bool, itemsize: int, aligned: bool,
                     sms: int = 132) -> Elementwise:
    """16-byte vectors when every vector stays in one channel (NCHW, HW a multiple of the width) or
    holds vec adjacent channels (columns, C a multiple of the width); else one element at a time.
    Grid-stride: at most one full wave of resident blocks."""
    V = 16 // itemsize
    if aligned and (C if columns else HW) % V == 0:
        vec, cl = V, columns
    else:
        vec, cl = 1, False
    blocks = max(1, min(_cdiv(total, vec * ELEMENTWISE_THREADS), sms * (THREADS_PER_SM // ELEMENTWISE_THREADS)))
    return Elementwise(cl, vec, 1 if columns else HW, (blocks,), (ELEMENTWISE_THREADS,))


def slice_bounds(extent: int, per_slice: int) -> list[tuple[int, int]]:
    """The [start, end) of each slice, as the kernels compute them: start = s * per_slice,
    end = min(start + per_slice, extent)."""
    return [(s * per_slice, min(s * per_slice + per_slice, extent)) for s in range(_cdiv(extent, per_slice))]


def column_tiles(plan: Plan, C: int) -> list[list[tuple[int, int]]]:
    """Per tile, the [c0, c0 + vec) columns of its TX threads that lie in 0 .. C - 1."""
    TX = plan.block[0]
    return [[(c0, c0 + plan.vec) for c0 in ((t * TX + tx) * plan.vec for tx in range(TX)) if c0 < C]
            for t in range(plan.grid[0])]


_STATS = ("ptr",) * 10 + ("int64",) * 4 + ("T_ACC", "T_ACC")
_STATS_CL = ("ptr",) * 10 + ("int64",) * 3 + ("T_ACC", "T_ACC")
_FINALIZE = ("ptr",) * 8 + ("int64",) * 3 + ("T_ACC", "T_ACC")
_ELEMENTWISE = ("ptr",) * 3 + ("int64",) * 3
_BWD_PARTIALS = ("ptr",) * 10 + ("int64",) * 4
_BWD_PARTIALS_CL = ("ptr",) * 10 + ("int64",) * 3
_BWD_FINALIZE = ("ptr",) * 7 + ("int64",) * 3
_DX = ("ptr",) * 4 + ("int64",) * 3
_FWD_RESIDENT = ("ptr",) * 11 + ("int64",) * 3 + ("T_ACC", "T_ACC")
_BWD_RESIDENT = ("ptr",) * 10 + ("int64",) * 3
_FWD_HELD = ("ptr",) * 8 + ("int64",) * 3 + ("T_ACC", "T_ACC")
_BWD_HELD = ("ptr",) * 8 + ("int64",) * 3


def _instantiations() -> list:
    out = []
    for T in STORAGE.values():
        vecs = (1, 16 // T.itemsize)
        # parameters in x's type, or float32 with 16-bit x (torch's mixed case), as batchnorm.py
        for P in dict.fromkeys((T, float_)):
            for t in (PARTIAL, PARTIAL_CL, BWD_PARTIALS, BWD_PARTIALS_CL, FWD_RESIDENT, BWD_RESIDENT):
                out += [t[T, float_, P, v] for v in vecs]
            out += [FINALIZE[T, float_, P], BWD_FINALIZE[T, float_, P]]
            # the forward holds HELD_FORWARD_VALUES only in 16-byte words (held_forward_values)
            fwd = _held_instances(ONE_BLOCK_VALUES, vecs[:1]) + _held_instances(HELD_FORWARD_VALUES, vecs[1:])
            out += [FWD_HELD[T, float_, P, v, w] for v, w in fwd]
            out += [BWD_HELD[T, float_, P, v, w] for v, w in _held_instances(ONE_BLOCK_VALUES, vecs)]
        for cl, v in ((False, 1), (False, vecs[1]), (True, vecs[1])):
            out += [APPLY[T, float_, cl, v], BWD_DX[T, float_, cl, v]]
    return out


SOURCE = cuda_source(registry.BY_NAME["bn_split"].source, lambda: _instantiations())
PARTIAL = KernelTemplate("bn_partial_stats", _STATS, SOURCE, "ladder")
PARTIAL_CL = KernelTemplate("bn_partial_stats_cl", _STATS_CL, SOURCE, "ladder")
FINALIZE = KernelTemplate("bn_finalize_stats", _FINALIZE, SOURCE, "ladder")
APPLY = KernelTemplate("bn_apply", _ELEMENTWISE, SOURCE, "ladder")
BWD_PARTIALS = KernelTemplate("bn_backward_partials", _BWD_PARTIALS, SOURCE, "ladder")
BWD_PARTIALS_CL = KernelTemplate("bn_backward_partials_cl", _BWD_PARTIALS_CL, SOURCE, "ladder")
BWD_FINALIZE = KernelTemplate("bn_backward_finalize", _BWD_FINALIZE, SOURCE, "ladder")
BWD_DX = KernelTemplate("bn_backward_dx", _DX, SOURCE, "ladder")
FWD_RESIDENT = KernelTemplate("bn_forward_cl_resident", _FWD_RESIDENT, SOURCE, "ladder")
BWD_RESIDENT = KernelTemplate("bn_backward_cl_resident", _BWD_RESIDENT, SOURCE, "ladder")
FWD_HELD = KernelTemplate("bn_forward_held", _FWD_HELD, SOURCE, "ladder")
BWD_HELD = KernelTemplate("bn_backward_held", _BWD_HELD, SOURCE, "ladder")

# The last-block merges' arrival counters: int32, zero when no launch is running, as every launch
# leaves them. One array per (device, stream): two launches in flight on different streams would
# otherwise take each other's tickets. Grown, never shrunk; zeroed once, by torch.zeros on that
# stream. A CUDA graph captured on a stream bakes in that stream's array (allocated from the
# graph's pool if the capture makes the first call there; kept alive here); replays leave it at 0
# too, but a replay must not overlap another replay or eager calls on the capture stream.
_ARRIVED: dict = {}
# The resident kernels' tile barriers, (count, generation) a tile: the same per-stream arrays, apart,
# since a generation is left moved on where a counter is left at 0.
_BARRIERS: dict = {}


def _arrivals(device, n: int, arrays: dict = _ARRIVED):
    """At least n counters for the launches about to go on torch's current stream."""
    key = (str(device), runtime.get().getCurrentCUDAStream())  # the stream launch() uses
    buf = arrays.get(key)
    if buf is None or buf.numel() < n:
        size = max(n, 1024, 2 * buf.numel() if buf is not None else 0)
        buf = arrays[key] = torch.zeros(size, dtype=torch.int32, device=device)
    return buf


def _layout(x):
    """(X, columns, memory format): x as the kernels read it. NCHW-contiguous x is (N, C, HW), or
    columns when HW = 1; 4-D channels-last x is columns (R = N * H * W); anything else is made
    contiguous first."""
    if x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
        return x, True, torch.channels_last
    X = x.contiguous()
    return X, math.prod(X.shape[2:]) == 1, torch.contiguous_format


def _sms() -> int:
    return runtime.get().getCurrentDeviceProperties()["multiProcessorCount"]


def _aligned(*tensors) -> bool:
    return all(t.data_ptr() % 16 == 0 for t in tensors)


def _statistics_plan(X, columns: bool, aligned: bool, sms: int) -> Plan:
    N, C = X.shape[0], X.shape[1]
    HW = X.numel() // (N * C)
    if columns:
        return columns_plan(N * HW, C, X.element_size(), aligned, sms)
    return nchw_plan(N, C, HW, X.element_size(), aligned, sms)


def takes_resident(direction: str, nbytes: int, itemsize: int) -> bool:
    """The size rule: whether columns input of `nbytes` takes one launch in `direction`."""
    return RESIDENT and nbytes >= RESIDENT_FROM_BYTES[direction][itemsize]


def _resident(kernel, direction: str, R: int, C: int, itemsize: int, aligned: bool, sms: int) -> Plan | None:
    """The resident plan for columns input, or None: RESIDENT off, x smaller than the direction's
    RESIDENT_FROM_BYTES, or tiles too many to stay resident."""
    if not takes_resident(direction, R * C * itemsize, itemsize):
        return None
    rt = runtime.get()
    per_sm = rt.resident_blocks(kernel, COLUMN_THREADS) if hasattr(rt, "resident_blocks") else None
    return resident_plan(R, C, itemsize, aligned, sms * (per_sm or RESIDENT_BLOCKS))


def _launch_resident(kernel, plan: Plan, device, C: int, state: int, coefs: int, args_before, args_after):
    """One cooperative launch of a resident kernel: a workspace of `coefs` per-channel coefficients
    (the forward's, shared through global memory; 0 for the backward) then the S * C partial states
    of `state` floats, the stream's tile barriers. Returns the workspace (alive until the launch is
    queued)."""
    ws = torch.empty(coefs * C + state * plan.slices * C, dtype=torch.float32, device=device)
    bar = _arrivals(device, 2 * plan.grid[0], _BARRIERS).data_ptr()
    part = ws.data_ptr() + 4 * coefs * C
    launch_cooperative(kernel, plan.grid, plan.block, 0, *args_before(part, bar, ws.data_ptr()), *args_after)
    return ws


def _ptr(t) -> int:
    return t.data_ptr() if t is not None else 0


def _two_pass(X, others, columns: bool, C: int, HW: int, sms: int, coefs: int, state: int):
    """What a reduce-then-elementwise pass needs: the statistics plan, the elementwise plan, one
    float32 workspace of `coefs` per-channel coefficients followed by the S * C partial states of
    `state` floats (returned, so it lives until the launches are queued, and pointers into it), and
    the arrival counters when the last block merges. The 16-byte loads need every tensor aligned."""
    aligned = _aligned(X, *others)
    plan = _statistics_plan(X, columns, aligned, sms)
    ew = elementwise_plan(X.numel(), C, HW, columns, X.element_size(), aligned, sms)
    ws = torch.empty(coefs * C + state * plan.slices * C, dtype=torch.float32, device=X.device)
    arrived = _arrivals(X.device, plan.grid[0]).data_ptr() if plan.last_block else 0
    return plan, ew, ws, ws.data_ptr(), ws.data_ptr() + 4 * coefs * C, arrived


def _forward(x, weight, bias, running_mean, running_var, momentum, eps):
    """The launches; (y, save_mean, save_invstd, X), X being x as read (saved for backward)."""
    T, P = check_train_inputs(x, weight, bias, running_mean, running_var, "batch_norm_train_forward_split")
    X, columns, _ = _layout(x)
    N, C = X.shape[0], X.shape[1]
    HW = X.numel() // (N * C) if N * C else 0
    Y = torch.empty_like(X)
    save_mean = torch.empty(C, dtype=torch.float32, device=x.device)
    save_invstd = torch.empty_like(save_mean)
    if N * HW and C:
        sms = _sms()
        stats = (save_mean.data_ptr(), save_invstd.data_ptr())
        running = (_ptr(running_mean), _ptr(running_var))
        aligned = _aligned(X, Y)
        if one_block_per_channel(N, C, HW, columns, sms, held_forward_values(HW, X.element_size(), aligned)):
            vec, words = held_shape(N * HW, HW, X.element_size(), aligned)
            launch(FWD_HELD[T, float_, P, vec, words], (C,), (CHANNEL_THREADS,), 0, X.data_ptr(), _ptr(weight),
                   _ptr(bias), Y.data_ptr(), *stats, *running, N, C, HW, float(momentum), float(eps))
            return Y, save_mean, save_invstd, X
        kernel = FWD_RESIDENT[T, float_, P, 16 // X.element_size() if aligned else 1]
        plan = _resident(kernel, "forward", N * HW, C, X.element_size(), aligned, sms) if columns else None
        if plan is not None:
            kernel = FWD_RESIDENT[T, float_, P, plan.vec]
            _launch_resident(kernel, plan, x.device, C, 3, 3,
                             lambda part, bar, coef: (X.data_ptr(), Y.data_ptr(), part, bar, _ptr(weight),
                                                      _ptr(bias), *stats, coef, *running),
                             (N * HW, C, plan.per_slice, float(momentum), float(eps)))
            return Y, save_mean, save_invstd, X
        # [mean | invstd * w | b] for the elementwise pass, then the S * C partial states (n, mean, M2)
        plan, ew, ws, coef, part, arrived = _two_pass(X, (Y,), columns, C, HW, sms, coefs=3, state=3)
        S = plan.slices
        out = (_ptr(weight), _ptr(bias), *stats, coef, *running)
        scalars = (float(momentum), float(eps))
        if columns:
            launch(PARTIAL_CL[T, float_, P, plan.vec], plan.grid, plan.block, 0, X.data_ptr(), part, arrived, *out,
                   N * HW, C, plan.per_slice, *scalars)
        else:
            launch(PARTIAL[T, float_, P, plan.vec], plan.grid, plan.block, 0, X.data_ptr(), part, arrived, *out,
                   N, C, HW, plan.per_slice, *scalars)
        if not plan.last_block:
            launch(FINALIZE[T, float_, P], (_cdiv(32 * C, FINALIZE_THREADS),), (FINALIZE_THREADS,), 0, part, *out,
                   S, C, N * HW, *scalars)
        launch(APPLY[T, float_, ew.cl, ew.vec], ew.grid, ew.block, 0, X.data_ptr(), Y.data_ptr(), coef, X.numel(), C,
               ew.hw)
    return Y, save_mean, save_invstd, X


class _SplitFunction(torch.autograd.Function):
    """The split forward with the split backward recorded; save_mean and save_invstd are outputs
    without gradients, the running statistics buffers updated in place."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
        y, save_mean, save_invstd, X = _forward(x, weight, bias, running_mean, running_var, momentum, eps)
        ctx.save_for_backward(X, weight, save_mean, save_invstd)
        ctx.bias_dtype = bias.dtype if bias is not None else None
        ctx.mark_non_differentiable(save_mean, save_invstd)
        return y, save_mean, save_invstd

    @staticmethod
    def backward(ctx, dy, _dmean, _dinvstd):
        X, weight, save_mean, save_invstd = ctx.saved_tensors
        dx, dweight, dbias = batch_norm_train_backward_split(dy, X, weight, save_mean, save_invstd)
        if dbias is None and ctx.needs_input_grad[2]:
            # a bias without a weight (F.batch_norm allows it): its gradient is sum(dy) alone
            dbias = dy.float().sum([0, *range(2, dy.dim())]).to(ctx.bias_dtype)
        need = ctx.needs_input_grad
        return (dx if need[0] else None, dweight if need[1] else None, dbias if need[2] else None,
                None, None, None, None)


def batch_norm_train_forward_split(x, weight=None, bias=None, running_mean=None, running_var=None,
                                   momentum: float = 0.1, eps: float = 1e-5):
    """The split training forward on torch CUDA tensors: (y, save_mean, save_invstd), y in x's memory
    format, the saved statistics C float32 values; running_mean / running_var (both or neither)
    updated in place. The checks of batch_norm_train_forward, all before any launch. Records the
    split backward when autograd needs one."""
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, weight, bias)):
        return _SplitFunction.apply(x, weight, bias, running_mean, running_var, momentum, eps)
    return _forward(x, weight, bias, running_mean, running_var, momentum, eps)[:3]


def batch_norm_train_backward_split(dy, x, weight, save_mean, save_invstd):
    """torch's training-mode BatchNorm backward: (dx, dweight, dbias) from the forward's saved
    statistics; dweight and dbias (weight's type) are None when weight is None. dy is brought to x's
    memory format; dx comes back in it. Everything is checked before any launch."""
    who = "batch_norm_train_backward_split"
    T, P = check_train_inputs(x, weight, None, None, None, who)
    C = x.shape[1]
    if not isinstance(dy, torch.Tensor) or dy.shape != x.shape or dy.dtype != x.dtype or dy.device != x.device:
        raise ValueError(f"{who}: dy must be a {x.dtype} tensor of x's shape {tuple(x.shape)} on {x.device}")
    for name, t in (("save_mean", save_mean), ("save_invstd", save_invstd)):
        if (not isinstance(t, torch.Tensor) or t.shape != (C,) or t.dtype != torch.float32 or t.device != x.device
                or not t.is_contiguous()):
            raise ValueError(f"{who}: {name} must be a contiguous float32 vector of {C} on {x.device}")
    X, columns, fmt = _layout(x)
    DY = dy.contiguous(memory_format=fmt)
    DX = torch.empty_like(X)
    N = X.shape[0]
    HW = X.numel() // (N * C) if N * C else 0
    dweight = torch.empty(C, dtype=weight.dtype, device=x.device) if weight is not None else None
    dbias = torch.empty_like(dweight) if weight is not None else None
    if N * HW and C:
        sms = _sms()
        stats = (save_mean.data_ptr(), save_invstd.data_ptr(), _ptr(weight))
        if one_block_per_channel(N, C, HW, columns, sms):
            vec, words = held_shape(N * HW, HW, X.element_size(), _aligned(X, DY, DX))
            launch(BWD_HELD[T, float_, P, vec, words], (C,), (CHANNEL_THREADS,), 0, DY.data_ptr(), X.data_ptr(),
                   *stats, _ptr(dweight), _ptr(dbias), DX.data_ptr(), N, C, HW)
            return DX, dweight, dbias
        aligned = _aligned(X, DY, DX)
        kernel = BWD_RESIDENT[T, float_, P, 16 // X.element_size() if aligned else 1]
        plan = _resident(kernel, "backward", N * HW, C, X.element_size(), aligned, sms) if columns else None
        if plan is not None:
            kernel = BWD_RESIDENT[T, float_, P, plan.vec]
            _launch_resident(kernel, plan, x.device, C, 2, 0,
                             lambda part, bar, _: (DY.data_ptr(), X.data_ptr(), DX.data_ptr(), *stats, part, bar,
                                                   _ptr(dweight), _ptr(dbias)),
                             (N * HW, C, plan.per_slice))
            return DX, dweight, dbias
        # [mean | mean_dy | invstd^2 * mean_dy_xmu | invstd * w] for dx, then S * C partial sums
        plan, ew, ws, coef, part, arrived = _two_pass(X, (DY, DX), columns, C, HW, sms, coefs=4, state=2)
        S = plan.slices
        grads = (_ptr(dweight), _ptr(dbias), coef)
        if columns:
            launch(BWD_PARTIALS_CL[T, float_, P, plan.vec], plan.grid, plan.block, 0, DY.data_ptr(), X.data_ptr(),
                   *stats, part, arrived, *grads, N * HW, C, plan.per_slice)
        else:
            launch(BWD_PARTIALS[T, float_, P, plan.vec], plan.grid, plan.block, 0, DY.data_ptr(), X.data_ptr(),
                   *stats, part, arrived, *grads, N, C, HW, plan.per_slice)
        if not plan.last_block:
            launch(BWD_FINALIZE[T, float_, P], (_cdiv(32 * C, FINALIZE_THREADS),), (FINALIZE_THREADS,), 0, part,
                   *stats, *grads, S, C, N * HW)
        launch(BWD_DX[T, float_, ew.cl, ew.vec], ew.grid, ew.block, 0, DY.data_ptr(), X.data_ptr(), DX.data_ptr(), coef,
               X.numel(), C, ew.hw)
    return DX, dweight, dbias
