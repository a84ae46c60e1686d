"""Backward test cases: a forward `Case` plus what the backward adds (the output mask, grad_out's
storage offset and value kind), and the case matrices the backward tests, recorder and CPU
launch-plan tests share.

mean and rstd come from torch's own forward on the same inputs, so a backward case tests the
backward kernels alone (the forward's parity is tested on its own; the autograd tests chain both).
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

try:
    import torch
except ImportError:  # `python -m reimpl trace --backward` builds cases without torch
    torch = None

from ..mirror.aten_shim import toAccumulateType
from .cases import DTYPES, VALUE_KINDS, Case
from ..mirror.layer_norm_kernel import _stat_shape

DY_SEED_SALT = 1_000_003  # grad_out gets its own generator stream, so x keeps the forward's values


@dataclass(frozen=True)
class BackwardCase(Case):
    mask: tuple[bool, ...] = (True, True, True)  # output_mask; rms_norm uses the first two
    dy_offset: int = 0                           # storage offset of grad_out in elements
    dy_values: str = "normal"                    # value kind of grad_out

    @property
    def output_mask(self) -> list[bool]:
        return list(self.mask[:3] if self.op == "layer_norm" else self.mask[:2])

    @property
    def id(self) -> str:
        parts = [super().id, "bwd", "m" + "".join("1" if m else "0" for m in self.output_mask)]
        if self.dy_offset:
            parts.append(f"dyoff{self.dy_offset}")
        if self.dy_values != "normal":
            parts.append(f"dy{self.dy_values}")
        return "-".join(parts)

    @property
    def output_names(self) -> tuple[str, ...]:
        return ("dX", "dgamma", "dbeta") if self.op == "layer_norm" else ("dX", "dweight")

    def as_dict(self) -> dict:
        d = super().as_dict()
        d["mask"] = list(self.mask)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "BackwardCase":
        d = dict(d)
        d["mask"] = tuple(d["mask"])
        return super().from_dict(d)

    def make_args(self, device="cuda", values: bool = True) -> tuple:
        """(grad_out, input, mean or None, rstd, weight or None, bias or None)."""
        x, w, b = self.make_inputs(device, values)
        gen = torch.Generator(device=device)
        gen.manual_seed(self.seed + DY_SEED_SALT)
        dy = self._shaped(self._buffer(x.numel(), self.dy_offset, gen, device, values, self.dy_values))
        ns = list(self.normalized_shape)
        if values:
            if self.op == "layer_norm":
                _, mean, rstd = torch.ops.aten.native_layer_norm(x, ns, w, b, self.eps)
            else:
                _, rstd = torch.ops.aten._fused_rms_norm(x, ns, w, self.eps)
                mean = None
        else:
            acc = toAccumulateType(x.dtype)
            stat_shape = _stat_shape(x, self.normalized_shape)
            rstd = torch.empty(stat_shape, dtype=acc, device=device)
            mean = torch.empty(stat_shape, dtype=acc, device=device) if self.op == "layer_norm" else None
        return dy, x, mean, rstd, w, b

    def run_torch(self, dy, x, mean, rstd, w, b):
        ns = list(self.normalized_shape)
        if self.op == "layer_norm":
            return torch.ops.aten.native_layer_norm_backward(dy, x, ns, mean, rstd, w, b, self.output_mask)
        return torch.ops.aten._fused_rms_norm_backward(dy, x, ns, rstd, w, self.output_mask)

    def run_ours(self, dy, x, mean, rstd, w, b):
        import reimpl
        if self.op == "layer_norm":
            return reimpl.native_layer_norm_backward(dy, x, self.normalized_shape, mean, rstd, w, b, self.output_mask)
        return reimpl.fused_rms_norm_backward(dy, x, self.normalized_shape, rstd, w, self.output_mask)

    def run_host(self, dy, x, mean, rstd, w, b):
        from ..mirror.layer_norm_kernel import _fused_rms_norm_backward_cuda, layer_norm_backward_cuda
        if self.op == "layer_norm":
            return layer_norm_backward_cuda(dy, x, self.normalized_shape, mean, rstd, w, b, self.output_mask)
        return _fused_rms_norm_backward_cuda(dy, x, self.normalized_shape, rstd, w, self.output_mask)


def _full_mask(op: str, w: bool, b: bool) -> tuple[bool, bool, bool]:
    """Every gradient that exists: a missing weight or bias has none (asking for it is an error)."""
    return (True, w, b and op == "layer_norm")


def _affines(op: str):
    return ((True, True), (False, False)) if op == "layer_norm" else ((True, False), (False, False))


# M around each GammaBeta threshold (tile <32,1,8> below 64, <32,8,64> below 128, <32,16,128>
# below 256, <32,32,256> from 256), and N with and without N % 4 / N % 32.
BWD_MS = (0, 1, 63, 64, 127, 128, 255, 256, 4096)
BWD_NS = (1, 3, 4, 32, 33, 100, 768, 1000, 1024, 4096)
# Tall and narrow: M > 64 * 1024 and N / 32 < sm_count / 2 (66 on the H100) takes the <32,1,32>
# partial reduction finished by .sum(0); N = 2112 is the first width that does not. 1048577 rows
# with N <= 32 exceed the 32768 row-blocks of the grid, so the kernel's M loop runs twice.
PARTIAL_SHAPES = ((65537, 1), (65537, 8), (65537, 32), (65537, 100), (65537, 768), (100000, 64),
                  (65537, 2111), (65537, 2112), (65536, 100), (1048577, 8), (1048608, 32))


def shape_grid() -> list[BackwardCase]:
    out = []
    for op, dt, m, n in itertools.product(("layer_norm", "rms_norm"), DTYPES, BWD_MS, BWD_NS):
        for w, b in _affines(op):
            out.append(BackwardCase(op, dt, (m, n), weight=w, bias=b, mask=_full_mask(op, w, b)))
    return out


def partial_cases() -> list[BackwardCase]:
    out = []
    for op, dt, (m, n) in itertools.product(("layer_norm", "rms_norm"), DTYPES, PARTIAL_SHAPES):
        if dt == "fp64" and m * n > 16 * 2**20:
            continue
        out.append(BackwardCase(op, dt, (m, n), mask=_full_mask(op, True, True)))
    # dbeta without dgamma: torch 2.11 returns an empty dbeta here (its buffer is sized from dgamma)
    for op, mask in (("layer_norm", (False, True, False)), ("layer_norm", (True, True, False)),
                     ("layer_norm", (False, True, True)), ("layer_norm", (True, False, True)),
                     ("layer_norm", (False, False, True)), ("rms_norm", (False, True, False))):
        out.append(BackwardCase(op, "bf16", (65537, 768), mask=mask))
    return out


def path_cases() -> list[BackwardCase]:
    """Both grad-input kernels: aligned (vectorized) and each reason for the plain one."""
    out = []
    for op, dt in itertools.product(("layer_norm", "rms_norm"), DTYPES):
        for w in (True, False):
            b = w and op == "layer_norm"
            mask = _full_mask(op, w, b)
            for m in (64, 300):
                out.append(BackwardCase(op, dt, (m, 1024), weight=w, bias=b, mask=mask))               # vectorized
                out.append(BackwardCase(op, dt, (m, 1022), weight=w, bias=b, mask=mask))               # N % 4
                out.append(BackwardCase(op, dt, (m, 1024), weight=w, bias=b, mask=mask, x_offset=1))   # X
                out.append(BackwardCase(op, dt, (m, 1024), weight=w, bias=b, mask=mask, dy_offset=1))  # dY
                out.append(BackwardCase(op, dt, (m, 1024), weight=w, bias=b, mask=mask, x_offset=4, dy_offset=4))
                if w:
                    out.append(BackwardCase(op, dt, (m, 1024), weight=w, bias=b, mask=mask, w_offset=1))  # gamma
                if b:
                    out.append(BackwardCase(op, dt, (m, 1024), weight=w, bias=b, mask=mask, b_offset=1))  # beta: no effect
    return out


def mask_cases() -> list[BackwardCase]:
    """Every output_mask, for every tile size class."""
    out = []
    for dt, m, n in itertools.product(DTYPES, (7, 64, 200, 1000), (1000, 1024)):
        for mask in itertools.product((False, True), repeat=3):
            out.append(BackwardCase("layer_norm", dt, (m, n), mask=mask))
        for mask in itertools.product((False, True), repeat=2):
            out.append(BackwardCase("rms_norm", dt, (m, n), bias=False, mask=mask + (False,)))
    return out


def value_cases() -> list[BackwardCase]:
    out = []
    for op, dt, kind, n in itertools.product(("layer_norm", "rms_norm"), DTYPES, VALUE_KINDS, (1024, 1023)):
        out.append(BackwardCase(op, dt, (96, n), values=kind, seed=7))
        out.append(BackwardCase(op, dt, (300, n), dy_values=kind, seed=8))
    return out


def layout_cases() -> list[BackwardCase]:
    """Multi-dimensional normalized_shape and non-contiguous input and grad_out."""
    out = []
    for op, dt in itertools.product(("layer_norm", "rms_norm"), DTYPES):
        b = op == "layer_norm"
        mask = _full_mask(op, True, b)
        out.append(BackwardCase(op, dt, (2, 3, 16, 64), norm_ndim=2, bias=b, mask=mask))
        out.append(BackwardCase(op, dt, (2, 3, 5, 7), norm_ndim=3, bias=b, mask=mask))
        out.append(BackwardCase(op, dt, (4, 96, 32), bias=b, mask=mask, transpose=True))
        out.append(BackwardCase(op, dt, (5, 300, 64), bias=b, mask=mask, transpose=True))
    return out


def random_cases(count: int = 1000, seed: int = 4321) -> list[BackwardCase]:
    """A seeded sweep over shape (M across the GammaBeta thresholds), dtype, offsets, affine flags,
    output mask and value kinds."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        op = rng.choice(("layer_norm", "rms_norm"))
        dt = rng.choice(tuple(DTYPES))
        n = rng.choice((rng.randint(1, 64), rng.randint(1, 4096), 4 * rng.randint(1, 1024), 32 * rng.randint(1, 64)))
        m = rng.choice((rng.randint(1, 70), rng.randint(1, 300), rng.randint(200, 3000)))
        shape = (m, n) if rng.random() < 0.75 else (max(1, m // 3), 3, n)
        w = rng.random() < 0.7
        b = rng.random() < 0.7 and op == "layer_norm"
        mask = (rng.random() < 0.9, w and rng.random() < 0.9, b and rng.random() < 0.9)
        out.append(BackwardCase(op, dt, shape, weight=w, bias=b, mask=mask,
                                x_offset=rng.choice((0, 0, 0, 1, 2, 4)), w_offset=rng.choice((0, 0, 0, 1)),
                                b_offset=rng.choice((0, 0, 0, 1)), dy_offset=rng.choice((0, 0, 0, 1, 4)),
                                values=rng.choice(VALUE_KINDS + ("normal",) * 4),
                                dy_values=rng.choice(VALUE_KINDS + ("normal",) * 6),
                                eps=rng.choice((1e-5, 1e-6, 1e-3)), seed=i))
    return out


def launch_cases() -> list[BackwardCase]:
    """Cases whose backward launches are recorded from torch (values don't matter for launches)."""
    seen, out = set(), []
    for c in shape_grid() + partial_cases() + path_cases() + mask_cases() + layout_cases():
        key = (c.op, c.dtype, c.shape, c.norm_ndim, c.weight, c.bias, c.x_offset, c.w_offset, c.b_offset,
               c.transpose, tuple(c.output_mask), c.dy_offset)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out
