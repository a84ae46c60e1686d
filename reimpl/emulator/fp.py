"""Floating-point operations the GPU does in one instruction and NumPy does not: a fused
multiply-add with a single rounding, and the float -> half / bfloat16 stores (round to nearest
even, subnormals kept). Plain +, -, * and / on float32/float64 NumPy arrays are already IEEE
(correctly rounded, no flush-to-zero), as the kernels compiled with -ftz=false -prec-div=true are.

Element types: the kernels' T is one of float, c10::Half, c10::BFloat16, double. Here each has a
storage dtype (bfloat16 as np.uint16 bit patterns: NumPy has no bfloat16), a load to the
accumulate type and a rounding store.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

f32 = np.float32
f64 = np.float64


def _two_sum(a, b):
    """s + err == a + b exactly (Knuth), for finite float64 arrays."""
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return s, err


def fma32(a, b, c):
    """FFMA: a*b + c rounded once to float32.

    The float64 product of two floats is exact (48 bits); the float64 sum is then rounded to odd
    (kept if its last bit is odd, else moved one ulp towards the lost part), and rounding that to
    float32 is the correctly rounded result because 53 >= 24 + 2.
    """
    a, b, c = (np.asarray(v, dtype=f32) for v in (a, b, c))
    with np.errstate(all="ignore"):
        p = a.astype(f64) * b.astype(f64)
        cc = c.astype(f64)
        s, err = _two_sum(p, cc)
        even = (s.view(np.int64) & 1) == 0
        fix = np.isfinite(s) & (err != 0) & even
        if np.any(fix):
            toward = np.where(err > 0, np.inf, -np.inf)
            s = np.where(fix, np.nextafter(s, toward), s)
        return s.astype(f32)


def _fma64_scalar(a: float, b: float, c: float) -> float:
    if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)):
        return a * b + c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return a * b + c  # the sign of an exact zero follows IEEE's rule for the float sum
    try:
        return float(exact)  # int / int true division: correctly rounded, subnormals included
    except OverflowError:
        return float("inf") if exact > 0 else float("-inf")


_fma64_u = np.frompyfunc(_fma64_scalar, 3, 1)


def fma64(a, b, c):
    """DFMA: a*b + c rounded once to float64 (exact rationals; the fp64 path is small and rare)."""
    return np.asarray(_fma64_u(np.asarray(a, f64), np.asarray(b, f64), np.asarray(c, f64)), dtype=f64)


def fma(a, b, c):
    """FFMA or DFMA, by the accumulate type of the operands."""
    if np.asarray(a).dtype == f64:
        return fma64(a, b, c)
    return fma32(a, b, c)


def float_to_bf16_bits(x) -> np.ndarray:
    """__float2bfloat16 (cvt.rn.bf16.f32): round to nearest even on the bits; NaN -> 0x7FFF."""
    b = np.asarray(x, dtype=f32).view(np.uint32).astype(np.uint64)
    r = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    r = np.where(np.isnan(np.asarray(x, dtype=f32)), 0x7FFF, r)
    return r.astype(np.uint16)


def bf16_bits_to_float(bits) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(f32)


@dataclass(frozen=True)
class ElementType:
    """A kernel's T: how it is stored in a NumPy array, read into T_ACC and written back."""
    name: str            # as reimpl.kernels spells it
    storage: type        # NumPy dtype of the array holding it
    acc: type            # T_ACC: float32, or float64 for double

    def load(self, a) -> np.ndarray:
        """static_cast<T_ACC>(x): exact for every T."""
        if self.storage is np.uint16:
            return bf16_bits_to_float(a)
        return np.asarray(a).astype(self.acc)

    def store(self, v) -> np.ndarray:
        """T(v) from T_ACC: round to nearest even (float and double stores are exact)."""
        if self.storage is np.uint16:
            return float_to_bf16_bits(v)
        return np.asarray(v).astype(self.storage)


FLOAT = ElementType("float", np.float32, np.float32)
HALF = ElementType("c10::Half", np.float16, np.float32)
BFLOAT16 = ElementType("c10::BFloat16", np.uint16, np.float32)
DOUBLE = ElementType("double", np.float64, np.float64)
BY_NAME = {t.name: t for t in (FLOAT, HALF, BFLOAT16, DOUBLE)}
