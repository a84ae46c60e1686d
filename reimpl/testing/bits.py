"""Bitwise comparison of a user's output with torch's, and the report a failing test prints.

Works on NumPy arrays in the storage dtype (float32, float64, float16, and bfloat16 as uint16 bit
patterns) or on torch tensors of any device. Equal means the same bits, except that a NaN equals any
NaN in the same position (a kernel may produce another NaN payload). ULP distance counts the
representable values between the two: the bit patterns mapped to an ordered integer line on which
-0 and +0 are neighbours of distance 0.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
# sign and exponent masks per width; a NaN has all exponent bits set and a nonzero mantissa
_LAYOUT = {"float16": (15, 0x7C00, 0x03FF), "bfloat16": (15, 0x7F80, 0x007F),
           "float32": (31, 0x7F800000, 0x007FFFFF), "float64": (63, 0x7FF0000000000000, 0x000FFFFFFFFFFFFF)}


def as_bits(a, dtype: str | None = None) -> tuple[np.ndarray, str]:
    """(unsigned bit patterns, dtype name) of a torch tensor or a storage-dtype NumPy array."""
    if hasattr(a, "detach"):
        import torch
        name = str(a.dtype).replace("torch.", "")
        a = a.detach().contiguous().cpu()
        width = a.element_size()
        view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[width]
        return a.view(view).numpy().view(_UINT[width]), name
    a = np.asarray(a)
    name = dtype or {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
                     np.dtype(np.float16): "float16", np.dtype(np.uint16): "bfloat16"}[a.dtype]
    return a.view(_UINT[a.itemsize]), name


_STORAGE = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": np.uint16}


def storage(a) -> np.ndarray | None:
    """A torch tensor (any device) as a NumPy array of its storage dtype (bfloat16 as uint16 bit
    patterns, as the emulator takes it); a NumPy array as it is; None as None."""
    if a is None or not hasattr(a, "detach"):
        return None if a is None else np.asarray(a)
    bits, name = as_bits(a)
    return bits.view(_STORAGE[name])


def _is_nan(bits, name):
    _, exp, man = _LAYOUT[name]
    b = bits.astype(np.uint64)
    return ((b & np.uint64(exp)) == np.uint64(exp)) & ((b & np.uint64(man)) != 0)


def _ordered(bits, name):
    """Bit patterns on one integer line, in value order, -0 and +0 both at 0."""
    sign_bit, _, _ = _LAYOUT[name]
    b = bits.astype(np.uint64)
    mag = (b & np.uint64((1 << sign_bit) - 1)).astype(np.int64)
    return np.where((b >> np.uint64(sign_bit)) & np.uint64(1), -mag, mag)


def ulp_distance(a_bits, b_bits, name) -> np.ndarray:
    """Representable values between a and b (0 where equal or where either is NaN)."""
    d = np.abs(_ordered(a_bits, name) - _ordered(b_bits, name))
    return np.where(_is_nan(a_bits, name) | _is_nan(b_bits, name), 0, d)


def equal_mask(a_bits, b_bits, name) -> np.ndarray:
    """Elementwise: same bits, or NaN on both sides."""
    na, nb = _is_nan(a_bits, name), _is_nan(b_bits, name)
    return np.where(na | nb, na & nb, a_bits == b_bits)


def _value(bits, name) -> float:
    if name == "bfloat16":
        return float((np.asarray(bits, np.uint32) << 16).view(np.float32))
    return float(np.asarray(bits).view({"float16": np.float16, "float32": np.float32,
                                        "float64": np.float64}[name]))


@dataclass
class Difference:
    """How one output differs from torch's; `str()` is the report a failing assertion prints."""
    output: str
    dtype: str
    shape: tuple
    differ: int
    total: int
    rows: list[int]                 # rows (leading dims flattened) with a difference, first 20
    rows_differing: int
    max_ulp: int
    histogram: dict[str, int]       # "1", "2", "3-4", "5-8", ... ULP buckets -> elements
    nan_mismatch: list[tuple]       # positions where exactly one side is NaN, first 10
    inf_mismatch: list[tuple]       # positions where the infinities disagree, first 10
    first: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.differ == 0

    def __str__(self) -> str:
        if self.ok:
            return f"{self.output}: all {self.total} elements equal to torch's bits"
        lines = [f"{self.output} ({self.dtype}, shape {list(self.shape)}): {self.differ} of {self.total} elements "
                 f"differ, in {self.rows_differing} rows (first: {self.rows[:10]}); largest distance "
                 f"{self.max_ulp} ULP",
                 "  ULP histogram: " + ", ".join(f"{k}: {v}" for k, v in self.histogram.items())]
        if self.nan_mismatch:
            lines.append(f"  NaN on one side only at {self.nan_mismatch}")
        if self.inf_mismatch:
            lines.append(f"  infinities disagree at {self.inf_mismatch}")
        f = self.first
        lines.append(f"  first differing element {f['index']}: yours {f['yours_hex']} ({f['yours']!r}), "
                     f"torch's {f['torch_hex']} ({f['torch']!r}), {f['ulp']} ULP")
        return "\n".join(lines)


def _buckets(d: np.ndarray) -> dict[str, int]:
    """Elements per ULP-distance bucket: 1, 2, 3-4, 5-8, 9-16, ..."""
    out = {}
    lo, hi = 1, 1
    while d.size and lo <= d.max():
        n = int(((d >= lo) & (d <= hi)).sum())
        if n:
            out[str(lo) if lo == hi else f"{lo}-{hi}"] = n
        lo, hi = hi + 1, 2 * hi
    return out


def compare(output: str, yours, torch_, dtype: str | None = None, row_size: int | None = None) -> Difference:
    """How `yours` differs from `torch_` (same shape and dtype) bit for bit; a row is `row_size`
    elements (default: the last dimension)."""
    a, name = as_bits(yours, dtype)
    b, name_t = as_bits(torch_, dtype)
    if name != name_t or a.shape != b.shape:
        raise ValueError(f"{output}: yours is {name} {list(a.shape)}, torch's is {name_t} {list(b.shape)}")
    eq = equal_mask(a, b, name)
    bad = ~eq
    rows2 = bad.reshape(-1, row_size or (a.shape[-1] if a.ndim else 1))
    rows = np.flatnonzero(rows2.any(axis=1))
    d = ulp_distance(a, b, name)[bad]
    na, nb = _is_nan(a, name), _is_nan(b, name)
    nan_pos = [tuple(int(i) for i in p) for p in np.argwhere(na != nb)[:10]]
    _, exp, man = _LAYOUT[name]
    inf_a = ((a.astype(np.uint64) & np.uint64(exp | man)) == np.uint64(exp))
    inf_b = ((b.astype(np.uint64) & np.uint64(exp | man)) == np.uint64(exp))
    inf_pos = [tuple(int(i) for i in p) for p in np.argwhere((inf_a | inf_b) & bad)[:10]]
    first = {}
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        width = a.itemsize * 2
        first = {"index": idx, "yours_hex": f"0x{int(a[idx]):0{width}x}", "torch_hex": f"0x{int(b[idx]):0{width}x}",
                 "yours": _value(a[idx], name), "torch": _value(b[idx], name),
                 "ulp": int(ulp_distance(a[idx], b[idx], name))}
    return Difference(output, name, tuple(a.shape), int(bad.sum()), int(a.size), [int(r) for r in rows[:20]],
                      int(rows.size), int(d.max()) if d.size else 0, _buckets(d), nan_pos, inf_pos, first)
