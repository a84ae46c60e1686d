"""The backward kernels of reimpl/mirror/cuda/layer_norm_kernel.cu, one NumPy function per device function,
same names and statement order, plus the one torch kernel whose order matters: the `.sum(0)` that
finishes the partial GammaBeta path.

Blocks of these kernels never communicate, so a launch runs several whole blocks at once: every
per-thread value is one array over the threads of the batch, block-major, each block's threads in
linear order (x fastest). A warp is then 32 consecutive entries (every block here has a multiple of
32 threads), so warp.py's shuffles apply unchanged; shared memory is an array [blocks, slots]. A
template bool that a kernel picks per block at run time (GammaBeta's check_x / check_y) becomes a
per-thread bool array. Pointers are flat NumPy arrays (None for nullptr); T is an `fp.ElementType`.

"# SASS:" notes say what our sm_90 cubin (NVRTC 13.0, -fmad=true -ftz=false; read with
`nvdisasm --print-line-info` on a -lineinfo build, whose instructions equal the plain build's)
executes for a line: FFMA is one rounding (`fma`), FMUL / FADD one rounding each. They hold for
float, Half and BFloat16 (loads and stores differ, arithmetic does not) and for double with D*
instructions. Divisions are IEEE (MUFU.RCP + FFMA refinement with a slow path), as NumPy's `/`.
No backward kernel uses atomics (no ATOM/RED in any of the 160 instantiations), so nothing here
depends on the order in which blocks run.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import fp, trace
from .block_reduce import BlockReduceSum
from .fp import ElementType
from .warp import C10_WARP_SIZE, WARP_SHFL, WARP_SHFL_DOWN, WARP_SHFL_XOR

vec_size = 4
kWarpSize = C10_WARP_SIZE
BATCH_THREADS = 1 << 20   # threads emulated together (bounds memory; any size gives the same bits)


def fma(a, b, c):
    """FFMA / DFMA (one rounding). For double, where a or b is 0 the product is an exact zero and
    a*b + c is already the DFMA's result (sign of zero included); the rest goes to fp's vectorised
    DFMA where that exists, else to the exact scalar one."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v) for v in (a, b, c)))
    if a.dtype != np.float64:
        return fp.fma(a, b, c)
    with np.errstate(all="ignore"):
        out = a * b + c
    hard = (a != 0) & (b != 0) | ~np.isfinite(a) | ~np.isfinite(b)
    if hard.any():
        dfma = getattr(fp, "fma64_vec", fp.fma64)
        out[hard] = dfma(a[hard], b[hard], c[hard])
    return out


# ---- a batch of blocks ---------------------------------------------------------------------------
@dataclass
class Blocks:
    """Whole blocks of one launch, run together. Per-thread arrays cover all their threads."""
    grid: tuple[int, int, int]
    blockDim: tuple[int, int, int]
    ids: np.ndarray           # linear block ids (blockIdx.x + blockIdx.y * gridDim.x), in order
    blockIdx_x: np.ndarray    # per thread
    blockIdx_y: np.ndarray
    threadIdx_x: np.ndarray
    threadIdx_y: np.ndarray
    shared: np.ndarray        # [blocks, bytes] dynamic shared memory

    @property
    def nthreads(self) -> int:
        return self.blockDim[0] * self.blockDim[1]

    @property
    def tid(self) -> np.ndarray:
        """threadIdx.x + threadIdx.y * blockDim.x."""
        return self.threadIdx_x + self.threadIdx_y * self.blockDim[0]

    @property
    def local(self) -> np.ndarray:
        """Each thread's block within the batch (0 .. len(ids) - 1)."""
        return np.arange(len(self.threadIdx_x)) // self.nthreads

    def shared_as(self, dtype) -> np.ndarray:
        return self.shared.view(dtype)

    def emit(self, kind: str, index: int, detail: str, active, aux, **values) -> None:
        """trace.emit, block by block (the trace holds one block per step)."""
        if not trace.active():
            return
        nt, n = self.nthreads, len(self.threadIdx_x)
        act = np.broadcast_to(np.asarray(active, bool), (n,))
        aux_a = np.broadcast_to(np.asarray(trace.AUX_NONE if aux is None else aux, np.int64), (n,))
        vals = {k: np.broadcast_to(v, (n,)) for k, v in values.items()}
        for b, bid in enumerate(self.ids):
            s = slice(b * nt, (b + 1) * nt)
            trace.set_block(int(bid))
            trace.emit(kind, index, detail, act[s], aux_a[s], **{k: v[s] for k, v in vals.items()})


class _Emitter:
    """What block_reduce's functions call to trace (partner lanes made local to the block)."""

    def __init__(self, blk: Blocks):
        self.blk, self.nthreads = blk, blk.nthreads

    def __call__(self, *a, **kw):
        self.blk.emit(*a, **kw)


def launch(kernel, grid, block_dim, nshared: int, *args) -> None:
    """kernel<<<grid, block_dim, nshared>>>(args), blocks in linear order, BATCH_THREADS at a time."""
    gx, gy, gz = grid
    bx, by, bz = block_dim
    assert gz == 1 and bz == 1
    nt = bx * by
    assert nt % C10_WARP_SIZE == 0, "a warp would straddle two blocks"
    total = gx * gy
    per = max(1, BATCH_THREADS // nt)
    t = np.arange(nt)
    for start in range(0, total, per):
        ids = np.arange(start, min(total, start + per))
        bid = np.repeat(ids, nt)
        blk = Blocks((gx, gy, gz), (bx, by, bz), ids, bid % gx, bid // gx,
                     np.tile(t % bx, len(ids)), np.tile(t // bx, len(ids)),
                     np.zeros((len(ids), max(nshared, 8)), np.uint8))
        kernel(blk, *args)


def _load(T: ElementType, a, index, active):
    """T(a[index]) as T_ACC where active, 0 elsewhere (inactive threads touch no memory)."""
    v = T.load(a[np.where(active, index, 0)])
    return np.where(active, v, T.acc(0))


# ==== grad input ==================================================================================
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L356-L439
# ours: reimpl/mirror/cuda/layer_norm_kernel.cu [compute_gI]
def compute_gI(blk: Blocks, T: ElementType, rms_norm: bool,
               dY, X, mean, rstd, gamma, dX, N: int, buf: np.ndarray) -> None:
    """buf: the blocks' shared memory as T_ACC, [blocks, 4]."""
    acc = T.acc
    i1 = blk.blockIdx_x
    mean_val = acc(0) if rms_norm else mean[i1].astype(acc)
    rstd_val = rstd[i1].astype(acc)
    n = len(i1)
    stats_x1, stats_x2 = np.zeros(n, acc), np.zeros(n, acc)
    unroll = 4
    bdx = blk.blockDim[0]
    l = unroll * blk.threadIdx_x                                        # noqa: E741
    base = i1.astype(np.int64) * N            # i1 * N in unsigned int upstream: no wrap below 2^32 elements

    def step(active, e):
        nonlocal stats_x1, stats_x2
        gamma_val = np.full(n, acc(1)) if gamma is None else _load(T, gamma, e, active)
        c_h = _load(T, X, base + e, active)
        c_loss = _load(T, dY, base + e, active)
        p = c_loss * gamma_val                                          # FMUL
        if not rms_norm:
            x1 = stats_x1 + p                                           # FADD
            x2 = fma(rstd_val, p * (c_h - mean_val), stats_x2)          # FADD; FMUL; FFMA
            stats_x1 = np.where(active, x1, stats_x1)
        else:
            x2 = fma(rstd_val, p * c_h, stats_x2)                       # FMUL; FMUL; FFMA
        stats_x2 = np.where(active, x2, stats_x2)

    with np.errstate(all="ignore"):
        while True:                                # for (; l + unroll - 1 < N; l += blockDim.x * unroll)
            active = l + unroll - 1 < N
            if not active.any():
                break
            for k in range(unroll):
                step(active, l + k)
            l = np.where(active, l + bdx * unroll, l)                   # noqa: E741
        while True:                                # for (; l < N; l++): the last N % 4, one at a time
            active = l < N
            if not active.any():
                break
            step(active, l)
            l = np.where(active, l + 1, l)                              # noqa: E741
        blk.emit("gi_sums", 0, "each thread's sums after its loops", True, None, stats_x1=stats_x1, stats_x2=stats_x2)
        _finish_gI(blk, T, rms_norm, stats_x1, stats_x2, buf)
        stats_x1, stats_x2 = _read_stats(blk, rms_norm, buf)
        fH = acc(N)                                                      # I2F (round to nearest)
        term1 = (acc(1) / fH) * rstd_val                                 # IEEE 1/x; FMUL
        for j0 in range(0, N, bdx):                 # for (l = threadIdx.x; l < N; l += blockDim.x)
            l = blk.threadIdx_x + j0                                     # noqa: E741
            active = l < N
            x = _load(T, X, base + l, active)
            dy = _load(T, dY, base + l, active)
            gamma_val = np.full(n, acc(1)) if gamma is None else _load(T, gamma, l, active)
            f = _grad_input(rms_norm, fH, gamma_val, dy, x, mean_val, rstd_val, stats_x1, stats_x2, term1)
            idx = (base + l)[active]
            dX[idx] = T.store(f[active])
            _emit_dx(blk, T, dX, base, l, active, j0 // bdx, f"l = threadIdx.x + {j0}")


def _grad_input(rms_norm, fH, gamma_val, dy, x, mean_val, rstd_val, stats_x1, stats_x2, term1):
    """dX's arithmetic, shared by both grad-input kernels (their SASS is the same):
    f = fH*gamma*dy - x_hat*stats_x2 (- stats_x1), times term1."""
    if not rms_norm:
        # SASS: FMUL(fH, gamma); FADD(x - mean); FMUL(*rstd); FMUL(*stats_x2); FFMA(fH*gamma, dy, -that)
        f = fma(fH * gamma_val, dy, -(stats_x2 * (rstd_val * (x - mean_val))))
        f = f - stats_x1                                                 # FADD
    else:
        f = fma(fH * gamma_val, dy, -(stats_x2 * (rstd_val * x)))        # FMUL; FMUL; FMUL; FFMA
    return f * term1                                                     # FMUL


def _emit_dx(blk, T, dX, base, l, active, index, detail):
    if trace.active():
        v = np.zeros(len(l), T.acc)
        v[active] = T.load(dX[(base + l)[active]])
        blk.emit("gi_dx", index, detail, active, np.where(active, l, trace.AUX_NONE), dx=v)


def _finish_gI(blk: Blocks, T, rms_norm, stats_x1, stats_x2, buf) -> None:
    """The two BlockReduceSums, then thread 0 publishes the row's sums in buf[0..1]."""
    em = _Emitter(blk)
    tid = blk.threadIdx_x
    if not rms_norm:
        stats_x1 = BlockReduceSum(stats_x1, buf, tid, blk.blockDim[0], _emit=em, _phase="stats_x1, ")
    stats_x2 = BlockReduceSum(stats_x2, buf, tid, blk.blockDim[0], _emit=em, _phase="stats_x2, ")
    t0 = tid == 0                                                        # if (threadIdx.x == 0)
    b = blk.local[t0]
    if not rms_norm:
        buf[b, 0] = stats_x1[t0]
    buf[b, 1] = stats_x2[t0]
    # __syncthreads()


def _read_stats(blk: Blocks, rms_norm, buf):
    b = blk.local
    stats_x1 = np.zeros(len(b), buf.dtype) if rms_norm else buf[b, 0]
    stats_x2 = buf[b, 1]
    blk.emit("gi_stats", 0, "every thread reads the row's sums from buf[0..1]", True, None,
             stats_x1=stats_x1, stats_x2=stats_x2)
    return stats_x1, stats_x2


# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L442-L455
# ours: reimpl/mirror/cuda/layer_norm_kernel.cu [layer_norm_grad_input_kernel]
def layer_norm_grad_input_kernel(blk: Blocks, T: ElementType, rms_norm: bool,
                                 dY, X, mean, rstd, gamma, dX, N: int) -> None:
    buf = blk.shared_as(T.acc)
    compute_gI(blk, T, rms_norm, dY, X, mean, rstd, gamma, dX, N, buf)


# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L463-L598
# ours: reimpl/mirror/cuda/layer_norm_kernel.cu [layer_norm_grad_input_kernel_vectorized]
def layer_norm_grad_input_kernel_vectorized(blk: Blocks, T: ElementType, rms_norm: bool,
                                            dY, X, mean, rstd, gamma, dX, N: int) -> None:
    acc = T.acc
    reduce_buf = blk.shared_as(acc)
    bIdx = blk.blockIdx_x
    mean_val = acc(0) if rms_norm else mean[bIdx].astype(acc)
    rstd_val = rstd[bIdx].astype(acc)
    base = bIdx.astype(np.int64) * N
    n = len(bIdx)
    bdx = blk.blockDim[0]
    ones = np.full(n, acc(1))                         # gamma_vec_reg.val[k] = T(1): exact in every T
    stats_x1, stats_x2 = np.zeros(n, acc), np.zeros(n, acc)
    with np.errstate(all="ignore"):
        l = blk.threadIdx_x * vec_size                                   # noqa: E741
        while True:                                 # for (; l + vec_size - 1 < N; l += blockDim.x * vec_size)
            active = l + vec_size - 1 < N
            if not active.any():
                break
            for k in range(vec_size):               # the vec_t registers: X, dY, gamma at l + k
                gamma_val = ones if gamma is None else _load(T, gamma, l + k, active)
                c_h = _load(T, X, base + l + k, active)
                c_loss = _load(T, dY, base + l + k, active)
                p = c_loss * gamma_val                                   # FMUL
                if not rms_norm:
                    stats_x1 = np.where(active, stats_x1 + p, stats_x1)  # FADD
                    stats_x2 = np.where(active, fma(rstd_val, p * (c_h - mean_val), stats_x2),
                                        stats_x2)                        # FADD; FMUL; FFMA
                else:
                    stats_x2 = np.where(active, fma(rstd_val, p * c_h, stats_x2), stats_x2)  # FMUL; FMUL; FFMA
            l = np.where(active, l + bdx * vec_size, l)                  # noqa: E741
        while True:                                 # for (; l < N; l++): never runs (N % vec_size == 0)
            active = l < N
            if not active.any():
                break
            gamma_val = ones if gamma is None else _load(T, gamma, l, active)
            c_h = _load(T, X, base + l, active)
            c_loss = _load(T, dY, base + l, active)
            p = c_loss * gamma_val
            if not rms_norm:
                stats_x1 = np.where(active, stats_x1 + p, stats_x1)
                stats_x2 = np.where(active, fma(rstd_val, p * (c_h - mean_val), stats_x2), stats_x2)
            else:
                stats_x2 = np.where(active, fma(rstd_val, p * c_h, stats_x2), stats_x2)
            l = np.where(active, l + 1, l)                               # noqa: E741
        blk.emit("gi_sums", 0, "each thread's sums after its loops", True, None, stats_x1=stats_x1, stats_x2=stats_x2)
        _finish_gI(blk, T, rms_norm, stats_x1, stats_x2, reduce_buf)
        stats_x1, stats_x2 = _read_stats(blk, rms_norm, reduce_buf)
        fH = acc(N)                                                      # I2F
        term1 = (acc(1) / fH) * rstd_val                                 # IEEE 1/x; FMUL
        l = blk.threadIdx_x * vec_size                                   # noqa: E741
        it = 0
        while True:
            active = l + vec_size - 1 < N
            if not active.any():
                break
            for k in range(vec_size):
                gamma_val = ones if gamma is None else _load(T, gamma, l + k, active)
                x = _load(T, X, base + l + k, active)
                dy = _load(T, dY, base + l + k, active)
                f = _grad_input(rms_norm, fH, gamma_val, dy, x, mean_val, rstd_val, stats_x1, stats_x2, term1)
                dX[(base + l + k)[active]] = T.store(f[active])           # dX_i_vec[vec_idx] = dX_i_vec_reg
                _emit_dx(blk, T, dX, base, l + k, active, it * vec_size + k,
                         f"vec_idx = threadIdx.x + {it}*blockDim.x, k = {k}")
            l = np.where(active, l + bdx * vec_size, l)                  # noqa: E741
            it += 1
        while True:                                 # never runs either; stride blockDim.x as upstream
            active = l < N
            if not active.any():
                break
            x = _load(T, X, base + l, active)
            dy = _load(T, dY, base + l, active)
            gamma_val = ones if gamma is None else _load(T, gamma, l, active)
            f = _grad_input(rms_norm, fH, gamma_val, dy, x, mean_val, rstd_val, stats_x1, stats_x2, term1)
            dX[(base + l)[active]] = T.store(f[active])
            l = np.where(active, l + bdx, l)                             # noqa: E741


# ==== gamma / beta ================================================================================
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L640-L708
# ours: reimpl/mirror/cuda/layer_norm_kernel.cu [blockReduceGammaBetaBackwardsHelper]
def blockReduceGammaBetaBackwardsHelper(blk: Blocks, T: ElementType, block_dim_x: int, block_dim_y: int,
                                        rows_per_block_y: int, check_x, check_y, rms_norm: bool,
                                        M_start, M: int, N: int, dY, X, mean, rstd, dg, db,
                                        dg_sum, db_sum, running):
    """check_x, check_y: per-thread bools (the template flags each block chose). `running`: the
    threads whose grid-stride loop is still going; the others keep their sums. Returns the sums."""
    acc = T.acc
    rows_per_thread_y = rows_per_block_y // block_dim_y
    thread_x = blk.blockIdx_x.astype(np.int64) * block_dim_x + blk.threadIdx_x
    lane_id = (blk.threadIdx_y * blk.blockDim[0] + blk.threadIdx_x) & (kWarpSize - 1)
    mean_index = M_start + blk.threadIdx_y * rows_per_thread_y
    own = running & (lane_id < rows_per_thread_y) & (mean_index + lane_id < M)
    warp_mean = np.zeros(len(lane_id), acc)
    if not rms_norm:
        warp_mean = _load_acc(mean, mean_index + lane_id, own, acc)
    warp_rstd = _load_acc(rstd, mean_index + lane_id, own, acc)
    # WARP_SYNC()
    dY_regs, X_regs = [], []
    for i in range(rows_per_thread_y):
        current_y = M_start + blk.threadIdx_y * rows_per_thread_y + i
        active = running.copy()
        active &= ~(check_x & (thread_x >= N))
        active &= ~(check_y & (current_y >= M))
        index = current_y * N + thread_x
        dY_regs.append(_load(T, dY, index, active))                      # 0 where not loaded
        X_regs.append(_load(T, X, index, active))
    with np.errstate(all="ignore"):
        for i in range(rows_per_thread_y):
            rstd_reg = WARP_SHFL(warp_rstd, i, kWarpSize)
            if not rms_norm:
                mean_reg = WARP_SHFL(warp_mean, i, kWarpSize)
                new_dg = fma(rstd_reg, dY_regs[i] * (X_regs[i] - mean_reg), dg_sum)  # FADD; FMUL; FFMA
                new_db = db_sum + dY_regs[i]                                          # FADD
                db_sum = np.where(running, new_db, db_sum)
            else:
                new_dg = fma(rstd_reg, dY_regs[i] * X_regs[i], dg_sum)               # FMUL; FFMA
            dg_sum = np.where(running, new_dg, dg_sum)
    return dg_sum, db_sum


def _load_acc(a, index, active, acc):
    return np.where(active, a[np.where(active, index, 0)].astype(acc), acc(0))


# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L710-L744
# ours: reimpl/mirror/cuda/layer_norm_kernel.cu [blockReduceGammaBetaBackwardsWithChecks]
def blockReduceGammaBetaBackwardsWithChecks(blk: Blocks, T: ElementType, block_dim_x: int, block_dim_y: int,
                                            rows_per_block_y: int, check_x, check_y: bool, rms_norm: bool,
                                            M: int, N: int, dY, X, mean, rstd, dg, db, dg_sum, db_sum):
    M_start = blk.blockIdx_y.astype(np.int64) * rows_per_block_y
    tile = 0
    while True:           # for (M_start = blockIdx.y * rows_per_block_y; M_start < M; M_start += ...)
        running = M_start < M
        if not running.any():
            break
        M_end = M_start + rows_per_block_y - 1
        cy = np.asarray(check_y) & ~(M_end < M)      # !check_y || M_end < M: the helper without row checks
        dg_sum, db_sum = blockReduceGammaBetaBackwardsHelper(
            blk, T, block_dim_x, block_dim_y, rows_per_block_y, check_x, cy, rms_norm,
            M_start, M, N, dY, X, mean, rstd, dg, db, dg_sum, db_sum, running)
        blk.emit("gb_sums", tile, f"after the tile at M_start = blockIdx.y * {rows_per_block_y} + "
                 f"{tile} * {rows_per_block_y} * gridDim.y", running,
                 blk.blockIdx_x.astype(np.int64) * block_dim_x + blk.threadIdx_x, dg_sum=dg_sum, db_sum=db_sum)
        M_start = M_start + rows_per_block_y * blk.grid[1]
        tile += 1
    return dg_sum, db_sum


# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L758-L867
# ours: reimpl/mirror/cuda/layer_norm_kernel.cu [GammaBetaBackwardCUDAKernelTemplate]
def GammaBetaBackwardCUDAKernelTemplate(blk: Blocks, T: ElementType, block_dim_x: int, block_dim_y: int,
                                        rows_per_block_y: int, partial_reduction: bool, aligned_grid: bool,
                                        rms_norm: bool, M: int, N: int, dY, X, mean, rstd, dg, db) -> None:
    acc = T.acc
    rows_per_thread_y = rows_per_block_y // block_dim_y
    assert rows_per_thread_y <= kWarpSize
    n = len(blk.threadIdx_x)
    dg_sum, db_sum = np.zeros(n, acc), np.zeros(n, acc)
    no = np.zeros(n, bool)
    if aligned_grid:
        dg_sum, db_sum = blockReduceGammaBetaBackwardsWithChecks(
            blk, T, block_dim_x, block_dim_y, rows_per_block_y, no, False, rms_norm,
            M, N, dY, X, mean, rstd, dg, db, dg_sum, db_sum)
    else:
        # rows always checked; columns only in the last block of x (a per-block branch upstream)
        full = blk.blockIdx_x.astype(np.int64) * block_dim_x + block_dim_x - 1 < N
        dg_sum, db_sum = blockReduceGammaBetaBackwardsWithChecks(
            blk, T, block_dim_x, block_dim_y, rows_per_block_y, ~full, True, rms_norm,
            M, N, dY, X, mean, rstd, dg, db, dg_sum, db_sum)
    thread_x = blk.blockIdx_x.astype(np.int64) * block_dim_x + blk.threadIdx_x
    if partial_reduction or (blk.blockDim[1] == 1 and blk.grid[1] == 1):
        w = np.ones(n, bool) if aligned_grid else thread_x < N
        thread_y = blk.blockIdx_y.astype(np.int64) * blk.blockDim[1] + blk.threadIdx_y
        out = (thread_y * N + thread_x)[w]
        with np.errstate(over="ignore"):      # a sum past T's range stores inf, as on the GPU
            if dg is not None:
                dg[out] = T.store(dg_sum[w])
            if db is not None and not rms_norm:
                db[out] = T.store(db_sum[w])
        if trace.active():
            blk.emit("gb_out", 0, "each thread writes its own sums (row thread_y)", w,
                     np.where(w, thread_y * N + thread_x, trace.AUX_NONE),
                     dg=_stored(T, dg_sum), db=_stored(T, db_sum))
        return
    assert rows_per_thread_y <= C10_WARP_SIZE
    s_data_typed = blk.shared_as(acc)
    padded_bx = block_dim_x + 1
    # thread (x, y) stores at [y][x]; column i is then read as [lane][i]
    s_dg = s_data_typed[:, :padded_bx * block_dim_y]
    s_db = s_data_typed[:, padded_bx * block_dim_y:2 * padded_bx * block_dim_y]
    b = blk.local
    slot = blk.threadIdx_y * padded_bx + blk.threadIdx_x
    s_dg[b, slot] = dg_sum
    s_db[b, slot] = db_sum
    blk.emit("gb_smem_write", 0, "thread (x, y) stores its sums at [y][x]", True, slot, dg=dg_sum, db=db_sum)
    # __syncthreads()
    assert block_dim_x * block_dim_y % C10_WARP_SIZE == 0
    warps_available_to_reduce = block_dim_x * block_dim_y // C10_WARP_SIZE
    thread_id = blk.threadIdx_y * block_dim_x + blk.threadIdx_x
    warp_id = thread_id // C10_WARP_SIZE
    lane_id = thread_id & (C10_WARP_SIZE - 1)
    reads = lane_id < block_dim_y
    # lanes >= block_dim_y keep what their register held; the XOR tree never mixes them into lane 0's
    # group, so 0 stands in for it (their later values are not the GPU's, and are not traced)
    reg_dg, reg_db = np.zeros(n, acc), np.zeros(n, acc)
    it = 0
    with np.errstate(all="ignore"):
        while True:      # for (int i = warp_id; i < block_dim_x; i += warps_available_to_reduce)
            i = warp_id + it * warps_available_to_reduce
            going = i < block_dim_x
            if not going.any():
                break
            src = np.where(reads & going, lane_id * padded_bx + i, 0)
            reg_dg = np.where(reads & going, s_dg[b, src], reg_dg)
            reg_db = np.where(reads & going, s_db[b, src], reg_db)
            blk.emit("gb_smem_read", it, f"column i = warp_id + {it} * {warps_available_to_reduce}: lanes < "
                     f"{block_dim_y} read [lane][i]", reads & going, np.where(reads & going, src, trace.AUX_NONE),
                     dg=reg_dg, db=reg_db)
            delta = block_dim_y >> 1
            rnd = 0
            while delta >= 1:
                reg_dg = reg_dg + WARP_SHFL_XOR(reg_dg, delta, kWarpSize)        # FADD
                reg_db = reg_db + WARP_SHFL_XOR(reg_db, delta, kWarpSize)        # FADD
                if trace.active():
                    tid = np.arange(n) % blk.nthreads
                    blk.emit("gb_shfl_xor", it * 8 + rnd, f"column warp_id + {it} * {warps_available_to_reduce}, delta = {delta}", reads & going,
                             WARP_SHFL_XOR(tid, delta, kWarpSize), dg=reg_dg, db=reg_db)
                delta >>= 1
                rnd += 1
            out_index = blk.blockIdx_x.astype(np.int64) * block_dim_x + i
            w = going & (blk.threadIdx_x == 0) & (aligned_grid | (out_index < N))
            if dg is not None:
                dg[out_index[w]] = T.store(reg_dg[w])
            if db is not None and not rms_norm:
                db[out_index[w]] = T.store(reg_db[w])
            blk.emit("gb_out", it, f"lane 0 of each warp writes column warp_id + {it} * {warps_available_to_reduce}", w,
                     np.where(w, out_index, trace.AUX_NONE), dg=_stored(T, reg_dg), db=_stored(T, reg_db))
            it += 1


def _stored(T: ElementType, v):
    """What a T store keeps of v, back in T_ACC (for traces)."""
    return T.load(T.store(v))


# ==== torch's .sum(0) =============================================================================
# The partial GammaBeta path ends with `dgamma_blocks.sum(0)` on an (R, N) tensor of T, R the
# kernel's blocks.y. That is torch's generic reduction (aten/src/ATen/native/cuda/Reduce.cuh and
# ReduceSumProdKernel.cu, torch 2.11: sum_functor with acc float for Half/BFloat16, vt0 = 4 and
# input_vec_size 8 for 2-byte types, else 4). Below: its launch configuration (setReduceConfig) and
# its order of additions (thread_reduce_impl / input_vectorized_thread_reduce_impl, block_y_reduce,
# block_x_reduce, global_reduce) for the two shapes the partial path makes: N >= 2, a reduction over
# the slow dimension vectorized along the output, and N == 1, a contiguous reduction vectorized
# along the input. The configurations agree with every reduce_kernel launch in
# reference/torch_launches_backward.json (block, grid, template arguments). global_reduce's one
# atomic (the semaphore that elects the last block) does not touch the order: the last block reads
# the staged partial sums in a fixed order. Bit-exact against the H100 on every golden case
# (tests/test_emulator_golden_backward_cpu.py); other configurations raise NotImplementedError.

REDUCE_MAX_NUM_THREADS = 512          # mnt_wrapper<T>::MAX_NUM_THREADS for every real T
H100_SM_COUNT = 132
H100_MAX_THREADS_PER_SM = 2048


def _div_up(a: int, b: int) -> int:
    return (a + b - 1) // b


def _last_pow2(n: int) -> int:
    """floor to a power of two (at least 1), as Reduce.cuh's last_pow2."""
    return max(1, 1 << (int(n).bit_length() - 1)) if n > 0 else 1


@dataclass
class ReduceConfig:
    num_inputs: int
    num_outputs: int
    block_width: int = 1
    block_height: int = 1
    num_threads: int = 1
    step_input: int = 1
    step_output: int = 1
    ctas_per_output: int = 1
    input_mult: tuple = (0, 0, 0)
    output_mult: tuple = (0, 0)
    vectorize_input: bool = False
    output_vec_size: int = 1

    def split_input(self, parallelism: int) -> int:
        step = self.step_input
        self.step_input *= parallelism
        return step

    def split_output(self, parallelism: int) -> int:
        step = self.step_output
        self.step_output *= parallelism
        return step

    def values_per_thread(self) -> int:
        return _div_up(self.num_inputs, self.step_input)

    def grid(self) -> tuple[int, int]:
        return _div_up(self.num_outputs // self.output_vec_size, self.step_output), self.ctas_per_output

    def block(self) -> tuple[int, int]:
        return self.block_width, self.block_height


def setReduceConfig(R: int, N: int, itemsize: int, *, sm_count: int = H100_SM_COUNT,
                    max_threads_per_sm: int = H100_MAX_THREADS_PER_SM) -> ReduceConfig:
    """Reduce.cuh's setReduceConfig for `t.sum(0)`, t a fresh contiguous (R, N) tensor (so 16-byte
    aligned and, for N == 1, coalesced to one reduced dimension)."""
    input_vec_size = 8 if itemsize == 2 else 4
    cfg = ReduceConfig(num_inputs=R, num_outputs=N)
    inp, out = [0, 0, 0], [0, 0]
    reduction_on_fastest_striding_dimension = N == 1    # the reduced stride N is the smaller only then
    if reduction_on_fastest_striding_dimension:
        dim0, dim1 = R, N
        if dim0 > 128:                                   # "vectorize along input" (2.11: also for
            cfg.vectorize_input = True                   # 2-byte types, where vt0 < input_vec_size)
            dim0 //= input_vec_size
    else:
        dim0, dim1 = N, R
        ovs = 4                                          # get_output_vec_size: base address, N, stride N
        while N % ovs:
            ovs //= 2
        cfg.output_vec_size = ovs
        dim0 //= ovs
    max_num_threads = REDUCE_MAX_NUM_THREADS // cfg.output_vec_size       # set_block_dimension
    dim0_pow2 = _last_pow2(dim0) if dim0 < max_num_threads else max_num_threads
    dim1_pow2 = _last_pow2(dim1) if dim1 < max_num_threads else max_num_threads
    bw = min(dim0_pow2, C10_WARP_SIZE)
    bh = min(dim1_pow2, max_num_threads // bw)
    bw = min(dim0_pow2, max_num_threads // bh)
    cfg.block_width, cfg.block_height, cfg.num_threads = bw, bh, bw * bh
    if reduction_on_fastest_striding_dimension:
        inp[0] = cfg.split_input(bw)
    else:
        out[0] = cfg.split_output(bw)
    min_values_per_thread, max_values_per_thread = 16, 256
    warp_split_threshold = min(bh * 16, max_values_per_thread)
    if cfg.values_per_thread() >= warp_split_threshold:
        inp[1] = cfg.split_input(bh)
    else:
        out[1] = cfg.split_output(bh)
    blocks_per_sm = max_threads_per_sm // cfg.num_threads
    target_grid_size = sm_count * blocks_per_sm
    grid = cfg.grid()[0]
    if inp[1] != 0 and cfg.values_per_thread() >= max_values_per_thread and grid <= target_grid_size:
        c1 = _div_up(target_grid_size, grid)
        c2 = _div_up(cfg.values_per_thread(), min_values_per_thread)
        c3 = _div_up(cfg.values_per_thread(), max_values_per_thread)
        cfg.ctas_per_output = max(min(c1, c2), c3)
        if cfg.ctas_per_output > 1:
            inp[2] = cfg.split_input(cfg.ctas_per_output)
    cfg.input_mult, cfg.output_mult = tuple(inp), tuple(out)
    return cfg


def _block_y_reduce(v: np.ndarray, axis: int) -> np.ndarray:
    """block_y_reduce: shared-memory tree over threadIdx.y (axis), offsets blockDim.y/2 .. 1; thread
    y keeps v[y] + v[y + offset] (ops.combine: FADD)."""
    v = np.moveaxis(v.copy(), axis, 0)
    off = v.shape[0] // 2
    while off > 0:
        v[:off] = v[:off] + v[off:2 * off]
        off //= 2
    return np.moveaxis(v, 0, axis)


def torch_sum0(a: np.ndarray, T: ElementType, **device) -> np.ndarray:
    """`a.sum(0)` as torch 2.11 computes it on the H100 for a contiguous (R, N) tensor of T: the
    (N,) result in T's storage. `device`: sm_count / max_threads_per_sm, if not the H100's."""
    R, N = a.shape
    cfg = setReduceConfig(R, N, np.dtype(T.storage).itemsize, **device)
    acc = T.acc
    x = T.load(a.reshape(-1)).reshape(R, N)
    ident = acc(0)
    with np.errstate(all="ignore"):
        if cfg.vectorize_input:
            out = _sum_vectorized_input(x[:, 0], cfg, acc, 8 if np.dtype(T.storage).itemsize == 2 else 4)
            return T.store(np.array([out], acc))
        if cfg.input_mult[0] != 0:
            raise NotImplementedError(f"torch .sum(0) config {cfg} (block_x_reduce over a strided input)")
        ovs = cfg.output_vec_size
        bw, bh, ctas = cfg.block_width, cfg.block_height, cfg.ctas_per_output
        gx = cfg.grid()[0]
        # thread (bx, cta2, ty, tx): output_idx = (tx*om0 + ty*om1 + bx*step_output) * ovs,
        #                             input_idx = tx*im0 + ty*im1 + cta2*im2
        bx_, c_, ty_, tx_ = np.meshgrid(np.arange(gx), np.arange(ctas), np.arange(bh), np.arange(bw), indexing="ij")
        om, im = cfg.output_mult, cfg.input_mult
        out_idx = (tx_ * om[0] + ty_ * om[1] + bx_ * cfg.step_output) * ovs
        in_idx = tx_ * im[0] + ty_ * im[1] + c_ * im[2]
        valid = (out_idx < N) & (in_idx < R)
        cols = np.minimum(out_idx[..., None] + np.arange(ovs), N - 1)          # [.., ovs]
        S = cfg.step_input
        # thread_reduce_impl: the thread's k-th row (input_idx + k*stride) goes to accumulator k % vt0,
        # in increasing k (the unrolled loop and its tail agree on that); then ((a0+a1)+a2)+a3
        vt0 = 4
        accs = [np.full(cols.shape, ident) for _ in range(vt0)]
        kmax = _div_up(R, S) if S else 0
        for k in range(kmax):
            rows = in_idx + k * S
            take = valid & (rows < R)
            if not take.any():
                break
            vals = x[np.where(take, rows, 0)[..., None], cols]
            accs[k % vt0] = np.where(take[..., None], accs[k % vt0] + vals, accs[k % vt0])    # FADD
        value = accs[0]
        for i in range(1, vt0):
            value = value + accs[i]                                          # ops.combine: FADD
        value = np.where(valid[..., None], value, ident)
        if im[1] != 0:
            value = _block_y_reduce(value, axis=2)
        if ctas > 1:
            # global_reduce: every block's y == 0 threads stage their value; the last block starts
            # from ident and folds in stage[y], stage[y + bh], ... per thread y, then block_y_reduce
            staged = value[:, :, 0]                                           # [gx, ctas, bw, ovs]
            v = np.full((gx, bh, bw, ovs), ident)
            for ty in range(bh):
                for c in range(ty, ctas, bh):
                    v[:, ty] = v[:, ty] + staged[:, c]                        # FADD
            value = _block_y_reduce(v, axis=1)[:, None]                     # [gx, 1, bh, bw, ovs]
        # should_store: output_idx < num_outputs, and threadIdx.y == 0 when block_y_reduce ran
        ty = np.arange(bh)[None, :, None]
        store = (out_idx[:, 0] < N) & ((ty == 0) if im[1] != 0 else True)
        res = np.zeros(N, acc)
        idx = out_idx[:, 0][store][:, None] + np.arange(ovs)
        res[idx.reshape(-1)] = value[:, 0][store].reshape(-1)
        return T.store(res)


def _sum_vectorized_input(x: np.ndarray, cfg: ReduceConfig, acc, input_vec_size: int):
    """input_vectorized_thread_reduce_impl then block_x_reduce, for one output (N == 1); the
    buffer is aligned, so there is no unaligned head (shift = 0)."""
    if cfg.ctas_per_output > 1 or cfg.block_height != 1:
        raise NotImplementedError(f"torch .sum(0) config {cfg}")
    R = len(x)
    bw = cfg.block_width
    stride = cfg.step_input
    tx = np.arange(bw)
    value_list = [np.zeros(bw, acc) for _ in range(input_vec_size)]   # value_list[0] = ident, the rest ident
    idx = tx * cfg.input_mult[0]
    while True:                            # while (idx * input_vec_size + input_vec_size - 1 < end)
        go = idx * input_vec_size + input_vec_size - 1 < R
        if not go.any():
            break
        for i in range(input_vec_size):
            e = np.where(go, idx * input_vec_size + i, 0)
            value_list[i] = np.where(go, value_list[i] + x[e], value_list[i])            # FADD
        idx = np.where(go, idx + stride, idx)
    tail_start = R - R % input_vec_size    # should_reduce_tail(): y == 0 and blockIdx.y == 0 here
    t = tail_start + tx
    tail = t < R
    value_list[0] = np.where(tail, value_list[0] + x[np.where(tail, t, 0)], value_list[0])
    v = value_list[0]
    for i in range(1, input_vec_size):
        v = v + value_list[i]
    # block_x_reduce: shared tree down to one warp, then shuffle-down offsets 16, 8, 4, 2, 1 (the
    # descending order is torch 2.11's: the golden bits rule out the ascending 1, 2, .., 16 of
    # older Reduce.cuh versions)
    dim_x = bw
    if dim_x > C10_WARP_SIZE:
        off = dim_x // 2
        while off >= C10_WARP_SIZE:
            v = v.copy()
            v[:off] = v[:off] + v[off:2 * off]
            off //= 2
        dim_x = C10_WARP_SIZE
    v = v[:C10_WARP_SIZE] if len(v) >= C10_WARP_SIZE else np.concatenate([v, np.zeros(C10_WARP_SIZE - len(v), acc)])
    off = dim_x // 2
    while off > 0:
        v = v + WARP_SHFL_DOWN(v, off)                                   # ops.combine: FADD
        off >>= 1
    return v[0]


# ==== replay ======================================================================================
def replay_grad_input(kernel, launch_, args, ptr, T: ElementType) -> None:
    """A recorded grad-input launch on the emulator (called from api._replay)."""
    dY, X, mean, rstd, gamma, dX, N = args
    rms_norm = bool(kernel.targs[2])
    fn = (layer_norm_grad_input_kernel_vectorized if kernel.template.name.endswith("_vectorized")
          else layer_norm_grad_input_kernel)
    launch(lambda blk, *a: fn(blk, T, rms_norm, *a), launch_.grid, launch_.block, launch_.shared,
           ptr(dY), ptr(X), ptr(mean), ptr(rstd), ptr(gamma), ptr(dX), int(N))


def replay_gamma_beta(kernel, launch_, args, ptr, T: ElementType) -> None:
    """A recorded GammaBetaBackwardCUDAKernelTemplate launch on the emulator."""
    M, N, dY, X, mean, rstd, dg, db = args
    _, _, bx, by, rows, partial, aligned, rms = kernel.targs
    rows_written = launch_.grid[1] * launch_.block[1] if partial or launch_.grid[1] > 1 else 1
    for name, p in (("dgamma", dg), ("dbeta", db)):
        if p and ptr(p).size < rows_written * N:
            # upstream sizes dgamma_blocks by dgamma.size(-1), which is N only for a 1-D normalized_shape
            raise NotImplementedError(
                f"the partial GammaBeta kernel would write {rows_written} x {N} elements into a {name} buffer of "
                f"{ptr(p).size} (normalized_shape of more than one dim on torch 2.11's partial path: past the "
                "end of the buffer on the GPU, undefined there)")
    launch(lambda blk, *a: GammaBetaBackwardCUDAKernelTemplate(blk, T, int(bx), int(by), int(rows), bool(partial),
                                                              bool(aligned), bool(rms), *a),
           launch_.grid, launch_.block, launch_.shared,
           int(M), int(N), ptr(dY), ptr(X), ptr(mean), ptr(rstd), ptr(dg), ptr(db))
