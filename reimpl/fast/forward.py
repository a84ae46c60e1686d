"""The fast forward kernels (reimpl/fast/cuda/fast_layer_norm.cu) as kernel objects and their launch
plan (which instance, grid, block and shared memory for M rows of N).
reimpl/fast/runtime.py decides when it runs.
"""
from __future__ import annotations

from pathlib import Path

from ..device.compile import CudaSource
from ..device.kernel_types import KernelTemplate
from ..mirror import kernel_table as K

REGISTER_VECTORS = (8, 16, 32)  # R: vectors per thread kept in registers (2048 < N <= 16384)
WARP_VECTORS = (1, 2, 4)  # RW: the warp kernel's vectors per virtual thread (N <= 2048)
GROUP_LANES = (1, 2, 4, 8, 16, 32)  # G: the group kernel's lanes per row (N <= 128)
GROUP_SETS = 8  # K: sets of 32 / G rows a warp of the group kernel loads at once
STREAM_CHUNK = 16  # U: vectors a thread of the stream kernel loads at once
STREAM_BLOCKS = 2  # stream-kernel blocks per SM its shared memory is sized for
REGISTER_ROWS_PER_SM = 24  # 16-bit LayerNorm rows of 8192 < N <= 16384 keep the registers above this
SHARED_PER_SM = 228 * 1024  # bytes of shared memory per SM on sm_90 (the H100's and H200's)
RESERVED_PER_BLOCK = 1024  # shared memory the driver keeps for each block (sm_8x, sm_90)
WARPS_PER_BLOCK = 4
# the lane kernel's rows: this many 16-byte chunks. At 64 (16-bit N = 512, fp32 256) it measured slower
# than the warp kernel (bf16 131072 x 512 LayerNorm: 61% of copy against 96%; results/lane_probe.json)
LANE_CHUNKS = (8, 16, 32)
LANE_WARPS = 2  # the lane kernel's warps per block
LANE_SETS = 1  # the lane kernel's sets of 32 rows a warp (2: the next set's copy in flight)
LANE_ROWS_PER_SM = (128, 1024)  # rows per SM the lane kernel needs: all its rows; the longest, RMSNorm or fp32
THREADS = 128  # torch's virtual threads per row, and the block of the per-row kernel


def _affine():
    for T in (K.float_, K.Half, K.BFloat16):
        for rms in (False, True):
            for g, b in ((True, True), (True, False), (False, False)):
                if not (rms and b):
                    yield T, rms, g, b


def _instantiations() -> list:
    out = []
    for T, rms, g, b in _affine():
        out += [TEMPLATE[(T, K.float_, rms, g, b, R)] for R in register_vectors(T, rms)]
        out.append(STREAM_TEMPLATE[(T, K.float_, rms, g, b, STREAM_CHUNK)])
        out += [WARP_TEMPLATE[(T, K.float_, rms, g, b, RW, WARPS_PER_BLOCK, rows, full)]
                for RW, rows, full in _warp_shapes(T)]
        out += [GROUP_TEMPLATE[(T, K.float_, rms, g, b, G, WARPS_PER_BLOCK, full, GROUP_SETS)] for G in GROUP_LANES
                for full in ((True,) if G == 1 else (False, True))]
        out += [LANE_TEMPLATE[(T, K.float_, rms, g, b, 4 * c // K.sizeof(T), LANE_WARPS, LANE_SETS)]
                for c in LANE_CHUNKS]
    return out


_PARAMS = ("int", "T_ACC", "ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "int64")
SOURCE = CudaSource(Path(__file__).parent / "cuda", "fast_layer_norm.cu", lambda: _instantiations(),
                    include_dirs=(K.SOURCE.directory,))
TEMPLATE = KernelTemplate("fast_layer_norm_kernel", _PARAMS, SOURCE, "reimpl_fast")
WARP_TEMPLATE = KernelTemplate("fast_layer_norm_warp_kernel", _PARAMS, SOURCE, "reimpl_fast")
GROUP_TEMPLATE = KernelTemplate("fast_layer_norm_group_kernel", _PARAMS, SOURCE, "reimpl_fast")
STREAM_TEMPLATE = KernelTemplate("fast_layer_norm_stream_kernel", _PARAMS, SOURCE, "reimpl_fast")
LANE_TEMPLATE = KernelTemplate("fast_layer_norm_lane_kernel", _PARAMS, SOURCE, "reimpl_fast")


def lane_vectors(T, N: int) -> int | None:
    """The lane kernel's NV (vectors of 4 a row) for rows of N elements of T, where it takes them:
    rows of 8, 16 or 32 chunks of 16 bytes (16-bit N = 64, 128, 256; fp32 N = 32, 64, 128)."""
    chunks, rest = divmod(N * K.sizeof(T), 16)
    return N // 4 if rest == 0 and chunks in LANE_CHUNKS else None


def lane_rows(T, rms: bool, M: int, N: int, sms: int) -> bool:
    """Whether M rows of N are enough for the lane kernel. Each warp takes 32 rows and runs its copy,
    its statistics and its stores one after the other, so it needs several warps per SM to overlap
    them; with one (fp16 4097 x 256 LayerNorm) it measured slower than the warp kernel (61% of copy
    against 98%), and at 64 rows per SM too (bf16 8448 x 256: 53% against 66%). From 128 rows per SM
    it is ahead on rows of up to 16 chunks, and on 16-bit LayerNorm rows of 32, whose warp kernel
    runs its tree on counts it does not know (bf16 16896 x 256: 61% against 56%). Rows of 32 chunks
    in RMSNorm or fp32, where the warp kernel already reaches 81-97%, go to it from 1024 rows per SM
    only (bf16 67584 x 256 RMSNorm: 86% against 89%; fp32 33792 x 128 LayerNorm: 80% against 84%;
    on 262144 rows both ahead). results/lane_probe.json, results/lane_rows_probe.json (pipelined)."""
    few, many = LANE_ROWS_PER_SM
    short = N * K.sizeof(T) <= 16 * 16 or (K.sizeof(T) == 2 and not rms)
    return M >= (few if short else many) * sms


def lane_shared(T, N: int, warps: int = LANE_WARPS, sets: int = LANE_SETS) -> int:
    """The lane kernel's dynamic shared memory: each warp's sets of 32 rows."""
    return warps * sets * 32 * N * K.sizeof(T)


def group_lanes(N: int) -> int | None:
    """The group kernel's lanes per row for rows of N elements: N / 4 vectors rounded up to a power
    of two, where that is at most a warp (only torch's first warp then holds anything); else None."""
    n_vec = N // 4
    return next((G for G in GROUP_LANES if G >= n_vec), None)


def takes_full(N: int, RW: int) -> bool:
    """The warp kernel's `full` instance (every virtual thread holds RW vectors, so all counts are
    constants): N = 512 or 1024. At N = 2048 (RW = 4) it measured slower (H100, bf16 4096 x 2048
    LayerNorm: 78% of copy against 88%), so that row keeps the general instance."""
    return RW <= 2 and N == 4 * THREADS * RW


FOUR_ROW_BAND = (16, 48)  # rows per SM for which full 16-bit 1024-element rows go four to a warp


def rows_per_warp(T, RW: int, full: bool, M: int, sms: int) -> int:
    """16-bit rows of up to 1024 elements go two to a warp: the weights are loaded once, before the
    statistics, and converted once for both rows. At RW = 4 no registers are left to load them
    early, and one row a warp measured faster (H100, bf16 4096 x 2048: 86% of copy against 84%).
    Full 1024-element rows go four to a warp when the grid is about one wave (16 to 48 rows per SM):
    then every warp loads at once and computes at once, and finishing one pair while the other's
    loads land gains 3 to 4 points (H100, bf16 4096 x 1024 LayerNorm: 85% against 82%;
    results/fast_experiments.json). With more rows, other blocks fill that gap and two measured
    as fast or faster; with fewer, four-row warps leave SMs idle."""
    if K.sizeof(T) != 2 or RW > 2:
        return 1
    low, high = FOUR_ROW_BAND
    return 4 if full and RW == 2 and low * sms <= M <= high * sms else 2


def _warp_shapes(T) -> list[tuple[int, int, bool]]:
    """Every (RW, rows per warp, full) the plan can choose for element type T."""
    out = []
    for RW in WARP_VECTORS:
        for full in (False, True) if RW <= 2 else (False,):
            # one SM: an M below the four-row band and one inside it
            rows = {rows_per_warp(T, RW, full, M, 1) for M in (0, FOUR_ROW_BAND[0])}
            out += [(RW, r, full) for r in sorted(rows)]
    return out


def vectors_per_thread(N: int) -> int:
    """A thread's share of a row of N elements in 4-element vectors, on torch's 128 threads."""
    return -(-(N // 4) // THREADS)


def register_vectors(T, rms: bool) -> tuple[int, ...]:
    """The register kernel's R for element type T: 32 only where `streams` can keep it (16-bit LayerNorm)."""
    return REGISTER_VECTORS if K.sizeof(T) == 2 and not rms else REGISTER_VECTORS[:-1]


def stash_bytes(T, N: int, shared_per_sm: int = SHARED_PER_SM) -> int:
    """The stream kernel's dynamic shared memory for rows of N: as many of each thread's vectors as
    fit when STREAM_BLOCKS blocks share an SM (after the driver's reserve and the kernel's 24 static
    bytes), at most all of them. The size also caps the blocks an SM holds, and so the rows in flight."""
    vector = 128 * 4 * K.sizeof(T)  # one vector for each of the block's threads
    budget = shared_per_sm // STREAM_BLOCKS - RESERVED_PER_BLOCK - 32
    return min(vectors_per_thread(N), max(budget, 0) // vector) * vector


def plan(T, rms: bool, has_gamma: bool, has_beta: bool, M: int, N: int, sms: int,
         shared_per_sm: int = SHARED_PER_SM, aligned16: bool = True):
    """(kernel, grid, block, shared). Rows of 8, 16 or 32 chunks of 16 bytes go to the lane kernel
    where X, the weights and Y are 16-byte aligned (`aligned16`) and `lane_rows` finds M large
    enough, 32 rows a warp; other rows of up
    to 128 elements go to groups of lanes, 32 / G rows
    a warp at a time; rows of up to 2048 elements go one warp per row, four rows a block; longer ones
    one (32, 4) block per row, either holding its share in R registers or, where `streams` says so,
    streaming it with as much of the row in shared memory as stash_bytes allows. RW and R are the smallest
    that hold a thread's share, so every thread fills more than half of its slots: the kernels skip
    the bounds checks on that first half. `sms` (the device's SM count) decides rows per warp for
    grids of about one wave; `shared_per_sm` (its shared memory per SM) the stream kernel's stash."""
    NV = lane_vectors(T, N) if aligned16 and lane_rows(T, rms, M, N, sms) else None
    if NV is not None:
        kernel = LANE_TEMPLATE[(T, K.float_, rms, has_gamma, has_beta, NV, LANE_WARPS, LANE_SETS)]
        return kernel, (-(-M // (32 * LANE_WARPS * LANE_SETS)),), (32, LANE_WARPS), lane_shared(T, N)
    G = group_lanes(N)
    if G is not None:
        rows = WARPS_PER_BLOCK * (32 // G) * GROUP_SETS
        full = G == N // 4  # every lane of a group holds a vector: constant counts
        kernel = GROUP_TEMPLATE[(T, K.float_, rms, has_gamma, has_beta, G, WARPS_PER_BLOCK, full, GROUP_SETS)]
        return kernel, (-(-M // rows),), (32, WARPS_PER_BLOCK), 0
    per_thread = vectors_per_thread(N)
    RW = next((r for r in WARP_VECTORS if r >= per_thread), None)
    if RW is not None:
        full = takes_full(N, RW)
        rows = rows_per_warp(T, RW, full, M, sms)
        kernel = WARP_TEMPLATE[(T, K.float_, rms, has_gamma, has_beta, RW, WARPS_PER_BLOCK, rows, full)]
        return kernel, (-(-M // (WARPS_PER_BLOCK * rows)),), (32, WARPS_PER_BLOCK), 0
    if not streams(T, rms, M, N, sms):
        R = next(r for r in REGISTER_VECTORS if r >= per_thread)
        return TEMPLATE[(T, K.float_, rms, has_gamma, has_beta, R)], (M,), (32, 4), 0
    return STREAM_TEMPLATE[(T, K.float_, rms, has_gamma, has_beta, STREAM_CHUNK)], (M,), (32, 4), \
        stash_bytes(T, N, shared_per_sm)


def streams(T, rms: bool, M: int, N: int, sms: int) -> bool:
    """Whether rows of more than 2048 elements go to the stream kernel rather than the register one:
    always past 32 vectors a thread (N > 16384), where they do not fit; at 17 to 32 (8192 < N <= 16384)
    too, where a block per row holding 32 vectors a thread leaves too few blocks per SM to hide its
    loads (results/fast_forward_probe.json: fp32 8192 x 16384 LayerNorm 82% -> 91% of copy, bf16
    512 x 16384 50% -> 77%), except 16-bit LayerNorm on more than REGISTER_ROWS_PER_SM rows per
    SM, which measured within 2 points of it or ahead in registers (bf16 8192 x 16384: 88% against
    84%; results/fast_forward_probe.json, part `route`)."""
    per_thread = vectors_per_thread(N)
    if per_thread <= 16:
        return False
    if per_thread > 32 or rms or K.sizeof(T) == 4:
        return True
    return M <= REGISTER_ROWS_PER_SM * sms


def takes(has_gamma: bool, has_beta: bool, rms: bool) -> bool:
    """Affine combinations the fast kernel serves. Bias without weight is left to the mirror: torch's
    SASS contracts `rstd * (x - mean) + beta` into an FFMA for most unrolled elements but not all
    (results/sass_fma_table.md, layer_norm_kernel.cu:347-348), a choice a rewrite cannot promise."""
    return not (has_beta and not has_gamma and not rms)

