"""Torch's bits, faster: LayerNorm/RMSNorm with torch 2.11's exact out, mean and rstd, and exact dX,
from kernels of ours (reimpl/fast/cuda/fast_layer_norm.cu, fast_grad_input.cu) where torch would
launch its vectorized forward or grad-input kernel, and from the mirror everywhere else (dgamma and
dbeta included), so the result is torch's in every case.

    native_layer_norm, fused_rms_norm      aten's forward contracts (as reimpl's)
    native_layer_norm_backward,            aten's backward contracts (as reimpl's)
      fused_rms_norm_backward
    layer_norm, rms_norm                   torch.nn.functional's, differentiable: the backward runs
                                           under the same runtime, so dX is the fast kernel's too
    use_fast(module)                       make reimpl.nn.LayerNorm / RMSNorm modules in `module` use it

Imports: the public face, the mirror and reimpl.device.
"""
from __future__ import annotations

import contextlib

from .. import api, functional
from ..device import runtime
from .forward import FastRuntime

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


def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight=None, bias=None,
                               output_mask=(True, True, True)):
    with _fast():
        return api.native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
                                              output_mask)


def fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight=None, output_mask=(True, True)):
    with _fast():
        return api.fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Differentiable: autograd's backward runs later under the runtime of this forward (autograd.py)."""
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
