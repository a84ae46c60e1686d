"""The forward kernels of reimpl/mirror/cuda/layer_norm_kernel.cu, one NumPy function per device function,
same names and statement order. A kernel takes a `block.Block` then its C++ arguments; pointers
are flat NumPy arrays (None for nullptr), T is an `fp.ElementType`, T_ACC is its `acc`.

"// SASS:" notes say what our sm_90 cubin (NVRTC 13.0, -fmad=true -ftz=false) executes for the
line: FFMA = fused (one rounding, `fma`), FMUL+FADD = two roundings. They were read from
`nvdisasm --print-line-info` on a -lineinfo build; they hold for float, Half and BFloat16 alike
(the loads and stores differ, the arithmetic does not), and for double with D* instructions.
"""
from __future__ import annotations

import numpy as np

from . import rsqrt as _rsqrt
from . import trace
from .block import Block
from .fp import ElementType, fma
from .warp import C10_WARP_SIZE, WARP_SHFL, WARP_SHFL_DOWN
from .welford import BlockReduce, WelfordData, WelfordOps

vec_size = 4
f32 = np.float32


def compat_rsqrt(x):
    """c10::cuda::compat::rsqrt: rsqrtf for float (measured table), rsqrt for double."""
    x = np.asarray(x)
    return _rsqrt.rsqrt64(x) if x.dtype == np.float64 else _rsqrt.rsqrtf(x)


# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L58-L98
# ours: reimpl/mirror/cuda/layer_norm_kernel.cu [RowwiseMomentsCUDAKernel]
def RowwiseMomentsCUDAKernel(blk: Block, T: ElementType, rms_norm: bool,
                             N: int, eps, X, mean, rstd) -> None:
    acc = T.acc
    tid = blk.threadIdx_x
    threads = blk.nthreads
    val_shared: list = [None] * C10_WARP_SIZE
    i = blk.blockIdx_x
    welford_op = WelfordOps(correction=0, take_sqrt=False)
    val = WelfordData.filled(threads, acc)
    steps = (N - tid[0] + blk.blockDim[0] - 1) // blk.blockDim[0] if N > 0 else 0
    for s in range(max(steps, 0)):                       # for (j = threadIdx.x; j < N; j += blockDim.x)
        j = tid + s * blk.blockDim[0]
        active = j < N
        index = i * N + np.minimum(j, N - 1)
        with np.errstate(all="ignore"):
            new = welford_op.reduce(val, T.load(X[index]), index)
        val = new.where(active, val)
        trace.emit("reduce", s, f"j = threadIdx.x + {s}*blockDim.x", active, index,
                   mean=val.mean, m2=val.m2, n=val.n, nf=val.nf)
    with np.errstate(all="ignore"):
        val = BlockReduce(val, welford_op, WelfordData.filled(threads, acc), val_shared,
                          tid, blk.blockDim[0])
        # threadIdx.x == 0
        m2, m1 = welford_op.project(WelfordData(*(f[:1] for f in val.fields())))
        eps = acc(eps)
        if not rms_norm:
            mean[i] = m1[0]
            rstd[i] = compat_rsqrt(m2 + eps)[0]                   # FADD; rsqrt
        else:
            rstd[i] = compat_rsqrt(fma(m1, m1, m2) + eps)[0]      # FFMA(m1, m1, m2); FADD
        trace.emit("moments", 0, "thread 0: mean, rstd", tid == 0, None,
                   mean=np.full(threads, m1[0]), rstd=np.full(threads, rstd[i]))


# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L100-L124
# ours: reimpl/mirror/cuda/layer_norm_kernel.cu [LayerNormForwardCUDAKernel]
def LayerNormForwardCUDAKernel(blk: Block, T: ElementType, rms_norm: bool,
                               N: int, X, mean, rstd, gamma, beta, Y) -> None:
    acc = T.acc
    i = blk.blockIdx_x
    tid = blk.threadIdx_x
    bd = blk.blockDim[0]
    for j0 in range(0, N, bd):                            # for (j = threadIdx.x; j < N; j += blockDim.x)
        j = (tid + j0)[tid + j0 < N]
        index = i * N + j
        gamma_v = np.full(len(j), 1, acc) if gamma is None else T.load(gamma[j])
        with np.errstate(all="ignore"):
            if not rms_norm:
                beta_v = np.full(len(j), 0, acc) if beta is None else T.load(beta[j])
                centered = T.load(X[index]) - acc(mean[i])                      # FADD
                if gamma is not None:
                    out = fma(gamma_v, centered * acc(rstd[i]), beta_v)         # FMUL; FFMA
                else:
                    # SASS: with gamma == nullptr the compiler drops the `* 1` (exact) and fuses
                    # the rstd multiply with the add instead: one FFMA (against +0 when no beta)
                    out = fma(centered, acc(rstd[i]), beta_v)                   # FFMA
                Y[index] = T.store(out)
            else:
                # SASS: FMUL; FMUL
                Y[index] = T.store(T.load(X[index]) * acc(rstd[i]) * gamma_v)
        if trace.active():
            act = tid + j0 < N
            out = np.zeros(len(tid), acc)
            out[act] = T.load(Y[index])
            trace.emit("fwd_output", j0 // bd, f"j = threadIdx.x + {j0}", act, np.where(act, tid + j0, -1),
                       out=out)


# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L126-L132
# ours: reimpl/mirror/cuda/layer_norm_kernel.cu [WelfordDataLN]  (three per-thread float32 arrays)
class WelfordDataLN:
    __slots__ = ("mean", "sigma2", "count")

    def __init__(self, mean, sigma2, count):
        self.mean, self.sigma2, self.count = (np.asarray(v, f32) for v in (mean, sigma2, count))

    def where(self, cond, other: "WelfordDataLN") -> "WelfordDataLN":
        return WelfordDataLN(np.where(cond, self.mean, other.mean), np.where(cond, self.sigma2, other.sigma2),
                             np.where(cond, self.count, other.count))


# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L134-L152
# ours: reimpl/mirror/cuda/layer_norm_kernel.cu [cuWelfordOnlineSum]
def cuWelfordOnlineSum(rms_norm: bool, val, curr_sum: WelfordDataLN) -> WelfordDataLN:
    if not rms_norm:
        delta = val - curr_sum.mean                                      # FADD
        new_count = curr_sum.count + f32(1)                              # FADD
        new_mean = fma(delta, f32(1) / new_count, curr_sum.mean)         # IEEE 1/x (RCP+FFMA); FFMA
        return WelfordDataLN(new_mean, fma(delta, val - new_mean, curr_sum.sigma2), new_count)  # FADD; FFMA
    else:
        z = np.zeros_like(curr_sum.sigma2)
        return WelfordDataLN(z, fma(val, val, curr_sum.sigma2), z)       # FFMA


# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L154-L183
# ours: reimpl/mirror/cuda/layer_norm_kernel.cu [cuWelfordCombine]
def cuWelfordCombine(rms_norm: bool, dataB: WelfordDataLN, dataA: WelfordDataLN) -> WelfordDataLN:
    if not rms_norm:
        delta = dataB.mean - dataA.mean                                  # FADD
        count = dataA.count + dataB.count                                # FADD
        positive = count > 0
        with np.errstate(divide="ignore", invalid="ignore"):  # count 0: the branch below discards it
            coef = f32(1) / count                                        # IEEE 1/x (RCP+FFMA)
            nA = dataA.count * coef                                      # FMUL
            nB = dataB.count * coef                                      # FMUL
            mean = fma(nA, dataA.mean, nB * dataB.mean)                  # FMUL (nB*B.mean); FFMA
            sigma2 = fma(nB, delta * delta * dataA.count,                # FMUL, FMUL; FADD; FFMA
                         dataA.sigma2 + dataB.sigma2)
        return WelfordDataLN(np.where(positive, mean, f32(0)), np.where(positive, sigma2, f32(0)), count)
    else:
        z = np.zeros_like(dataB.sigma2)
        return WelfordDataLN(z, dataB.sigma2 + dataA.sigma2, z)         # FADD


# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L185-L245
# ours: reimpl/mirror/cuda/layer_norm_kernel.cu [compute_stats]
def compute_stats(blk: Block, T: ElementType, rms_norm: bool, X, N: int, buf: np.ndarray) -> WelfordDataLN:
    """X is this block's row (a flat array of N elements); buf is the dynamic shared memory as float32."""
    bx, by, _ = blk.blockDim
    numx = bx * by
    thrx = blk.threadIdx_x + blk.threadIdx_y * bx
    n_vec_to_read = N // vec_size
    wd = WelfordDataLN(np.zeros(numx), np.zeros(numx), np.zeros(numx))
    for i0 in range(0, n_vec_to_read, numx):              # for (i = thrx; i < n_vec_to_read; i += numx)
        i = thrx + i0
        active = i < n_vec_to_read
        base = np.minimum(i, n_vec_to_read - 1) * vec_size
        for ii in range(vec_size):                         # vec_t data = X_vec[i]; unrolled
            new = cuWelfordOnlineSum(rms_norm, T.load(X[base + ii]), wd)
            wd = new.where(active, wd)
            trace.emit("online", i0 // numx * vec_size + ii, f"i = thrx + {i0}, ii = {ii}", active,
                       i * vec_size + ii, mean=wd.mean, sigma2=wd.sigma2, count=wd.count)
    offset = C10_WARP_SIZE >> 1
    while offset > 0:                                      # shuffle-down rounds 16, 8, 4, 2, 1
        wdB = WelfordDataLN(WARP_SHFL_DOWN(wd.mean, offset), WARP_SHFL_DOWN(wd.sigma2, offset),
                            WARP_SHFL_DOWN(wd.count, offset))
        wd = cuWelfordCombine(rms_norm, wd, wdB)
        if trace.active():
            trace.emit("shfl_down", 4 - int(np.log2(offset)), f"offset = {offset}", True,
                       WARP_SHFL_DOWN(thrx, offset), mean=wd.mean, sigma2=wd.sigma2, count=wd.count)
        offset >>= 1
    tx, ty = blk.threadIdx_x, blk.threadIdx_y
    if by > 1:
        meansigmabuf = buf                                 # buf[0 : by]
        countbuf = buf[by:]                                # buf[by : by + by/2]
        offset = by // 2
        rnd = 0
        while offset > 0:
            writers = (tx == 0) & (ty >= offset) & (ty < 2 * offset)
            for t in np.flatnonzero(writers):
                wrt_y = ty[t] - offset
                meansigmabuf[2 * wrt_y] = wd.mean[t]
                meansigmabuf[2 * wrt_y + 1] = wd.sigma2[t]
                countbuf[wrt_y] = wd.count[t]
            trace.emit("smem_write", rnd, f"offset = {offset}: warps [{offset}, {2 * offset}) write",
                       writers, ty - offset, mean=wd.mean, sigma2=wd.sigma2, count=wd.count)
            # __syncthreads()
            readers = (tx == 0) & (ty < offset)
            yy = np.where(readers, ty, 0)
            wdB = WelfordDataLN(meansigmabuf[2 * yy], meansigmabuf[2 * yy + 1], countbuf[yy])
            wd = cuWelfordCombine(rms_norm, wd, wdB).where(readers, wd)
            trace.emit("smem_combine", rnd, f"offset = {offset}: warps [0, {offset}) combine",
                       readers, ty, mean=wd.mean, sigma2=wd.sigma2, count=wd.count)
            # __syncthreads()
            offset //= 2
            rnd += 1
        meansigmabuf[0] = wd.mean[0]                       # thread (0, 0)
        meansigmabuf[1] = wd.sigma2[0] / f32(N)            # IEEE division (RCP+FFMA+FCHK)
        # __syncthreads()
        return WelfordDataLN(np.full(numx, meansigmabuf[0]), np.full(numx, meansigmabuf[1]), np.zeros(numx))
    else:
        return WelfordDataLN(WARP_SHFL(wd.mean, 0), WARP_SHFL(wd.sigma2, 0) / f32(N), np.zeros(numx))


# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L248-L325
# ours: reimpl/mirror/cuda/layer_norm_kernel.cu [vectorized_layer_norm_kernel_impl]
# (vectorized_layer_norm_kernel, L342-L353, is a thin wrapper: it is this function here)
def vectorized_layer_norm_kernel_impl(blk: Block, T: ElementType, rms_norm: bool,
                                      N: int, eps, X, gamma, beta, mean, rstd, Y) -> None:
    assert T.acc is np.float32, "double never takes the vectorized path (the host checks)"
    s_data = blk.shared.view(f32)
    i1 = blk.blockIdx_x
    block_row = X[i1 * N:(i1 + 1) * N]
    with np.errstate(all="ignore"):
        wd = compute_stats(blk, T, rms_norm, block_row, N, s_data)
        trace.emit("stats", 0, "compute_stats returns (mean, sigma2 / N)", True, None,
                   mean=wd.mean, sigma2=wd.sigma2)
        bx, by, _ = blk.blockDim
        numx = bx * by
        thrx = blk.threadIdx_x + blk.threadIdx_y * bx
        n_vec_to_read = N // vec_size
        rstd_val = compat_rsqrt(wd.sigma2 + f32(eps))      # FADD; rsqrtf
        trace.emit("rstd", 0, "rsqrt(sigma2 + eps)", True, None, rstd=rstd_val)
        Y_row = Y[i1 * N:(i1 + 1) * N]
        for i0 in range(0, n_vec_to_read, numx):
            i = (thrx + i0)[thrx + i0 < n_vec_to_read]
            r = rstd_val[:len(i)]
            m = wd.mean[:len(i)]
            for ii in range(vec_size):
                e = i * vec_size + ii
                x = T.load(block_row[e])
                if gamma is not None and beta is not None:
                    if not rms_norm:
                        out = fma(T.load(gamma[e]), r * (x - m), T.load(beta[e]))   # FADD; FMUL; FFMA
                    else:
                        out = T.load(gamma[e]) * (r * x)                            # FMUL; FMUL
                elif gamma is not None:
                    if not rms_norm:
                        out = T.load(gamma[e]) * (r * (x - m))                      # FADD; FMUL; FMUL
                    else:
                        out = T.load(gamma[e]) * (r * x)                            # FMUL; FMUL
                elif beta is not None:
                    if not rms_norm and ii == 0:
                        # SASS: FMUL + FADD for element 0 only. The compiler computes
                        # rstd*(x0 - mean) once, before the gamma/beta branches (the no-affine
                        # branch needs the same product), so it cannot fuse it with this add.
                        out = (r * (x - m)) + T.load(beta[e])                       # FADD; FMUL; FADD
                    else:
                        out = fma(r, x - m, T.load(beta[e]))                        # FADD; FFMA
                else:
                    if not rms_norm:
                        out = r * (x - m)                                           # FADD; FMUL
                    else:
                        out = r * x                                                 # FMUL
                Y_row[e] = T.store(out)                    # the store rounds to T
                if trace.active():
                    act = thrx + i0 < n_vec_to_read
                    v = np.zeros(numx, f32)
                    v[act] = T.load(Y_row[e])
                    trace.emit("output", i0 // numx * vec_size + ii, f"i = thrx + {i0}, ii = {ii}", act,
                               np.where(act, (thrx + i0) * vec_size + ii, -1), out=v)
        if not rms_norm:                                   # thrx == 0
            mean[i1] = wd.mean[0]
        rstd[i1] = rstd_val[0]
