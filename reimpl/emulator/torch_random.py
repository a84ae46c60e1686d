"""torch's CPU random numbers in NumPy, bit for bit: `torch.Generator()` (mt19937), `torch.rand` and
`torch.randn`, as far as reimpl.checks' cases draw them. With it `python -m reimpl trace` makes a
case's inputs where torch is not installed (case_inputs.py); tests/test_no_torch_cpu.py holds it to
torch's own draws.

What it reproduces (aten/src/ATen/core/DistributionsHelper.h, TransformationHelper.h and
native/cpu/DistributionTemplates.h):
  Generator(seed)  std::mt19937 seeded with the seed's low 32 bits (NumPy's legacy MT19937 seeding
                   is the same), plus the cached second sample of normal_distribution<double>
  rand             the low 24 bits of one draw times 2^-24 (float); the low 53 bits of two draws,
                   the first high, times 2^-53 (double)
  randn, n >= 16   normal_fill: n uniforms, then Box-Muller on each 16 (u1 = 1 - u[j], u2 = u[j + 8]),
                   the last 16 redrawn when 16 does not divide n. float32 as torch's AVX2 kernel
                   computes it (avx_mathfun's log256_ps and sincos256_ps, with the multiply-adds the
                   compiler fuses into FMAs), the kernel torch runs on x86-64 CPUs with AVX2 or AVX-512;
                   torch's plain build (no AVX2) computes float32 with libm and differs in the last
                   bit. float64 with libm's log, cos and sin (the math module calls the same ones).
  randn, n < 16    normal_distribution<double> per element, the sine of each pair cached for the next
"""
from __future__ import annotations

import math

import numpy as np

from .fp import fma32

f32 = np.float32


class Generator:
    """torch.Generator() on the CPU after manual_seed(seed)."""

    def __init__(self, seed: int):
        self._mt = np.random.RandomState(seed & 0xFFFFFFFF)
        self._next_double_normal = None

    def random(self, n: int) -> np.ndarray:
        """n draws of mt19937 (uint32); the full range takes exactly one draw each."""
        return self._mt.randint(0, 2**32, size=n, dtype=np.uint32)

    def uniform(self, n: int, double: bool) -> np.ndarray:
        """uniform_real_distribution<float or double>(0, 1), n times."""
        if not double:
            return (self.random(n) & 0xFFFFFF).astype(f32) * f32(2.0**-24)
        r = self.random(2 * n).astype(np.uint64)
        bits = (r[0::2] << np.uint64(32)) | r[1::2]
        return (bits & np.uint64(2**53 - 1)).astype(np.float64) * 2.0**-53

    def normal_double(self) -> float:
        """normal_distribution<double>(0, 1)."""
        if self._next_double_normal is not None:
            ret, self._next_double_normal = self._next_double_normal, None
            return ret
        u1, u2 = self.uniform(2, True)
        r = math.sqrt(-2.0 * math.log1p(-u2))
        theta = 2.0 * math.pi * u1
        self._next_double_normal = r * math.sin(theta)
        return r * math.cos(theta)


def rand(gen: Generator, n: int) -> np.ndarray:
    """torch.rand(n, generator=gen): float32."""
    return gen.uniform(n, False)


def randn(gen: Generator, n: int, double: bool = False) -> np.ndarray:
    """torch.randn(n, generator=gen, dtype=float64 if double else float32), contiguous."""
    if n < 16:
        return np.array([gen.normal_double() for _ in range(n)]).astype(np.float64 if double else f32)
    box_muller = _box_muller_double if double else _box_muller_avx2
    data = gen.uniform(n, double)
    full = n - n % 16
    data[:full] = box_muller(data[:full].reshape(-1, 16)).reshape(-1)
    if n % 16:
        data[n - 16:] = box_muller(gen.uniform(16, double).reshape(1, 16)).reshape(-1)
    return data


def _box_muller_double(u: np.ndarray) -> np.ndarray:
    """normal_fill_16<double> on each row of 16, element by element through libm."""
    out = np.empty_like(u)
    for row, src in zip(out, u):
        for j in range(8):
            radius = math.sqrt(-2 * math.log(1 - src[j]))
            theta = 2.0 * math.pi * src[j + 8]
            row[j], row[j + 8] = radius * math.cos(theta), radius * math.sin(theta)
    return out


def _fma(a, b, c):
    return fma32(a, b, c).astype(f32)


def _as_int(x):
    return np.asarray(x, f32).view(np.int32)


def _as_float(i):
    return np.asarray(i, np.int32).view(f32)


def _log256_ps(x: np.ndarray) -> np.ndarray:
    """avx_mathfun's log256_ps (natural log), its statements in order."""
    invalid = x <= 0
    x = np.maximum(x, _as_float(0x00800000))  # cut off denormals
    e_bits = (_as_int(x) >> 23) & 0x1FF
    x = _as_float((_as_int(x) & ~0x7F800000) | _as_int(f32(0.5)))
    e = (e_bits - 0x7F).astype(f32) + f32(1)
    mask = x < f32(0.707106781186547524)
    tmp = np.where(mask, x, f32(0))
    x = x - f32(1)
    e = e - np.where(mask, f32(1), f32(0))
    x = x + tmp
    z = x * x
    y = np.full_like(x, f32(7.0376836292e-2))
    for p in (-1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
              2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1):
        y = _fma(y, x, f32(p))
    y = y * x
    y = _fma(y, z, e * f32(-2.12194440e-4))   # y * z + e * q1: the first product fused
    y = y - z * f32(0.5)                       # (z * 0.5 is exact: fused or not, the same)
    x = x + y
    x = _fma(e, f32(0.693359375), x)
    return np.where(invalid, f32(np.nan), x)


def _sincos256_ps(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """avx_mathfun's sincos256_ps (AVX2 integer path), its statements in order."""
    sign_sin = _as_int(x) & np.int32(-2**31)
    x = np.abs(x)
    j = (x * f32(1.27323954473516)).astype(np.int32)   # 4 / pi, truncated
    j = (j + 1) & ~1
    y = j.astype(f32)
    swap_sign_sin = (j & 4) << 29
    poly_mask = (j & 2) == 0
    x = _fma(y, f32(-0.78515625), x)                     # extended-precision x - y * pi / 4
    x = _fma(y, f32(-2.4187564849853515625e-4), x)
    x = _fma(y, f32(-3.77489497744594108e-8), x)
    sign_cos = (~(j - 2) & 4) << 29
    sign_sin = sign_sin ^ swap_sign_sin
    z = x * x
    yc = np.full_like(x, f32(2.443315711809948e-5))
    yc = _fma(yc, z, f32(-1.388731625493765e-3))
    yc = _fma(yc, z, f32(4.166664568298827e-2))
    yc = yc * z
    yc = _fma(yc, z, -(z * f32(0.5)))                    # yc * z - z * 0.5: the first product fused
    yc = yc + f32(1)
    ys = np.full_like(x, f32(-1.9515295891e-4))
    ys = _fma(ys, z, f32(8.3321608736e-3))
    ys = _fma(ys, z, f32(-1.6666654611e-1))
    ys = ys * z
    ys = _fma(ys, x, x)
    s = np.where(poly_mask, ys, yc)
    c = np.where(poly_mask, yc, ys)
    return _as_float(_as_int(s) ^ sign_sin), _as_float(_as_int(c) ^ sign_cos.astype(np.int32))


def _box_muller_avx2(u: np.ndarray) -> np.ndarray:
    """normal_fill_16_AVX2 on each row of 16 (mean 0 and std 1: its final FMA is exact)."""
    radius = np.sqrt(f32(-2) * _log256_ps(f32(1) - u[:, :8]))
    sin, cos = _sincos256_ps(f32(2.0 * math.pi) * u[:, 8:])
    return np.concatenate([radius * cos, radius * sin], axis=1)
