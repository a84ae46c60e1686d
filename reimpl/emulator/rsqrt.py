"""`rsqrtf` as the H100 computes it, from a measured table; `rsqrt` for double.

rsqrtf is an approximation (MUFU.RSQ, within 2 ulp) but deterministic, and on the H100
rsqrtf(4x) == rsqrtf(x) / 2 for every normal float (docs: DESIGN.md, numerics). So for a positive
normal x = 4^k * x0 with x0 in [1, 4), rsqrtf(x) = rsqrtf(x0) * 2^-k: the table needs only x0,
that is the exponent's parity and the 23 mantissa bits (2^24 cases). Subnormal inputs go through a
scaling sequence in the compiled code (FSETP, FMUL by 2^24, MUFU.RSQ, FMUL by 2^12), so they are
tabulated one by one (2^23 - 1 cases).

Table format (`rsqrt_table.npz`, written by scripts/gpu/rsqrt_table.py on a GPU):
  normal_delta     int8[2, 2^23]  GPU bits - reference bits, for x0 = ((127 + parity) << 23) | mantissa
  subnormal_delta  int8[2^23]     the same for the subnormal x = mantissa (index 0: unused, 0)
  specials_in      uint32[k]      special inputs (+-0, +-inf, NaN, negatives) ...
  specials_out     uint32[k]      ... and the GPU's result bits
  scaling_mismatches int64        positive normals where rsqrtf(x) != rsqrtf(x0) * 2^-k (must be 0)
  meta             str (JSON)     device, versions, date
The reference is `float32(1 / sqrt(float64(x)))` computed by NumPy: deterministic on every machine,
within an ulp of the exact value, so the stored differences are small integers that compress well.
"""
from __future__ import annotations

import contextlib
import json
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import fp

TABLE_PATH = Path(__file__).parent / "rsqrt_table.npz"
GENERATOR = "scripts/gpu/rsqrt_table.py"


class MissingRsqrtTable(FileNotFoundError):
    pass


def reference32(x) -> np.ndarray:
    """The table's reference: float32(1 / sqrt(float64(x))), bit-reproducible with NumPy."""
    with np.errstate(all="ignore"):
        return (1.0 / np.sqrt(np.asarray(x, np.float32).astype(np.float64))).astype(np.float32)


def _load_measured(p: Path, what: str, generator: str, rule: str) -> dict:
    """A table measured on the GPU: its arrays and meta; refused if the GPU broke the 4^k rule."""
    if not p.is_file():
        raise MissingRsqrtTable(
            f"{p} is missing: {what} cannot be emulated without the GPU's measured values. "
            f"Generate it on a CUDA machine with `python {generator} {p.relative_to(p.parents[2])}`.")
    with np.load(p) as z:
        t = {k: z[k] for k in z.files}
    if int(t["scaling_mismatches"]) != 0:
        raise ValueError(f"{p}: {rule} fails on {int(t['scaling_mismatches'])} inputs; "
                         "the parity/mantissa table does not describe this GPU")
    t["meta"] = json.loads(str(t["meta"]))
    return t


@lru_cache(maxsize=1)
def load_table(path: str | None = None) -> dict:
    return _load_measured(Path(path) if path else TABLE_PATH, "rsqrtf", GENERATOR, "rsqrtf(4x) == rsqrtf(x)/2")


def table_rsqrtf(x, table: dict) -> np.ndarray:
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32).astype(np.int64)
    sign = bits >> 31
    exp = (bits >> 23) & 0xFF
    man = bits & 0x7FFFFF
    out = np.empty(x.shape, np.uint32)
    # positive normal: reduce to x0 in [1, 4), look up, scale the result by 2^-k
    normal = (sign == 0) & (exp > 0) & (exp < 255)
    e = exp[normal] - 127
    parity = e & 1
    k = (e - parity) // 2
    x0 = (((127 + parity) << 23) | man[normal]).astype(np.uint32).view(np.float32)
    r0 = reference32(x0).view(np.uint32).astype(np.int64) + table["normal_delta"][parity, man[normal]]
    out[normal] = (r0 - (k << 23)).astype(np.uint32)
    sub = (sign == 0) & (exp == 0) & (man > 0)
    r = reference32(x[sub]).view(np.uint32).astype(np.int64) + table["subnormal_delta"][man[sub]]
    out[sub] = r.astype(np.uint32)
    # IEEE special cases (the table's `specials` record what the GPU gave; a test compares)
    out[bits == 0] = 0x7F800000                          # +0 -> +inf
    out[bits == 0x80000000] = 0xFF800000                 # -0 -> -inf
    out[bits == 0x7F800000] = 0                          # +inf -> +0
    nan = np.isnan(x) | ((sign == 1) & (bits != 0x80000000))
    out[nan] = 0x7FFFFFFF                                # negatives and NaN -> NaN
    return out.view(np.float32)


_override = None


@contextlib.contextmanager
def override(fn):
    """Use `fn` for rsqrtf inside the block (tests on data where the table does not matter)."""
    global _override
    saved, _override = _override, fn
    try:
        yield
    finally:
        _override = saved


def rsqrtf(x) -> np.ndarray:
    """c10::cuda::compat::rsqrt(float) = ::rsqrtf: MUFU.RSQ, with FMULs around it for subnormals."""
    if _override is not None:
        return np.asarray(_override(np.asarray(x, np.float32)), np.float32)
    return table_rsqrtf(x, load_table())


def _rsqrt64_scalar(x: float) -> float:
    """The correctly rounded 1/sqrt(x): a reference for tests (the GPU's rsqrt is within 1 ulp)."""
    if np.isnan(x) or x < 0:
        return float("nan")
    if x == 0:
        return float("inf") if np.copysign(1.0, x) > 0 else float("-inf")
    if np.isinf(x):
        return 0.0
    # correctly rounded: the float estimate is within an ulp; pick the neighbour whose rounding
    # interval holds 1/sqrt(x), deciding each midpoint m exactly by the sign of m^2 * x - 1
    c = float(1.0 / np.sqrt(x))
    lo, hi = float(np.nextafter(c, 0.0)), float(np.nextafter(c, np.inf))
    fx = Fraction(x)
    m_lo = (Fraction(lo) + Fraction(c)) / 2
    m_hi = (Fraction(c) + Fraction(hi)) / 2
    if m_lo * m_lo * fx > 1:
        return lo
    if m_hi * m_hi * fx < 1:
        return hi
    return c


# --- rsqrt(double) ---------------------------------------------------------------------------
# What the SASS of RowwiseMomentsCUDAKernel<double, double, *> runs for c10::cuda::compat::rsqrt
# (nvdisasm of our sm_90 build; the same sequence as a bare ::rsqrt(double) kernel):
#
#   y  = MUFU.RSQ64H(hi word of x), low word 0     a ~20-bit estimate (measured, see below)
#   fast path iff (hi - 0x00100000) < 0x7fe00000   unsigned: x positive and normal
#   t  = DMUL  y * y
#   e  = DFMA  x * -t + 1
#   p  = DFMA  e * 0.375 + 0.5
#   q  = DMUL  y * e
#   r  = DFMA  p * q + y                           one Newton-Raphson / Taylor step on the estimate
#   else __cuda_sm20_drsqrt_f64_slowpath_v2:
#     +-0 -> +-inf; NaN -> DADD x + x; negative -> 0xfff8000000000000; +inf -> +0;
#     positive subnormal -> the fast path on x * 2^54, result DMUL by 2^27.
#
# MUFU.RSQ64H reads only the high 32-bit word. Measured on the H100 (scripts/gpu/rsqrt64_table.py):
# for every positive normal high word, the result is the one for x0 = 4^-k x in [1, 4) with the
# exponent lowered by k. So the table holds 2 x 2^20 entries (exponent parity, top 20 mantissa
# bits), stored as the difference from the high word of NumPy's 1 / sqrt(x0).
#
# Table format (`rsqrt64_table.npz`):
#   rsq64h_delta        int8[2, 2^20]  GPU high word - reference high word, x0 high word =
#                                      ((1023 + parity) << 20) | mantissa_hi
#   scaling_mismatches  int64          positive normal high words breaking the 4^k rule (must be 0)
#   samples_in/out      uint64[k]      rsqrt(double) bits measured on the GPU, specials included
#   meta                str (JSON)     device, versions, date, command, checks and their counts

TABLE64_PATH = Path(__file__).parent / "rsqrt64_table.npz"
GENERATOR64 = "scripts/gpu/rsqrt64_table.py"
# What DADD x + x gives for a NaN x: the table's meta records the rule measured on the GPU
# ("canonical": one NaN whatever came in; "quiet_input": x with its quiet bit set, sign and payload
# kept, which is what the H100 does).
CANONICAL_NAN64 = 0x7FFFFFFFFFFFFFFF


def reference_rsq64h(hi) -> np.ndarray:
    """The table's reference: the high word of NumPy's 1 / sqrt(x), x = hi << 32 (deterministic)."""
    x = (np.asarray(hi, np.uint64) << np.uint64(32)).view(np.float64)
    with np.errstate(all="ignore"):
        return ((1.0 / np.sqrt(x)).view(np.uint64) >> np.uint64(32)).astype(np.int64)


@lru_cache(maxsize=2)
def load_table64(path: str | None = None) -> dict:
    t = _load_measured(Path(path) if path else TABLE64_PATH, "rsqrt(double) (MUFU.RSQ64H)", GENERATOR64,
                       "MUFU.RSQ64H's 4^k rule")
    # the GPU's high words for x0 in [1, 4), indexed [parity, mantissa_hi]
    m = np.arange(1 << 20, dtype=np.int64)
    t["r0"] = np.stack([reference_rsq64h(((1023 + par) << 20) | m) for par in (0, 1)]) + t["rsq64h_delta"]
    return t


def rsq64h(x, table: dict | None = None) -> np.ndarray:
    """MUFU.RSQ64H for positive normal doubles: the estimate, as a double whose low word is 0."""
    t = load_table64() if table is None else table
    hi = (np.asarray(x, np.float64).view(np.uint64) >> np.uint64(32)).astype(np.int64)
    e = (hi >> 20) - 1023
    parity = e & 1
    k = (e - parity) >> 1
    r = t["r0"][parity, hi & 0xFFFFF] - (k << 20)
    return (r.astype(np.uint64) << np.uint64(32)).view(np.float64)


def _rsqrt64_refine(x: np.ndarray, table: dict) -> np.ndarray:
    """The fast path: the estimate and one refinement step, each DMUL/DFMA rounded as the GPU does."""
    y = rsq64h(x, table)
    t = y * y                                    # DMUL
    e = fp.fma64_vec(x, -t, 1.0)                 # DFMA
    p = fp.fma64_vec(e, 0.375, 0.5)              # DFMA
    q = y * e                                    # DMUL
    return fp.fma64_vec(p, q, y)                 # DFMA


def rsqrt64(x, table: dict | None = None) -> np.ndarray:
    """c10::cuda::compat::rsqrt(double) = ::rsqrt as the H100 computes it, bit for bit (MUFU.RSQ64H
    from the measured table, then the compiled DMUL/DFMA sequence; specials as the slow path does)."""
    t = load_table64() if table is None else table
    x = np.asarray(x, np.float64)
    bits = x.view(np.uint64)
    hi = (bits >> np.uint64(32)).astype(np.int64)
    out = np.empty(x.shape, np.uint64)
    fast = ((hi - 0x00100000) & 0xFFFFFFFF) < 0x7FE00000
    if fast.any():
        out[fast] = _rsqrt64_refine(x[fast], t).view(np.uint64)
    sub = (hi >= 0) & (hi < 0x00100000) & (bits != 0)       # positive subnormal
    if sub.any():
        out[sub] = (_rsqrt64_refine(x[sub] * 2.0 ** 54, t) * 2.0 ** 27).view(np.uint64)
    out[bits == 0] = 0x7FF0000000000000                           # +0 -> +inf
    out[bits == 0x8000000000000000] = 0xFFF0000000000000          # -0 -> -inf
    out[bits == 0x7FF0000000000000] = 0                           # +inf -> +0
    nan = np.isnan(x)
    neg = (bits >> np.uint64(63) == 1) & ~nan & (bits != 0x8000000000000000)
    out[neg] = 0xFFF8000000000000                                 # negative -> NaN
    out[nan] = _dadd_nan(bits[nan], t["meta"].get("nan_rule", {}))  # x + x
    return out.view(np.float64)


def _dadd_nan(bits: np.ndarray, rule: dict) -> np.ndarray:
    if rule.get("kind") == "quiet_input":
        return bits | np.uint64(0x0008000000000000)
    return np.full(bits.shape, int(rule.get("bits", f"{CANONICAL_NAN64:x}"), 16), np.uint64)
