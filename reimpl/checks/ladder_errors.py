"""The ladder's accuracy, measured: for a rung, a dtype, an input family and a shape, the largest
error of y against a float64 reference, the largest distance to torch's F.layer_norm output in units
in the last place of the storage type, the share of outputs bit-identical to torch's, and the
largest relative error of rstd. tests/gpu/test_ladder_gpu.py asserts each rung's stated bound on
these; scripts/gpu/ladder_errors.py writes the table the ladder pages render."""
from __future__ import annotations

FAMILIES = ("normal", "offset_1e4", "scale_1e-3", "scale_1e3", "constant")
NS = (1, 3, 768, 1000, 4096, 12288)
MS = (1, 37, 65536)


def all_rungs() -> list[str]:
    """Every rung of the ladder, CUDA and Triton, in the registry's order."""
    from ..ladder import registry
    return [e.name for e in registry.RUNGS]


def is_rms(rung: str) -> bool:
    from ..ladder import registry
    return registry.BY_NAME[rung].rms_norm


def runner(rung: str):
    """The launcher of a rung, CUDA or Triton: (x, weight, bias, eps) -> (y, mean, rstd)."""
    from ..ladder import registry
    launch = registry.BY_NAME[rung].launch_fn()
    return lambda *a: launch(rung, *a)


def shapes():
    """(M, N) pairs measured: every M with every N (M = 65536 also takes apex's grid past its 65535
    blocks, so its rows stride)."""
    return [(M, N) for M in MS for N in NS]


ROWS_PER_CHUNK = 2048  # the float64 reference is built this many rows at a time (65536 x 12288 is 6 GB a copy)


def make_input(family: str, M: int, N: int, dtype, seed: int = 0):
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, N, device="cuda", dtype=torch.float64, generator=g)
    if family == "offset_1e4":
        x = x + 1e4  # the mean dwarfs the spread
    elif family == "scale_1e-3":
        x = x * 1e-3
    elif family == "scale_1e3":
        x = x * 1e3
    elif family == "constant":
        x = torch.full((M, N), 0.7, device="cuda", dtype=torch.float64) + torch.randn(M, 1, device="cuda",
                                                                                    dtype=torch.float64, generator=g)
    elif family != "normal":
        raise ValueError(family)
    w = 1 + 0.1 * torch.randn(N, device="cuda", dtype=torch.float64, generator=g)
    b = 0.1 * torch.randn(N, device="cuda", dtype=torch.float64, generator=g)
    return x.to(dtype), w.to(dtype), b.to(dtype)


MANTISSA_BITS = {"float32": 23, "float16": 10, "bfloat16": 7}


def ulps(diff, scale, dtype_name: str):
    """|diff| in units in the last place of the storage type at magnitude max(|scale|, 1): outputs of
    a LayerNorm are O(1), so near zero an ulp of 1 is the yardstick (counting bit patterns between
    1e-30 and -1e-30 would call two near-zeros billions of ulps apart)."""
    import torch
    exp = torch.floor(torch.log2(scale.abs().clamp(min=1.0)))
    return diff.abs() / torch.exp2(exp - MANTISSA_BITS[dtype_name])


def _worse(a: float, b: float) -> float:
    """The larger, a NaN winning (a NaN error must fail the bound, not vanish)."""
    return a if a != a or not (b != b or b > a) else b


def measure(rung: str, dtype, family: str, M: int, N: int, eps: float = 1e-5) -> dict:
    import torch
    import torch.nn.functional as F
    rms = is_rms(rung)
    x, w, b = make_input(family, M, N, dtype)
    if rms:
        b = None
    y, mean, rstd = runner(rung)(x, w, b, eps)
    theirs = F.rms_norm(x, (N,), w, eps) if rms else F.layer_norm(x, (N,), w, b, eps)
    name = str(dtype).removeprefix("torch.")
    int_type = torch.int16 if y.element_size() == 2 else torch.int32
    wd, bd = w.double(), (0 if b is None else b.double())
    worst = {"max_abs_err": 0.0, "max_ref": 0.0, "rel_err": 0.0, "max_ulp_to_torch": 0.0, "rstd_rel_err": 0.0}
    same = 0
    for r0 in range(0, M, ROWS_PER_CHUNK):
        rows = slice(r0, min(M, r0 + ROWS_PER_CHUNK))
        xd = x[rows].double()
        mu = torch.zeros(xd.shape[0], 1, dtype=torch.float64, device="cuda") if rms else xd.mean(-1, keepdim=True)
        var = (xd * xd).mean(-1, keepdim=True) if rms else ((xd - mu) ** 2).mean(-1, keepdim=True)
        rs = torch.rsqrt(var + eps)
        ref = (xd - mu) * rs * wd + bd
        yd, td = y[rows].double(), theirs[rows].double()
        same += int((y[rows].view(int_type) == theirs[rows].view(int_type)).sum())
        err = (yd - ref).abs()
        chunk = {"max_abs_err": err.max(), "max_ref": ref.abs().max(),
                 # the accuracy tests bound this: the error relative to the output's scale (at least 1)
                 "rel_err": (err / ref.abs().clamp(min=1.0)).max(),
                 "max_ulp_to_torch": ulps(yd - td, td, name).max(),
                 "rstd_rel_err": ((rstd[rows].double().view(-1, 1) - rs) / rs).abs().max()}
        worst = {k: _worse(v, float(chunk[k])) for k, v in worst.items()}
    return {"rung": rung, "dtype": name, "family": family, "M": M, "N": N, **worst,
            "identical_to_torch": same / (M * N)}


def measure_backward(rung: str, dtype, M: int, N: int, eps: float = 1e-5, affine: bool = True) -> dict:
    """A rung's gradients (its registry entry's backward) against float64 autograd, beside torch's
    own: the largest error of dX, dW and dB relative to each gradient's scale, ours and torch's, on
    the normal family; without weight and bias where `affine` is False (dX alone)."""
    import torch
    import torch.nn.functional as F
    from ..ladder.backward import norm
    rms = is_rms(rung)
    x, w, b = make_input("normal", M, N, dtype)
    if not affine:
        w = b = None
    dy = torch.randn(M, N, device="cuda", dtype=torch.float64, generator=torch.Generator(device="cuda").manual_seed(1))

    def leaf(t, cast):
        # fresh leaves each time: .to() of the same dtype returns the tensor itself, whose .grad would add up
        return None if t is None else t.detach().to(cast).clone().requires_grad_(True)

    def grads(fn, cast):
        xs, ws, bs = leaf(x, cast), leaf(w, cast), None if rms else leaf(b, cast)
        y = fn(xs, ws, bs)
        y.backward(dy.to(cast))
        return [t.grad.double() for t in (xs, ws, bs) if t is not None]

    torch_fn = ((lambda x_, w_, b_: F.rms_norm(x_, (N,), w_, eps)) if rms
                else (lambda x_, w_, b_: F.layer_norm(x_, (N,), w_, b_, eps)))

    def ours_fn(x_, w_, b_):
        return norm(rung, x_, w_, b_, eps)
    ref, theirs, ours = grads(torch_fn, torch.float64), grads(torch_fn, dtype), grads(ours_fn, dtype)

    def rel(a, r):
        return float(((a - r).abs() / r.abs().max().clamp(min=1e-30)).max())
    names = ("dx", "dw", "db")
    return {"rung": rung, "dtype": str(dtype).removeprefix("torch."), "M": M, "N": N,
            **{f"{n}_rel_err": rel(o, r) for n, o, r in zip(names, ours, ref)},
            **{f"{n}_rel_err_torch": rel(t, r) for n, t, r in zip(names, theirs, ref)}}
