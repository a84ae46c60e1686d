"""The siblings' accuracy, measured against torch on the GPU (tests/gpu/test_siblings_gpu.py asserts
the bounds of reimpl/ladder/accuracy.py on these; scripts/gpu/siblings_errors.py writes the tables
the pages render):

- softmax: for each kernel, dtype, input family and shape, the largest distance to torch.softmax in
  ulps of the storage type, whether NaN falls where torch's does, the share of bit-identical
  outputs, and the largest relative error against a float64 softmax, ours and torch's;
- BatchNorm: for our torch-level modules and our kernels (bn_kernel, bn_split in NCHW and
  channels-last input), the largest |ours - torch| / max(|torch|, 1) of the output and of the
  updated running statistics, against torch.nn.BatchNorm1d/2d; and for the split kernels' launchers,
  forward and backward against torch (measure_batchnorm_split), the gradients measured against the
  magnitudes they are sums of (batchnorm_backward_scales).
"""
from __future__ import annotations

from ..ladder.accuracy import MIN_EXP

SOFTMAX_NS = (1, 3, 128, 1000, 4096, 32768)
SOFTMAX_MS = (1, 37, 1024)

# BatchNorm shapes (N, C, *): the largest has 131072 values per channel, 256 per thread of our
# kernel; then odd sizes, C = 1, spatial size 1, (N, C) and (N, C, L) input
BN_SHAPES = ((32, 16, 64, 64), (8, 3, 17, 13), (64, 1, 9, 9), (16, 32, 1, 1), (256, 100), (4, 7, 33), (2, 5))
BN_EVAL_ONLY = ((1, 8, 5, 5), (1, 8), (1, 3, 1, 1))  # a batch of 1: torch refuses (1, C) and (1, C, 1, 1) in training
# (storage of x, of the parameters and running statistics): fp32, bf16, and bf16 input to a float32 module
BN_DTYPES = (("float32", "float32"), ("bfloat16", "bfloat16"), ("bfloat16", "float32"))
BN_IMPLS = ("torch_level", "kernel", "split")
BN_KERNEL = {"torch_level": False, "kernel": "bn_kernel", "split": "bn_split"}  # the modules' `kernel`
BN_LAYOUTS = ("contiguous", "channels_last")  # channels_last: 4-D input only, for the split kernels
# the split launchers' shapes: the table's, a ResNet-50 stage (56 x 56) and its last one (7 x 7,
# HW odd: no vectors in NCHW), and a ViT's tokens as (N * L, C)
BN_SPLIT_SHAPES = ((32, 64, 56, 56), (8, 3, 17, 13), (64, 1, 9, 9), (16, 32, 1, 1), (256, 100), (4, 7, 33), (2, 5),
                   (128, 2048, 7, 7), (8 * 197, 768))
BN_SPLIT_DTYPES = BN_DTYPES + (("float16", "float16"),)


def softmax_shapes():
    return [(M, N) for M in SOFTMAX_MS for N in SOFTMAX_NS]


def softmax_input(family: str, M: int, N: int, dtype, seed: int = 0, device: str = "cuda"):
    import torch
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(M, N, device=device, dtype=torch.float32, generator=g)
    rows = torch.arange(M, device=device).view(M, 1)
    cols = torch.arange(N, device=device).view(1, N)
    if family == "large":
        x = x * 1e4  # exp(x - max) underflows to 0 for all but a few elements of a row
    elif family == "neg_inf":
        # a causal mask (row r keeps its first r mod N + 1 columns), and every 7th row all -inf
        x = x.masked_fill((cols > rows % N) | (rows % 7 == 3), float("-inf"))
    elif family == "pos_inf":
        x = x.masked_fill((rows % 5 == 0) & (cols == (rows * 7) % N), float("inf"))  # NaN rows in torch
    elif family != "normal":
        raise ValueError(family)
    return x.to(dtype)


def ulps(diff, ref, dtype_name: str):
    """|diff| in units in the last place of the storage type at |ref| (the subnormal spacing below
    the smallest normal): a softmax output is a probability, its scale is its own."""
    import torch
    from ..ladder.accuracy import MANTISSA
    exp = torch.floor(torch.log2(ref.abs())).clamp(min=MIN_EXP[dtype_name])
    return diff.abs() / torch.exp2(exp - MANTISSA[dtype_name])


def _rel_to_f64(y, ref, dtype_name: str) -> float:
    import torch
    ok = ~torch.isnan(ref) & (ref.abs() >= 2.0 ** MIN_EXP[dtype_name])
    if not bool(ok.any()):
        return 0.0
    return float(((y.double() - ref).abs() / ref.abs())[ok].max())


def measure_softmax(dtype, family: str, M: int, N: int, kernels=None) -> list[dict]:
    """One row per kernel of ours (`kernels`, default all of registry.py's softmax entries) on the
    same input, each against torch.softmax and float64."""
    import torch
    from ..ladder import softmax
    from .parity import bit_mismatches
    name = str(dtype).removeprefix("torch.")
    x = softmax_input(family, M, N, dtype)
    theirs = torch.softmax(x, -1)
    ref = torch.softmax(x.double(), -1)
    torch_rel = _rel_to_f64(theirs, ref, name)
    rows = []
    for k in kernels or softmax.KERNELS:
        y = softmax.run(k, x)
        nan_y, nan_t = torch.isnan(y), torch.isnan(theirs)
        both = ~nan_y & ~nan_t
        d = (y.double() - theirs.double()).where(both, 0.0)
        rows.append({"kernel": k, "dtype": name, "family": family, "M": M, "N": N,
                     "max_ulp_to_torch": float(ulps(d, theirs.double().where(both, 1.0), name).max()),
                     "nan_positions_match": bool((nan_y == nan_t).all()),
                     "nan_rows": int(nan_t.all(-1).sum()) if N else 0,
                     "identical_to_torch": 1 - bit_mismatches(y, theirs) / max(y.numel(), 1),
                     "max_rel_err": _rel_to_f64(y, ref, name), "torch_max_rel_err": torch_rel})
    return rows


def _modules(shape, param_dtype, impl: str, seed: int = 0, momentum=0.1, device: str = "cuda"):
    """torch's module and ours for `shape`, ours loaded with torch's (randomised) state."""
    import torch
    from ..ladder import batchnorm
    C = shape[1]
    theirs_cls, ours_cls = ((torch.nn.BatchNorm2d, batchnorm.BatchNorm2d) if len(shape) == 4
                            else (torch.nn.BatchNorm1d, batchnorm.BatchNorm1d))
    g = torch.Generator(device=device).manual_seed(seed + 1)
    theirs = theirs_cls(C, momentum=momentum, device=device, dtype=param_dtype)
    with torch.no_grad():
        for t, v in ((theirs.weight, 1 + 0.1 * torch.randn(C, device=device, generator=g)),
                     (theirs.bias, 0.1 * torch.randn(C, device=device, generator=g)),
                     (theirs.running_mean, 0.1 * torch.randn(C, device=device, generator=g)),
                     (theirs.running_var, 1 + torch.rand(C, device=device, generator=g))):
            t.copy_(v)
    ours = ours_cls(C, momentum=momentum, device=device, dtype=param_dtype, kernel=BN_KERNEL[impl])
    ours.load_state_dict(theirs.state_dict())
    return theirs, ours


def _rel(a, b) -> float:
    return float(((a.double() - b.double()).abs() / b.double().abs().clamp(min=1.0)).max()) if a.numel() else 0.0


def measure_batchnorm(impl: str, dtype: str, param_dtype: str, family: str, shape: tuple, mode: str,
                      layout: str = "contiguous", steps: int = 1, momentum=0.1, seed: int = 0,
                      device: str = "cuda") -> dict:
    """`steps` forwards of torch's module and ours on the same inputs (train or eval), in `layout`;
    the worst output error over the steps and the running statistics' error after the last."""
    import torch
    fmt = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}[layout]
    theirs, ours = _modules(shape, getattr(torch, param_dtype), impl, seed, momentum, device)
    theirs.train(mode == "train")
    ours.train(mode == "train")
    g = torch.Generator(device=device).manual_seed(seed)
    y_rel = 0.0
    for _ in range(steps):
        x = torch.randn(shape, device=device, dtype=torch.float32, generator=g)
        if family == "offset_10":
            x = x + 10
        elif family != "normal":
            raise ValueError(family)
        x = x.to(getattr(torch, dtype)).contiguous(memory_format=fmt)
        with torch.no_grad():
            y_rel = max(y_rel, _rel(ours(x), theirs(x)))
    return {"impl": impl, "dtype": dtype, "param_dtype": param_dtype, "family": family, "shape": list(shape),
            "mode": mode, "layout": layout, "steps": steps, "momentum": momentum, "y_rel": y_rel,
            "running_mean_rel": _rel(ours.running_mean, theirs.running_mean),
            "running_var_rel": _rel(ours.running_var, theirs.running_var),
            "num_batches_tracked": [int(ours.num_batches_tracked), int(theirs.num_batches_tracked)]}


def batchnorm_cases():
    """(impl, dtype, param_dtype, family, shape, mode, layout) of the error table."""
    for impl in BN_IMPLS:
        for dtype, pdt in BN_DTYPES:
            for family in ("normal", "offset_10"):
                for shape in BN_SHAPES:
                    yield impl, dtype, pdt, family, shape, "train", "contiguous"
                    if impl == "split" and len(shape) == 4:
                        yield impl, dtype, pdt, family, shape, "train", "channels_last"
                    if impl == "torch_level":  # the kernels are the training pass only
                        yield impl, dtype, pdt, family, shape, "eval", "contiguous"
                if impl == "torch_level":
                    for shape in BN_EVAL_ONLY:
                        yield impl, dtype, pdt, family, shape, "eval", "contiguous"


def batchnorm_backward_scales(x, dy, weight, eps: float = 1e-5):
    """The magnitudes the backward's errors are measured against (accuracy.batchnorm_bound), in
    float64 from the stored x and dy: per element invstd |w| (|dy| + E|dy| + E|dy x̂|) (1 + |x̂|) for
    dx, per channel Σ|dy| (1 + |x̂|) for dweight and Σ|dy| for dbias (NaN where the channel is)."""
    x, dy = x.double(), dy.double()
    dims = [0, *range(2, x.dim())]
    view = (1, x.shape[1]) + (1,) * (x.dim() - 2)
    mean = x.mean(dims, keepdim=True)
    invstd = (x.var(dims, correction=0, keepdim=True) + eps).rsqrt()
    xhat = (x - mean) * invstd
    a, b = dy.abs().mean(dims, keepdim=True), (dy * xhat).abs().mean(dims, keepdim=True)
    w = weight.double().abs().view(view) if weight is not None else 1.0
    return (invstd * w * (dy.abs() + a + b) * (1 + xhat.abs()), (dy.abs() * (1 + xhat.abs())).sum(dims),
            dy.abs().sum(dims))


def batchnorm_param_grads64(x, dy, eps: float = 1e-5):
    """dweight and dbias in float64 from the stored x and dy: Σ dy x̂ and Σ dy per channel, x̂ from
    float64 statistics. The reference both sides' parameter gradients are held to."""
    x, dy = x.double(), dy.double()
    dims = [0, *range(2, x.dim())]
    mean = x.mean(dims, keepdim=True)
    invstd = (x.var(dims, correction=0, keepdim=True) + eps).rsqrt()
    return (dy * (x - mean) * invstd).sum(dims), dy.sum(dims)


def _rel_where_torch_is(ours, theirs, scale=None) -> float:
    """The largest |ours - torch| / scale (default max(|torch|, 1)) where torch's value and the scale
    are numbers; NaN if ours is NaN there."""
    import torch
    a, b = ours.double(), theirs.double()
    den = b.abs().clamp(min=1.0) if scale is None else scale
    ok = ~torch.isnan(b) & ~torch.isnan(den)
    return float(((a - b).abs() / den)[ok].max()) if bool(ok.any()) else 0.0


def measure_batchnorm_split(dtype: str, param_dtype: str, family: str, shape: tuple, layout: str = "contiguous",
                            nan_channel: int | None = None, momentum: float = 0.1, eps: float = 1e-5, seed: int = 0,
                            device: str = "cuda") -> dict:
    """The split launchers (reimpl/ladder/batchnorm_split.py) against torch on one input in `layout`:
    y against F.batch_norm (training), save_mean and save_invstd against torch.native_batch_norm, the
    running statistics after one update, and dx, dweight, dbias for one dy against torch's autograd
    through F.batch_norm. Forward errors relative to max(|torch|, 1), backward ones to
    batchnorm_backward_scales; taken where torch's value is a number, and whether NaN falls where
    torch's does (`nan_channel`: one NaN put in that channel of x)."""
    import torch
    import torch.nn.functional as F
    from ..ladder.batchnorm_split import batch_norm_train_backward_split, batch_norm_train_forward_split
    dt, pdt = getattr(torch, dtype), getattr(torch, param_dtype)
    fmt = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}[layout]
    C = shape[1]
    g = torch.Generator(device=device).manual_seed(seed)
    z = torch.randn(shape, device=device, generator=g)
    if family not in ("normal", "offset_10"):
        raise ValueError(family)
    x = z + 10 if family == "offset_10" else z.clone()
    if nan_channel is not None:
        x[(0, nan_channel) + (0,) * (len(shape) - 2)] = float("nan")
    # dy with a mean and a part along x: mean_dy and mean_dy_xmu are then not lost in the noise, so
    # a wrong coefficient of either shows
    dy = torch.randn(shape, device=device, generator=g) + 0.5 + 0.3 * z
    x, dy = (t.to(dt).contiguous(memory_format=fmt) for t in (x, dy))
    w, b, rm, rv = (v.to(pdt) for v in (1 + 0.1 * torch.randn(C, device=device, generator=g),
                                         0.1 * torch.randn(C, device=device, generator=g),
                                         0.1 * torch.randn(C, device=device, generator=g),
                                         1 + torch.rand(C, device=device, generator=g)))

    ours_rm, ours_rv = rm.clone(), rv.clone()
    y, mean, invstd = batch_norm_train_forward_split(x, w, b, ours_rm, ours_rv, momentum, eps)
    dx, dw, db = batch_norm_train_backward_split(dy, x, w, mean, invstd)

    _, tmean, tinvstd = torch.native_batch_norm(x, w, b, rm.clone(), rv.clone(), True, momentum, eps)
    xt, wt, bt = (t.clone().requires_grad_() for t in (x, w, b))
    trm, trv = rm.clone(), rv.clone()
    ty = F.batch_norm(xt, trm, trv, wt, bt, True, momentum, eps)
    ty.backward(dy)
    sdx, sdw, sdb = batchnorm_backward_scales(x, dy, w, eps)
    dw64, db64 = batchnorm_param_grads64(x, dy, eps)
    pairs = ((y, ty), (mean, tmean), (invstd, tinvstd), (ours_rm, trm), (ours_rv, trv), (dx, xt.grad),
             (dw, wt.grad), (db, bt.grad))
    return {"dtype": dtype, "param_dtype": param_dtype, "family": family, "shape": list(shape), "layout": layout,
            "nan_channel": nan_channel,
            "y_rel": _rel_where_torch_is(y, ty.detach()), "mean_rel": _rel_where_torch_is(mean, tmean),
            "invstd_rel": _rel_where_torch_is(invstd, tinvstd),
            "running_mean_rel": _rel_where_torch_is(ours_rm, trm), "running_var_rel": _rel_where_torch_is(ours_rv, trv),
            "dx_rel": _rel_where_torch_is(dx, xt.grad, sdx), "dweight_rel": _rel_where_torch_is(dw, wt.grad, sdw),
            "dbias_rel": _rel_where_torch_is(db, bt.grad, sdb),
            # both sides' parameter gradients against float64 (where the two disagree, which is off)
            "dweight_rel_f64": _rel_where_torch_is(dw, dw64, sdw), "dbias_rel_f64": _rel_where_torch_is(db, db64, sdb),
            "torch_dweight_rel_f64": _rel_where_torch_is(wt.grad, dw64, sdw),
            "torch_dbias_rel_f64": _rel_where_torch_is(bt.grad, db64, sdb),
            "nan_positions_match": all(bool((torch.isnan(a) == torch.isnan(t)).all()) for a, t in pairs),
            "layout_kept": y.is_contiguous(memory_format=fmt) and dx.is_contiguous(memory_format=fmt),
            "dtypes": [str(t.dtype).removeprefix("torch.") for t in (y, dx, dw, db)]}
