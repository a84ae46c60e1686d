"""`rsqrtf` as the H100 computes it, from a measured table; `rsqrt` for double.

rsqrtf is an approximation (MUFU.RSQ, within 2 ulp) but deterministic, and on the H100
rsqrtf(4x) == rsqrtf(x) / 2 for every normal float (docs: DESIGN.md, numerics). So for a positive
normal x = 4^k * x0 with x0 in [1, 4), rsqrtf(x) = rsqrtf(x0) * 2^-k: the table needs only x0,
that is the exponent's parity and the 23 mantissa bits (2^24 cases). Subnormal inputs go through a
scaling sequence in the compiled code (FSETP, FMUL by 2^24, MUFU.RSQ, FMUL by 2^12), so they are
tabulated one by one (2^23 - 1 cases).

Table format (`rsqrt_table.npz`, written by scripts/rsqrt_table.py on a GPU):
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

TABLE_PATH = Path(__file__).parent / "rsqrt_table.npz"
GENERATOR = "scripts/rsqrt_table.py"


class MissingRsqrtTable(FileNotFoundError):
    pass


def reference32(x) -> np.ndarray:
    """The table's reference: float32(1 / sqrt(float64(x))), bit-reproducible with NumPy."""
    with np.errstate(all="ignore"):
        return (1.0 / np.sqrt(np.asarray(x, np.float32).astype(np.float64))).astype(np.float32)


@lru_cache(maxsize=1)
def load_table(path: str | None = None) -> dict:
    p = Path(path) if path else TABLE_PATH
    if not p.is_file():
        raise MissingRsqrtTable(
            f"{p} is missing: rsqrtf cannot be emulated without the GPU's measured values. "
            f"Generate it on a CUDA machine with `python {GENERATOR} reimpl/emulator/rsqrt_table.npz`.")
    with np.load(p) as z:
        t = {k: z[k] for k in z.files}
    if int(t["scaling_mismatches"]) != 0:
        raise ValueError(f"{p}: rsqrtf(4x) != rsqrtf(x)/2 on {int(t['scaling_mismatches'])} inputs; "
                         "the parity/mantissa table does not describe this GPU")
    t["meta"] = json.loads(str(t["meta"]))
    return t


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


def rsqrt64(x) -> np.ndarray:
    """c10::cuda::compat::rsqrt(double) = ::rsqrt. The GPU's is MUFU.RSQ64H plus DFMA refinement
    (within 1 ulp, not always correctly rounded); this returns the correctly rounded value, so fp64
    rstd may differ from the GPU's by 1 ulp (tests allow it; see test_emulator_golden_cpu.py)."""
    return np.asarray(np.frompyfunc(_rsqrt64_scalar, 1, 1)(np.asarray(x, np.float64)), np.float64)
