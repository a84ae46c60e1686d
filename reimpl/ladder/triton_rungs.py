"""The ladder's Triton rungs: LayerNorm and RMSNorm forward, a tile of one or more whole rows a
program (rows addressed through a stride), its shape set by `fwd_plan`, and their backward: dX per row, and
dgamma/dbeta as per-program partial sums in a buffer that a second kernel reduces. The forward
follows the structure of Triton's layer-norm tutorial; the deterministic two-kernel reduction of
the weight gradients replaces the tutorial's locked accumulation. Written by us.

Triton is imported on first use, so the package imports (and the site builds) without it.
`layer_norm(x, w, b, eps)` and `rms_norm(x, w, eps)` are differentiable; `run(name, x, w, b, eps)`
gives the ladder's `(y, mean, rstd)`; the rungs `triton_ln` and `triton_rms` are declared in
registry.py.
"""
from __future__ import annotations

import functools

MAX_FUSED_BYTES = 65536  # a row up to this size is held in registers by one program
# fwd_plan's two numbers (scripts/gpu/triton_probe.py times the others): a program's tile covers at
# least TILE_BYTES of x (whole rows, several of them where rows are short), and its warps give each
# thread THREAD_BYTES of the tile (1 to 16 warps)
TILE_BYTES = 2048
THREAD_BYTES = 128


def fwd_plan(N: int, itemsize: int) -> tuple[int, int, int]:
    """(BLOCK, ROWS, num_warps) of the forward for rows of N: BLOCK columns (N's next power of two, at
    most MAX_FUSED_BYTES of a row; longer rows go in BLOCK-wide tiles), ROWS rows a program, and the
    warps that share the tile."""
    block = min(1 << max(N - 1, 0).bit_length(), MAX_FUSED_BYTES // itemsize)
    rows = max(1, TILE_BYTES // (block * itemsize)) if N <= block else 1
    warps = min(16, max(1, rows * block * itemsize // (32 * THREAD_BYTES)))
    return block, rows, warps


def bwd_plan(N: int) -> tuple[int, int]:
    """(BLOCK, num_warps) of the backward's program for rows of N: the whole row in one tile of N's
    next power of two, 8 warps from tiles of 4096 columns on, else 4."""
    block = 1 << max(N - 1, 0).bit_length()
    return block, 8 if block >= 4096 else 4


@functools.cache
def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def ln_fwd(X, Y, W, B, Mean, Rstd, stride, M, N, eps, BLOCK: tl.constexpr, ROWS: tl.constexpr,
               HAS_W: tl.constexpr, HAS_B: tl.constexpr, RMS: tl.constexpr, ONE_TILE: tl.constexpr):
        if ONE_TILE:
            # ROWS whole rows fit one tile: read them once and keep them in registers for all three steps
            rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
            cols = tl.arange(0, BLOCK)
            in_row = cols < N
            mask = (rows[:, None] < M) & in_row[None, :]
            at = rows[:, None].to(tl.int64) * stride + cols[None, :]
            x = tl.load(X + at, mask=mask, other=0.0).to(tl.float32)
            if RMS:
                mean = tl.zeros([ROWS], dtype=tl.float32)
            else:
                mean = tl.sum(x, axis=1) / N
            d = tl.where(mask, x - mean[:, None], 0.0)
            rstd = 1 / tl.sqrt(tl.sum(d * d, axis=1) / N + eps)
            if not RMS:
                tl.store(Mean + rows, mean, mask=rows < M)
            tl.store(Rstd + rows, rstd, mask=rows < M)
            y = d * rstd[:, None]
            if HAS_W:
                y = y * tl.load(W + cols, mask=in_row).to(tl.float32)[None, :]
            if HAS_B:
                y = y + tl.load(B + cols, mask=in_row).to(tl.float32)[None, :]
            tl.store(Y + at, y.to(Y.dtype.element_ty), mask=mask)
        else:
            # longer rows, in BLOCK-wide tiles, a program a row. Pass 1: the mean (skipped for RMSNorm)
            row = tl.program_id(0)
            X += row.to(tl.int64) * stride
            Y += row.to(tl.int64) * stride
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            if not RMS:
                for off in range(0, N, BLOCK):
                    cols = off + tl.arange(0, BLOCK)
                    acc += tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
                mean = tl.sum(acc, axis=0) / N
            else:
                mean = 0.0
            # pass 2: the variance about that mean (two-pass, so no cancellation)
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for off in range(0, N, BLOCK):
                cols = off + tl.arange(0, BLOCK)
                x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
                d = tl.where(cols < N, x - mean, 0.0)
                acc += d * d
            rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
            if not RMS:
                tl.store(Mean + row, mean)
            tl.store(Rstd + row, rstd)
            # pass 3: normalise
            for off in range(0, N, BLOCK):
                cols = off + tl.arange(0, BLOCK)
                mask = cols < N
                x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
                y = (x - mean) * rstd
                if HAS_W:
                    y = y * tl.load(W + cols, mask=mask).to(tl.float32)
                if HAS_B:
                    y = y + tl.load(B + cols, mask=mask).to(tl.float32)
                tl.store(Y + cols, y.to(Y.dtype.element_ty), mask=mask)

    @triton.jit
    def ln_bwd_dx(X, DY, DX, W, Mean, Rstd, DW_part, DB_part, stride, M, N, rows_per_prog,
                  BLOCK: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, RMS: tl.constexpr):
        # one program takes rows_per_prog rows: dX for each, and its own partial dW / dB row
        pid = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        if HAS_W:
            w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        else:
            w = tl.full([BLOCK], 1.0, dtype=tl.float32)
        dw = tl.zeros([BLOCK], dtype=tl.float32)
        db = tl.zeros([BLOCK], dtype=tl.float32)
        for r in range(0, rows_per_prog):
            row = pid * rows_per_prog + r
            if row < M:
                x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
                dy = tl.load(DY + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
                rstd = tl.load(Rstd + row)
                if RMS:
                    xhat = tl.where(mask, x * rstd, 0.0)
                else:
                    xhat = tl.where(mask, (x - tl.load(Mean + row)) * rstd, 0.0)
                g = dy * w
                c1 = tl.sum(xhat * g, axis=0) / N
                if RMS:
                    dx = (g - xhat * c1) * rstd
                else:
                    c2 = tl.sum(g, axis=0) / N
                    dx = (g - (xhat * c1 + c2)) * rstd
                tl.store(DX + row * stride + cols, dx.to(DX.dtype.element_ty), mask=mask)
                dw += dy * xhat
                db += dy
        if HAS_W:
            tl.store(DW_part + pid * N + cols, dw, mask=mask)
        if HAS_B:
            tl.store(DB_part + pid * N + cols, db, mask=mask)

    @triton.jit
    def column_sum(Part, Out, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
        # the second kernel: sum the P partial rows of each column block, in a fixed order
        pid = tl.program_id(0)
        cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
        for p0 in range(0, P, BLOCK_P):
            rows = p0 + tl.arange(0, BLOCK_P)
            m = (rows[:, None] < P) & (cols[None, :] < N)
            acc += tl.load(Part + rows[:, None] * N + cols[None, :], mask=m, other=0.0)
        tl.store(Out + cols, tl.sum(acc, axis=0).to(Out.dtype.element_ty), mask=cols < N)

    return triton, ln_fwd, ln_bwd_dx, column_sum


def forward(x, weight, bias, eps: float, rms: bool):
    import torch
    triton, ln_fwd, _, _ = _kernels()
    N = x.shape[-1]
    X = x.reshape(-1, N)
    if X.stride(-1) != 1:
        X = X.contiguous()
    M = X.shape[0]
    Y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    mean = torch.empty(M, dtype=torch.float32, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    if M and N:
        block, rows, warps = fwd_plan(N, x.element_size())
        ln_fwd[(triton.cdiv(M, rows),)](X, Y, weight, bias, mean, rstd, X.stride(0), M, N, eps, BLOCK=block, ROWS=rows,
                                        HAS_W=weight is not None, HAS_B=bias is not None, RMS=rms,
                                        ONE_TILE=N <= block, num_warps=warps)
    return Y.view(x.shape), mean.view(x.shape[:-1]), rstd.view(x.shape[:-1])


def backward(dy, x, weight, bias, mean, rstd, rms: bool):
    import torch
    triton, _, ln_bwd_dx, column_sum = _kernels()
    N = x.shape[-1]
    X, DY = x.reshape(-1, N).contiguous(), dy.reshape(-1, N).contiguous()
    M = X.shape[0]
    BLOCK, warps = bwd_plan(N)
    if BLOCK * 4 > MAX_FUSED_BYTES:
        raise NotImplementedError(f"the Triton backward rung holds a row in registers: N <= {MAX_FUSED_BYTES // 4}")
    programs = min(M, 4 * torch.cuda.get_device_properties(x.device).multi_processor_count) or 1
    rows_per_prog = -(-M // programs)
    DX = torch.empty_like(X)
    part = torch.empty((2, programs, N), dtype=torch.float32, device=x.device)
    ln_bwd_dx[(programs,)](X, DY, DX, weight, mean, rstd, part[0], part[1], N, M, N, rows_per_prog,
                           BLOCK=BLOCK, HAS_W=weight is not None, HAS_B=bias is not None, RMS=rms,
                           num_warps=warps)
    grads = []
    for i, p in enumerate((weight, bias)):
        if p is None:
            grads.append(None)
            continue
        out = torch.empty(N, dtype=p.dtype, device=p.device)
        column_sum[(triton.cdiv(N, 64),)](part[i], out, programs, N, BLOCK_P=32, BLOCK_N=64)
        grads.append(out)
    return DX.view(x.shape), grads[0], grads[1]


def backward_run(name: str, dy, x, weight=None, bias=None, mean=None, rstd=None):
    """The registry's backward signature: (dx, dweight, dbias) of rung `name`'s forward."""
    from .registry import BY_NAME
    return backward(dy, x, weight, bias, mean, rstd, BY_NAME[name].rms_norm)


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5):
    from .backward import norm
    return norm("triton_ln", x, weight, bias, eps)


def rms_norm(x, weight=None, eps: float = 1e-5):
    from .backward import norm
    return norm("triton_rms", x, weight, None, eps)


def run(name: str, x, weight=None, bias=None, eps: float = 1e-5):
    """The ladder's launcher signature: (y, mean, rstd); mean is None for RMSNorm."""
    from .registry import BY_NAME
    rms = BY_NAME[name].rms_norm
    y, mean, rstd = forward(x, weight, None if rms else bias, float(eps), rms)
    return y, (None if rms else mean), rstd

