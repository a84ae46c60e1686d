"""Torch's bits, faster: the forward LayerNorm/RMSNorm with torch 2.11's exact out, mean and rstd,
from a kernel of ours (reimpl/fast/cuda/fast_layer_norm.cu) where torch would launch its
vectorized kernel, and from the mirror everywhere else, so the result is torch's in every case.

    native_layer_norm, fused_rms_norm      aten's forward contracts (as reimpl's)
    layer_norm, rms_norm                   torch.nn.functional's, differentiable (the mirror's backward)
    use_fast(module)                       make reimpl.nn.LayerNorm / RMSNorm modules in `module` use it

Imports: the public face, the mirror and reimpl.device.
"""
from __future__ import annotations

import contextlib

from .. import api, functional
from ..device import runtime
from .kernel import FastRuntime

_RUNTIME: FastRuntime | None = None


def fast_runtime() -> FastRuntime:
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = FastRuntime()
    return _RUNTIME


@contextlib.contextmanager
def _fast():
    with runtime.use(fast_runtime()):
        yield


def native_layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    with _fast():
        return api.native_layer_norm(input, normalized_shape, weight, bias, eps)


def fused_rms_norm(input, normalized_shape, weight=None, eps: float | None = None):
    with _fast():
        return api.fused_rms_norm(input, normalized_shape, weight, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Differentiable: the forward runs here, autograd's backward later runs the mirror's kernels."""
    with _fast():
        return functional.layer_norm(input, normalized_shape, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps: float | None = None):
    with _fast():
        return functional.rms_norm(input, normalized_shape, weight, eps)


def use_fast(module):
    """Point every reimpl.nn.LayerNorm / RMSNorm inside `module` (itself included) at the fast
    forward; returns `module`."""
    from .. import nn
    for m in module.modules():
        if isinstance(m, (nn.LayerNorm, nn.RMSNorm)):
            m.runtime = fast_runtime()
    return module
