"""Torch's bits, faster: LayerNorm/RMSNorm with torch 2.11's exact out, mean and rstd, and exact dX,
dgamma and dbeta, from kernels of ours where torch would launch its vectorized forward or grad-input
kernel (dgamma and dbeta in the same pass where backward.py's plan takes it, else from the chains
kernel in place of torch's GammaBeta launch where it takes that), and from the mirror
everywhere else, so the result is torch's in every case.

This package is two layers. Its submodules are the kernel provider, beside the mirror: the CUDA
(cuda/), the forward and dX kernels with their launch plans (forward.py, grad_input.py), the routes for
dgamma and dbeta (backward.py), and FastRuntime (runtime.py), which the mirror's host
dispatch launches through. This file is the
public face: the public API with `kernels="fast"`, loaded on first use.

    native_layer_norm, fused_rms_norm      aten's forward contracts (as reimpl's)
    native_layer_norm_backward,            aten's backward contracts (as reimpl's)
      fused_rms_norm_backward
    layer_norm, rms_norm                   torch.nn.functional's, differentiable: the backward runs
                                           the fast dX kernel too
    use_fast(module)                       make reimpl.nn.LayerNorm / RMSNorm modules in `module` use it
    in_torch()                             context manager: torch's own norms run these kernels, under
                                           torch's C++ autograd (reimpl/aten_kernels.py)
    fast_runtime()                         the provider's runtime

Layer: public. May import: fast, mirror, device.
Submodules' layer: fast. May import: mirror, device.
"""
from __future__ import annotations


def native_layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    from .. import api
    return api.native_layer_norm(input, normalized_shape, weight, bias, eps, kernels="fast")


def fused_rms_norm(input, normalized_shape, weight=None, eps: float | None = None):
    from .. import api
    return api.fused_rms_norm(input, normalized_shape, weight, eps, kernels="fast")


def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight=None, bias=None,
                               output_mask=(True, True, True)):
    from .. import api
    return api.native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
                                          output_mask, kernels="fast")


def fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight=None, output_mask=(True, True)):
    from .. import api
    return api.fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask, kernels="fast")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    from .. import functional
    return functional.layer_norm(input, normalized_shape, weight, bias, eps, kernels="fast")


def rms_norm(input, normalized_shape, weight=None, eps: float | None = None):
    from .. import functional
    return functional.rms_norm(input, normalized_shape, weight, eps, kernels="fast")


def use_fast(module):
    """Point every reimpl.nn.LayerNorm / RMSNorm inside `module` (itself included) at the fast
    kernels; returns `module`."""
    from .. import nn
    for m in module.modules():
        if isinstance(m, (nn.LayerNorm, nn.RMSNorm)):
            m.kernels = "fast"
    return module


def in_torch():
    """reimpl.in_torch("fast"): inside the block, torch's own LayerNorm and RMSNorm run these kernels."""
    from ..aten_kernels import in_torch
    return in_torch("fast")


def fast_runtime():
    from .runtime import fast_runtime
    return fast_runtime()
