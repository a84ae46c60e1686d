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
    name: str            # as reimpl.mirror.kernel_table spells it
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


# --- vectorised DFMA (added for the double rsqrt model, which needs it on millions of inputs) ---

_VELTKAMP = 134217729.0  # 2^27 + 1: splits a double into two 26-bit halves
_SAFE_LO, _SAFE_HI = 2.0 ** -1000, 2.0 ** 1000  # every rounded value inside: no underflow, no overflow


def _two_prod_unit(a, b):
    """p + e == a * b exactly (Dekker), for |a|, |b| in [0.5, 1) or 0, where nothing can over- or underflow."""
    def split(x):
        t = _VELTKAMP * x
        hi = t - (t - x)
        return hi, x - hi
    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def fma64_vec(a, b, c):
    """DFMA on arrays: a*b + c rounded once to float64, the same values as `fma64`, fast.

    Boldo and Melquiond's emulation by rounding to odd: a*b = uh + ul exactly (Dekker's product,
    computed on the frexp mantissas so that it cannot over- or underflow, then scaled back and
    checked); c + uh = th + tl exactly (TwoSum); v = tl + ul rounded to odd; the result is th + v
    rounded to nearest. The proof assumes no underflow or overflow, so elements where a rounded
    value leaves [2^-1000, 2^1000], where the result is 0 (its sign needs IEEE's rule), or where an
    operand is not finite go through the exact scalar `fma64` instead.
    """
    a, b, c = np.broadcast_arrays(*(np.asarray(v, dtype=f64) for v in (a, b, c)))
    with np.errstate(all="ignore"):
        ma, ea = np.frexp(a)
        mb, eb = np.frexp(b)
        p, e = _two_prod_unit(ma, mb)
        E = ea + eb
        uh, ul = np.ldexp(p, E), np.ldexp(e, E)
        exact = (np.ldexp(uh, -E) == p) & (np.ldexp(ul, -E) == e)
        th, tl = _two_sum(c, uh)
        s, err = _two_sum(tl, ul)
        # round to odd: an inexact s with an even last bit moves one ulp towards the lost part
        even = (s.view(np.int64) & 1) == 0
        v = np.where((err != 0) & even, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        r = th + v

        def in_range(x):
            ax = np.abs(x)
            return (ax == 0) | ((ax >= _SAFE_LO) & (ax < _SAFE_HI))
        ok = (np.isfinite(a) & np.isfinite(b) & np.isfinite(c) & exact & (r != 0)
              & in_range(uh) & in_range(c) & in_range(th) & in_range(s) & in_range(v) & in_range(r))
    out = np.array(r, dtype=f64)
    if not ok.all():
        bad = ~ok
        out[bad] = fma64(a[bad], b[bad], c[bad])
    return out
