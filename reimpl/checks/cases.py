"""Test cases shared by the GPU parity tests, the launch recorder and the CPU launch-plan tests.

A `Case` says everything needed to rebuild the same inputs anywhere: op, dtype, shape, how many
trailing dims are normalized, which affine tensors exist, storage offsets (to misalign pointers),
the kind of values, eps and a seed. Values come from a seeded generator on the target device.
"""
from __future__ import annotations

import itertools
import random
from dataclasses import asdict, dataclass

try:
    import torch
except ImportError:  # `python -m reimpl trace` builds cases without torch (inputs: reimpl/emulator/case_inputs.py)
    torch = None

DTYPES = ({"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}
          if torch is not None else dict.fromkeys(("fp32", "fp16", "bf16", "fp64")))
VALUE_KINDS = ("normal", "offset", "small", "large", "subnormal", "zeros", "inf", "nan")


@dataclass(frozen=True)
class Case:
    op: str                  # "layer_norm" (aten::native_layer_norm) or "rms_norm" (aten::_fused_rms_norm)
    dtype: str               # key of DTYPES
    shape: tuple[int, ...]
    norm_ndim: int = 1       # trailing dims normalized
    weight: bool = True
    bias: bool = True        # ignored for rms_norm
    x_offset: int = 0        # storage offsets in elements; 1 misaligns the pointer
    w_offset: int = 0
    b_offset: int = 0
    values: str = "normal"
    eps: float | None = 1e-5
    seed: int = 0
    transpose: bool = False  # input given as a non-contiguous transpose of its last two dims

    @property
    def id(self) -> str:
        parts = [self.op, self.dtype, "x".join(map(str, self.shape))]
        if self.norm_ndim != 1:
            parts.append(f"nd{self.norm_ndim}")
        parts.append(("w" if self.weight else "") + ("b" if self.bias and self.op == "layer_norm" else "") or "noaffine")
        if self.x_offset or self.w_offset or self.b_offset:
            parts.append(f"off{self.x_offset}{self.w_offset}{self.b_offset}")
        if self.transpose:
            parts.append("T")
        parts += [self.values, f"eps{self.eps}", f"s{self.seed}"]
        return "-".join(parts)

    @property
    def normalized_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[len(self.shape) - self.norm_ndim:])

    def as_dict(self) -> dict:
        d = asdict(self)
        d["shape"] = list(self.shape)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Case":
        d = dict(d)
        d["shape"] = tuple(d["shape"])
        return cls(**d)

    @property
    def output_names(self) -> tuple[str, ...]:
        return ("out", "mean", "rstd") if self.op == "layer_norm" else ("out", "rstd")

    # ---- inputs ---------------------------------------------------------------------------------
    def _values(self, n: int, gen: torch.Generator, device, kind: str | None = None) -> torch.Tensor:
        dtype = DTYPES[self.dtype]
        v = torch.randn(n, generator=gen, device=device, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
        kind = kind or self.values
        if kind == "offset":
            v = v + 1e4
        elif kind == "small":
            v = v * 1e-3
        elif kind == "large":
            v = v * 1e3
        elif kind == "subnormal":
            v = v * torch.finfo(dtype).tiny * 0.25   # below the smallest normal of the dtype
        elif kind == "zeros":
            v = torch.where(v > 0, torch.zeros_like(v), -torch.zeros_like(v))
        elif kind in ("inf", "nan"):
            special = torch.rand(n, generator=gen, device=device) < 0.01
            fill = float("nan") if kind == "nan" else float("inf")
            sign = torch.where(torch.rand(n, generator=gen, device=device) < 0.5, -1.0, 1.0).to(v.dtype)
            v = torch.where(special, sign * fill, v)
        return v.to(dtype)

    def _buffer(self, n: int, offset: int, gen, device, values: bool, kind: str | None = None) -> torch.Tensor:
        dtype = DTYPES[self.dtype]
        if not values:
            return torch.empty(n + offset, dtype=dtype, device=device)[offset:]
        buf = torch.empty(n + offset, dtype=dtype, device=device)
        buf[offset:] = self._values(n, gen, device, kind)
        return buf[offset:]

    def _shaped(self, flat: torch.Tensor) -> torch.Tensor:
        """A flat buffer viewed as the input's shape (as a transpose when `transpose` is set)."""
        if self.transpose:
            *lead, a, b = self.shape
            return flat.view(*lead, b, a).transpose(-1, -2)
        return flat.view(self.shape)

    def make_inputs(self, device="cuda", values: bool = True):
        """(input, weight or None, bias or None) on `device`; values=False skips filling (plans only)."""
        gen = torch.Generator(device=device)
        gen.manual_seed(self.seed)
        numel = 1
        for s in self.shape:
            numel *= s
        x = self._shaped(self._buffer(numel, self.x_offset, gen, device, values))
        ns = self.normalized_shape
        nn_ = 1
        for s in ns:
            nn_ *= s
        w = self._buffer(nn_, self.w_offset, gen, device, values).view(ns) if self.weight else None
        b = (self._buffer(nn_, self.b_offset, gen, device, values).view(ns)
             if self.bias and self.op == "layer_norm" else None)
        if values and w is not None and self.values not in ("normal",):
            # keep the affine tensors ordinary: the value kind is about the input
            w.copy_(torch.randn(ns, generator=gen, device=device, dtype=torch.float32).to(w.dtype))
        if values and b is not None and self.values not in ("normal",):
            b.copy_(torch.randn(ns, generator=gen, device=device, dtype=torch.float32).to(b.dtype))
        return x, w, b

    def make_args(self, device="cuda", values: bool = True) -> tuple:
        """The arguments run_torch / run_ours take."""
        return self.make_inputs(device, values)

    # ---- the two implementations ------------------------------------------------------------------
    def run_torch(self, x, w, b):
        if self.op == "layer_norm":
            return torch.ops.aten.native_layer_norm(x, list(self.normalized_shape), w, b, self.eps)
        return torch.ops.aten._fused_rms_norm(x, list(self.normalized_shape), w, self.eps)

    def run_ours(self, x, w, b):
        import reimpl
        if self.op == "layer_norm":
            return reimpl.native_layer_norm(x, self.normalized_shape, w, b, self.eps)
        return reimpl.fused_rms_norm(x, self.normalized_shape, w, self.eps)

    def run_host(self, x, w, b):
        """The host mirror itself, with no device checks: how launch plans are made on a CPU."""
        from ..mirror.layer_norm_kernel import _fused_rms_norm_cuda, layer_norm_cuda
        if self.op == "layer_norm":
            return layer_norm_cuda(x, self.normalized_shape, w, b, self.eps)
        return _fused_rms_norm_cuda(x, self.normalized_shape, w, self.eps)


# ---- case matrices --------------------------------------------------------------------------------
MS = (0, 1, 7, 64, 65537)
NS = (1, 2, 3, 4, 5, 768, 1000, 1023, 1024, 4096, 5120, 12288, 65536)


def _shape_ok(m: int, n: int) -> bool:
    return m * n <= 65537 * 1024  # keeps the largest case at 64 Mi elements


def shape_grid() -> list[Case]:
    """Every (M, N) of the issue, for every dtype and op, with and without the affine tensors."""
    out = []
    for op, dt, m, n in itertools.product(("layer_norm", "rms_norm"), DTYPES, MS, NS):
        if not _shape_ok(m, n):
            continue
        affines = ((True, True), (False, False)) if op == "layer_norm" else ((True, False), (False, False))
        for w, b in affines:
            out.append(Case(op, dt, (m, n), weight=w, bias=b))
    return out


def path_cases() -> list[Case]:
    """Each reason for the fallback path, and the affine combinations, on both paths."""
    out = []
    for op, dt in itertools.product(("layer_norm", "rms_norm"), DTYPES):
        for w, b in ((True, True), (True, False), (False, True), (False, False)):
            if op == "rms_norm" and b:
                continue
            out.append(Case(op, dt, (64, 1024), weight=w, bias=b))               # vectorized (not fp64)
            out.append(Case(op, dt, (64, 1022), weight=w, bias=b))               # N % 4 != 0
            out.append(Case(op, dt, (64, 1024), weight=w, bias=b, x_offset=1))   # misaligned input
            if w:
                out.append(Case(op, dt, (64, 1024), weight=w, bias=b, w_offset=1))  # misaligned weight
            if b and op == "layer_norm":
                out.append(Case(op, dt, (64, 1024), weight=w, bias=b, b_offset=1))  # misaligned bias
            out.append(Case(op, dt, (64, 1024), weight=w, bias=b, x_offset=4))   # aligned offset (fp16: 8 B)
    return out


def value_cases() -> list[Case]:
    out = []
    for op, dt, kind, n in itertools.product(("layer_norm", "rms_norm"), DTYPES, VALUE_KINDS, (1024, 1023)):
        out.append(Case(op, dt, (32, n), values=kind, seed=7))
    return out


def eps_cases() -> list[Case]:
    out = []
    for op, dt, eps in itertools.product(("layer_norm", "rms_norm"), DTYPES, (1e-5, 1e-6, 1e-12, 0.1, 0.0)):
        out.append(Case(op, dt, (16, 768), eps=eps, values="small", seed=3))
    for dt in DTYPES:
        out.append(Case("rms_norm", dt, (16, 768), eps=None, seed=3))   # eps=None: machine epsilon
    return out


def layout_cases() -> list[Case]:
    """Multi-dimensional normalized_shape and non-contiguous inputs."""
    out = []
    for op, dt in itertools.product(("layer_norm", "rms_norm"), DTYPES):
        out.append(Case(op, dt, (2, 3, 16, 64), norm_ndim=2))
        out.append(Case(op, dt, (2, 3, 5, 7), norm_ndim=3))
        out.append(Case(op, dt, (4, 96, 32), norm_ndim=1, transpose=True))
        out.append(Case(op, dt, (3, 4, 8), norm_ndim=3))
    return out


def random_cases(count: int = 2000, seed: int = 1234) -> list[Case]:
    """A seeded sweep over shape, dtype, offsets, affine flags, value kind and eps."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        op = rng.choice(("layer_norm", "rms_norm"))
        dt = rng.choice(tuple(DTYPES))
        n = rng.choice((rng.randint(1, 64), rng.randint(1, 4096), 4 * rng.randint(1, 1024), 4 * rng.randint(1, 4096)))
        m = rng.choice((1, rng.randint(1, 16), rng.randint(1, 300)))
        ndim_extra = rng.choice((0, 0, 1))
        shape = (m, n) if not ndim_extra else (max(1, m // 3), 3, n)
        out.append(Case(op, dt, shape, weight=rng.random() < 0.7, bias=rng.random() < 0.7,
                        x_offset=rng.choice((0, 0, 0, 1, 2, 4)), w_offset=rng.choice((0, 0, 0, 1)),
                        b_offset=rng.choice((0, 0, 0, 1)),
                        values=rng.choice(VALUE_KINDS + ("normal",) * 4),
                        eps=rng.choice((1e-5, 1e-6, 1e-3)), seed=i))
    return out


def launch_cases() -> list[Case]:
    """Cases whose launches are recorded from torch: shapes, dtypes, paths, affine, no values needed."""
    seen, out = set(), []
    for c in shape_grid() + path_cases() + layout_cases():
        key = (c.op, c.dtype, c.shape, c.norm_ndim, c.weight, c.bias, c.x_offset, c.w_offset, c.b_offset, c.transpose)
        if key not in seen and (c.shape[0] != 65537 or c.shape[1] in (1, 768, 1024)):
            seen.add(key)
            out.append(c)
    return out
