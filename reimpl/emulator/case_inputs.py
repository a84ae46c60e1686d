"""A reimpl.checks case's CPU inputs without torch: the twin of `Case.make_inputs("cpu")` and of the
grad_out of `BackwardCase.make_args("cpu")`, drawn from torch_random's twin of torch's CPU
generator with the same statements in the same order, so the bits are torch's (see torch_random
for where that holds). Arrays come in the emulator's storage dtypes (bfloat16 as uint16 bits), in
the case's shape; storage offsets are the emulator's to apply (run_case does), as are the
transposed layouts (made contiguous here, as run_case would).

The case is read by its fields only (op, dtype, shape, norm_ndim, weight, bias, values, seed,
transpose), so this module does not import reimpl.checks.
"""
from __future__ import annotations

import math

import numpy as np

from .fp import float_to_bf16_bits
from .torch_random import Generator, rand, randn

# torch.finfo(dtype).tiny: the smallest normal number of each storage dtype
_TINY = {"fp32": 2.0**-126, "fp16": 2.0**-14, "bf16": 2.0**-126, "fp64": 2.0**-1022}


def _to_dtype(v: np.ndarray, dtype: str) -> np.ndarray:
    """`.to(dtype)` on the CPU, into the emulator's storage dtype: round to nearest even; torch's
    vectorized bfloat16 conversion turns every NaN into 0xFFFF."""
    if dtype == "fp16":
        return v.astype(np.float16)
    if dtype == "bf16":
        return np.where(np.isnan(v), np.uint16(0xFFFF), float_to_bf16_bits(v)).astype(np.uint16)
    return v.astype(np.float64 if dtype == "fp64" else np.float32)


def _values(case, n: int, gen: Generator, kind: str | None = None) -> np.ndarray:
    """Case._values: n values of the given kind."""
    fp64 = case.dtype == "fp64"
    ft = np.float64 if fp64 else np.float32
    v = randn(gen, n, double=fp64)
    kind = kind or case.values
    if kind == "offset":
        v = v + ft(1e4)
    elif kind == "small":
        v = v * ft(1e-3)
    elif kind == "large":
        v = v * ft(1e3)
    elif kind == "subnormal":
        v = v * ft(_TINY[case.dtype]) * ft(0.25)
    elif kind == "zeros":
        v = np.where(v > 0, ft(0.0), ft(-0.0))
    elif kind in ("inf", "nan"):
        special = rand(gen, n) < np.float32(0.01)
        fill = ft("nan" if kind == "nan" else "inf")
        sign = np.where(rand(gen, n) < np.float32(0.5), ft(-1.0), ft(1.0))
        v = np.where(special, sign * fill, v)
    return _to_dtype(v, case.dtype)


def _shaped(case, flat: np.ndarray) -> np.ndarray:
    """Case._shaped, made contiguous."""
    if case.transpose:
        *lead, a, b = case.shape
        return np.ascontiguousarray(flat.reshape(*lead, b, a).swapaxes(-1, -2))
    return flat.reshape(case.shape)


def make_inputs(case) -> tuple:
    """Case.make_inputs("cpu"): (input, weight or None, bias or None)."""
    gen = Generator(case.seed)
    x = _shaped(case, _values(case, math.prod(case.shape), gen))
    ns = case.normalized_shape
    w = _values(case, math.prod(ns), gen).reshape(ns) if case.weight else None
    b = _values(case, math.prod(ns), gen).reshape(ns) if case.bias and case.op == "layer_norm" else None
    # the affine tensors stay ordinary: the value kind is about the input (float32 draws, all dtypes)
    if w is not None and case.values != "normal":
        w = _to_dtype(randn(gen, math.prod(ns)), case.dtype).reshape(ns)
    if b is not None and case.values != "normal":
        b = _to_dtype(randn(gen, math.prod(ns)), case.dtype).reshape(ns)
    return x, w, b


def make_grad_out(case, seed: int) -> np.ndarray:
    """BackwardCase.make_args's grad_out: drawn from a generator of its own, seeded `seed`."""
    return _shaped(case, _values(case, math.prod(case.shape), Generator(seed), case.dy_values))
