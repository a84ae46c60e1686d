"""Two Triton LayerNorm forwards for the worked example "test your kernel against torch's bits".

`layer_norm_textbook` is the kernel most people write first, after the fused forward of Triton's
layer-norm tutorial: one program per row, the whole row in one tile, mean and variance by
`tl.sum`, `1 / sqrt(var + eps)`. It is close to torch but not bit-identical: its sums are trees
of Triton's choosing, its divisions are approximate and the compiler fuses as it likes.

`layer_norm_torch_bits` reproduces, bit for bit, what torch 2.11 computes on the GPU on its fast
path, `vectorized_layer_norm_kernel` (aten/src/ATen/native/cuda/layer_norm_kernel.cu; line by line
in reimpl/mirror/cuda/layer_norm_kernel.cu, and in NumPy in reimpl/emulator/layer_norm_kernel.py).
That kernel runs one block of (32, 4) threads per row and reads 4 elements per load; torch takes
it when N % 4 == 0, N <= 2^24 and every pointer is 4-element aligned, and this function refuses
(ValueError) whatever torch would send elsewhere. The Triton program restates torch's order of
operations rather than its threads: 128 per-thread Welford states held as [128] vectors, then
torch's shuffle-down tree and shared-memory rounds written as explicit pairings, with every fused
multiply-add spelled `tl.fma`, every IEEE division `tl.math.div_rn`, and the launch made with
`enable_fp_fusion=False` so that nothing else gets fused.

Both take (x, normalized_shape, weight, bias, eps) with x a contiguous 2-D (M, N) CUDA tensor of
float32, float16 or bfloat16, weight and bias of x's dtype (or None), and return y of x's dtype;
`rms_norm=True` gives RMSNorm instead (no bias; torch's `_fused_rms_norm` for the bits one), and
`return_stats=True` returns (y, mean, rstd) with float32 stats (mean None for RMSNorm).

Triton is imported on first use, inside the cached `_kernels()` (as in reimpl/ladder/triton_rungs.py),
so this module imports without it.
"""
from __future__ import annotations

import functools

TEXTBOOK_MAX_BYTES = 65536   # the textbook kernel holds a row in one tile; past this it would spill
VEC = 4                      # torch's vec_size: elements per load, and per step of a thread's fold
THREADS = 128                # torch's block, (32, 4): one warp of 32 lanes per blockDim.y
MAX_VECTORIZED_N = 1 << 24   # torch's host check: past this the float count is no longer exact


@functools.cache
def _kernels():
    import triton
    import triton.language as tl

    # ---- the textbook kernel --------------------------------------------------------------------
    # --8<-- [start:textbook]
    @triton.jit
    def ln_textbook(X, Y, W, B, Mean, Rstd, N, eps, BLOCK: tl.constexpr, HAS_W: tl.constexpr,
                    HAS_B: tl.constexpr, RMS: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
        if RMS:
            xc = x
        else:
            mean = tl.sum(x, axis=0) / N
            xc = tl.where(mask, x - mean, 0.0)   # the padding must not count in the variance
            tl.store(Mean + row, mean)
        var = tl.sum(xc * xc, axis=0) / N
        rstd = 1 / tl.sqrt(var + eps)
        tl.store(Rstd + row, rstd)
        y = xc * rstd
        if HAS_W:
            y = y * tl.load(W + cols, mask=mask).to(tl.float32)
        if HAS_B:
            y = y + tl.load(B + cols, mask=mask).to(tl.float32)
        tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)
    # --8<-- [end:textbook]

    # ---- torch's vectorized_layer_norm_kernel, bit for bit ----------------------------------------
    @triton.jit
    def _fma(a, b, c, NO_FMA: tl.constexpr):
        # the planted no_fma change: the product rounded, then the sum (fusion is off at launch)
        if NO_FMA:
            return a * b + c
        else:
            return tl.fma(a, b, c)

    @triton.jit
    def _online(x, mean, m2, count, active, RMS: tl.constexpr, NO_FMA: tl.constexpr):
        # cuWelfordOnlineSum, one element into each of the 128 states; a thread whose vector index
        # is past the row (`active` false) keeps its state, as torch's loop simply ends for it.
        if RMS:
            new_mean = mean
            new_m2 = _fma(x, x, m2, NO_FMA)
            new_count = count
        else:
            delta = x - mean
            new_count = count + 1.0
            # torch writes mean + delta * (1.f / new_count): an IEEE reciprocal, then one FFMA
            rcp = tl.math.div_rn(tl.full(new_count.shape, 1.0, tl.float32), new_count)
            new_mean = _fma(delta, rcp, mean, NO_FMA)
            new_m2 = _fma(delta, x - new_mean, m2, NO_FMA)
        return (tl.where(active, new_mean, mean), tl.where(active, new_m2, m2),
                tl.where(active, new_count, count))

    @triton.jit
    def _combine(b_mean, b_m2, b_count, a_mean, a_m2, a_count, RMS: tl.constexpr, NO_FMA: tl.constexpr):
        # cuWelfordCombine(dataB, dataA); B is the slot's own state, A its partner's.
        if RMS:
            mean = b_mean
            m2 = b_m2 + a_m2
            count = b_count
        else:
            delta = b_mean - a_mean
            count = a_count + b_count
            coef = tl.math.div_rn(tl.full(count.shape, 1.0, tl.float32), count)
            n_a = a_count * coef
            n_b = b_count * coef
            # nA*A.mean + nB*B.mean compiles to FMUL (nB*B.mean) then FFMA
            mean = _fma(n_a, a_mean, n_b * b_mean, NO_FMA)
            # A.sigma2 + B.sigma2 + delta*delta*A.count*nB: FMUL, FMUL, FADD, then FFMA with nB
            m2 = _fma(n_b, delta * delta * a_count, a_m2 + b_m2, NO_FMA)
            # count 0 (slots that read nothing): torch takes zeros instead of 0 * inf
            nonempty = count > 0.0
            mean = tl.where(nonempty, mean, 0.0)
            m2 = tl.where(nonempty, m2, 0.0)
        return mean, m2, count

    @triton.jit
    def _partner_split(v, ROWS: tl.constexpr, HALF: tl.constexpr):
        # [ROWS, 2*HALF] -> two [ROWS, HALF]: slot j's own value and slot j + HALF's, the pairing of
        # __shfl_down_sync(v, HALF) seen from the lanes whose result is used later (j < HALF).
        v = tl.permute(tl.reshape(v, (ROWS, 2, HALF)), (0, 2, 1))
        return tl.split(v)

    @triton.jit
    def _fold(mean, m2, count, ROWS: tl.constexpr, HALF: tl.constexpr, RMS: tl.constexpr, PLANT: tl.constexpr):
        mean_own, mean_other = _partner_split(mean, ROWS, HALF)
        m2_own, m2_other = _partner_split(m2, ROWS, HALF)
        count_own, count_other = _partner_split(count, ROWS, HALF)
        if PLANT == 4:   # the planted tree_swapped change: the partner's state as B, its own as A
            return _combine(mean_other, m2_other, count_other, mean_own, m2_own, count_own, RMS, PLANT == 1)
        return _combine(mean_own, m2_own, count_own, mean_other, m2_other, count_other, RMS, PLANT == 1)

    @triton.jit
    def ln_torch_bits(X, Y, W, B, Mean, Rstd, N, eps, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                      RMS: tl.constexpr, PLANT: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        X += row * N
        Y += row * N
        thrx = tl.arange(0, 128)           # threadIdx.x + 32 * threadIdx.y
        ii = tl.arange(0, 4)               # the element within a thread's 4-wide vector
        n_vec = N // 4

        # 1. each thread folds elements 4*(thrx + 128k) + ii, k = 0, 1, ... then ii = 0..3
        mean = tl.zeros([128], tl.float32)
        m2 = tl.zeros([128], tl.float32)
        count = tl.zeros([128], tl.float32)
        for v0 in range(0, n_vec, 128):
            v = v0 + thrx
            active = v < n_vec
            x = tl.load(X + v[:, None] * 4 + ii[None, :], mask=active[:, None], other=0.0)
            x = x.to(tl.float32)
            # columns of the [128, 4] tile: x4[t, a, b] = x[t, 2a + b]
            x02, x13 = tl.split(tl.reshape(x, (128, 2, 2)))
            x0, x2 = tl.split(x02)
            x1, x3 = tl.split(x13)
            mean, m2, count = _online(x0, mean, m2, count, active, RMS, PLANT == 1)
            mean, m2, count = _online(x1, mean, m2, count, active, RMS, PLANT == 1)
            mean, m2, count = _online(x2, mean, m2, count, active, RMS, PLANT == 1)
            mean, m2, count = _online(x3, mean, m2, count, active, RMS, PLANT == 1)

        # --8<-- [start:torch_tree]
        # 2. shuffle-down rounds within each warp: [warp, lane], lane l takes lane l + offset.
        #    Only lane 0's result is used, and it depends only on these pairings. (Triton keeps
        #    these small tensors whole in every thread, so each thread runs the whole tree: some
        #    130 IEEE divisions per row, redundant but deterministic, and cheap beside the loads.)
        mean = tl.reshape(mean, (4, 32))
        m2 = tl.reshape(m2, (4, 32))
        count = tl.reshape(count, (4, 32))
        mean, m2, count = _fold(mean, m2, count, 4, 16, RMS, PLANT)
        mean, m2, count = _fold(mean, m2, count, 4, 8, RMS, PLANT)
        mean, m2, count = _fold(mean, m2, count, 4, 4, RMS, PLANT)
        mean, m2, count = _fold(mean, m2, count, 4, 2, RMS, PLANT)
        mean, m2, count = _fold(mean, m2, count, 4, 1, RMS, PLANT)

        # 3. shared-memory rounds over the 4 warps' lane 0: warp w < 2 takes warp w + 2, then
        #    warp 0 takes warp 1
        mean = tl.reshape(mean, (1, 4))
        m2 = tl.reshape(m2, (1, 4))
        count = tl.reshape(count, (1, 4))
        mean, m2, count = _fold(mean, m2, count, 1, 2, RMS, PLANT)
        mean, m2, count = _fold(mean, m2, count, 1, 1, RMS, PLANT)    # [1, 1]
        # --8<-- [end:torch_tree]

        # sigma2 / float(N): IEEE division (Triton's `/` on fp32 is approximate); float(N) is exact
        var = tl.math.div_rn(m2, tl.full((1, 1), N, tl.float32))
        # torch: c10::cuda::compat::rsqrt -> rsqrtf, which nvcc (-ftz=false) emits as the PTX
        # rsqrt.approx.f32 (MUFU.RSQ, with a rescaling for subnormal inputs). Triton 3.6 lowers
        # tl.math.rsqrt to libdevice's __nv_rsqrtf, the same instruction, and to its .ftz variant
        # unless the launch passes enable_reflect_ftz=False. Unlike inline asm, the interpreter runs it.
        if PLANT == 2:     # planted div_sqrt: 1.f / sqrtf(var + eps), both IEEE-rounded
            rstd = tl.math.div_rn(tl.full((1, 1), 1.0, tl.float32), tl.math.sqrt_rn(var + eps))
        elif PLANT == 3:   # planted eps_outside: 1 / (sqrt(var) + eps)
            rstd = tl.math.div_rn(tl.full((1, 1), 1.0, tl.float32), tl.math.sqrt_rn(var) + eps)
        else:
            rstd = tl.math.rsqrt(var + eps)

        # 4. normalize: a second read of the row, 4 elements per thread per step, one rounding to
        #    the output type on the store. The arithmetic per branch is what torch's SASS does.
        for v0 in range(0, n_vec, 128):
            v = v0 + thrx
            offs = v[:, None] * 4 + ii[None, :]
            active = (v < n_vec)[:, None]
            x = tl.load(X + offs, mask=active, other=0.0).to(tl.float32)
            if RMS:
                xc = x                         # torch: rstd * x (its mean is 0 and unused)
            else:
                xc = x - mean
            if HAS_W:
                g = tl.load(W + offs, mask=active, other=0.0).to(tl.float32)
            if HAS_B:
                b = tl.load(B + offs, mask=active, other=0.0).to(tl.float32)
            if HAS_W and HAS_B:
                if RMS:
                    out = g * (rstd * xc)
                else:
                    out = _fma(g, rstd * xc, b, PLANT == 1)
            elif HAS_W:
                out = g * (rstd * xc)
            elif HAS_B:
                if RMS:
                    out = _fma(rstd, xc, b, PLANT == 1)
                else:
                    # element 0 of each vector: FMUL + FADD (the product is shared with the
                    # no-affine branch, so nvcc cannot fuse it); elements 1..3: FFMA
                    out = tl.where(ii[None, :] == 0, rstd * xc + b, _fma(rstd, xc, b, PLANT == 1))
            else:
                out = rstd * xc
            tl.store(Y + offs, out.to(Y.dtype.element_ty), mask=active)

        if not RMS:
            tl.store(Mean + row + tl.arange(0, 1), tl.reshape(mean, (1,)))
        tl.store(Rstd + row + tl.arange(0, 1), tl.reshape(rstd, (1,)))

    # The Triton interpreter looks a kernel's callees up in the module's globals, not in this
    # closure, and the compiler reads `tl.constexpr` annotations in the globals plus the names the
    # body uses (_fold's body has no `tl`): publish the helpers and `tl` there
    globals().update(tl=tl, _fma=_fma, _online=_online, _combine=_combine,
                     _partner_split=_partner_split, _fold=_fold)
    return triton, ln_textbook, ln_torch_bits


def _check_inputs(x, normalized_shape, weight, bias, rms_norm):
    import torch
    if x.dim() != 2 or not x.is_contiguous():
        raise ValueError("x must be a contiguous 2-D (M, N) tensor")
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"x must be float32, float16 or bfloat16, not {x.dtype}")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    N = x.shape[1]
    if shape != (N,):
        raise ValueError(f"normalized_shape must be ({N},), the last dimension of x, not {shape}")
    if rms_norm and bias is not None:
        raise ValueError("RMSNorm takes no bias")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and (tuple(p.shape) != (N,) or p.dtype != x.dtype or not p.is_contiguous()
                              or p.device != x.device):
            raise ValueError(f"{name} must be a contiguous ({N},) tensor of x's dtype and device")
    return N


def _outputs(x):
    import torch
    M = x.shape[0]
    y = torch.empty_like(x)
    mean = torch.empty(M, dtype=torch.float32, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    return y, mean, rstd


def layer_norm_textbook(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5, *,
                        rms_norm: bool = False, return_stats: bool = False):
    """The tutorial-style forward: close to torch, not bit-identical. Rows up to 64 KiB."""
    triton, ln_textbook, _ = _kernels()
    N = _check_inputs(x, normalized_shape, weight, bias, rms_norm)
    block = triton.next_power_of_2(max(N, 1))
    if block * x.element_size() > TEXTBOOK_MAX_BYTES:
        raise ValueError(f"the textbook kernel holds a row in one tile: N * itemsize <= {TEXTBOOK_MAX_BYTES}")
    y, mean, rstd = _outputs(x)
    if x.shape[0] and N:
        ln_textbook[(x.shape[0],)](x, y, weight, bias, mean, rstd, N, float(eps), BLOCK=block,
                                   HAS_W=weight is not None, HAS_B=bias is not None, RMS=rms_norm,
                                   num_warps=min(max(block // 256, 1), 16))
    if return_stats:
        return y, (None if rms_norm else mean), rstd
    return y


# the changes of reimpl/emulator/variants.py that Triton can express in this kernel: `plant=` one of
# them gives the diagnosis's proof a Triton kernel beside the CUDA ones (tests/gpu/test_judge_gpu.py)
PLANTS = {None: 0, "no_fma": 1, "div_sqrt": 2, "eps_outside": 3, "tree_swapped": 4}


def layer_norm_torch_bits(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5, *,
                          rms_norm: bool = False, return_stats: bool = False, plant: str | None = None):
    """torch 2.11's vectorized_layer_norm_kernel (or, with rms_norm, its RMSNorm instance), bit for
    bit; with `plant`, that one change of PLANTS instead. ValueError where torch would not take that
    kernel."""
    _, _, ln_torch_bits = _kernels()
    N = _check_inputs(x, normalized_shape, weight, bias, rms_norm)
    alignment = VEC * x.element_size()   # torch's can_vectorize: 4 elements
    if N % VEC:
        raise ValueError(f"torch's vectorized kernel needs N % {VEC} == 0 (N = {N})")
    if N > MAX_VECTORIZED_N:
        raise ValueError(f"torch's vectorized kernel needs N <= 2^24 (N = {N})")
    for name, p in (("x", x), ("weight", weight), ("bias", bias)):
        if p is not None and p.data_ptr() % alignment:
            raise ValueError(f"torch's vectorized kernel needs {name} {alignment}-byte aligned")
    y, mean, rstd = _outputs(x)
    if x.shape[0]:      # torch launches for N == 0 too: mean 0, rstd NaN (0 / 0)
        ln_torch_bits[(x.shape[0],)](
            x, y, weight, bias, mean, rstd, N, float(eps),
            HAS_W=weight is not None, HAS_B=bias is not None, RMS=rms_norm, PLANT=PLANTS[plant],
            num_warps=THREADS // 32,
            # no fusion but the tl.fma written above (ptxas --fmad=false too), and no flush to zero
            # in libdevice's rsqrtf (nvcc's -ftz=false)
            enable_fp_fusion=False, enable_reflect_ftz=False)
    if return_stats:
        return y, (None if rms_norm else mean), rstd
    return y
