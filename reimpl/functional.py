"""torch.nn.functional's layer_norm and rms_norm on our kernels: differentiable when an argument
requires grad (reimpl/autograd.py), otherwise one call of the aten-level API (reimpl/api.py).
rms_norm first runs aten::rms_norm's own checks and its choice between the fused kernel and a composite.
"""
from __future__ import annotations

from . import autograd as _autograd
from .api import _as_shape, _check_devices, fused_rms_norm, native_layer_norm
from .layer_norm_checks import _check_rms_norm_inputs_symint


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """torch.nn.functional.layer_norm; differentiable when an argument requires grad."""
    if _autograd.needs_grad(input, weight, bias):
        return _autograd.LayerNormFunction.apply(input, _as_shape(normalized_shape), weight, bias, float(eps))
    return native_layer_norm(input, normalized_shape, weight, bias, eps)[0]


class FusedRmsNormUnavailable(NotImplementedError):
    """aten::rms_norm would not call the fused kernel here (torch runs its composite instead)."""


def rms_norm(input, normalized_shape, weight=None, eps: float | None = None):
    """torch.nn.functional.rms_norm. On CUDA, aten::rms_norm calls _fused_rms_norm unless input and
    weight dtypes differ; then torch computes a composite of elementwise ops, which we do not mirror."""
    normalized_shape = _as_shape(normalized_shape)
    _check_devices("_fused_rms_norm", input=input, weight=weight)
    _check_rms_norm_inputs_symint(input, normalized_shape, weight)
    if weight is not None and weight.dtype != input.dtype:
        raise FusedRmsNormUnavailable(
            f"reimpl.rms_norm: input dtype {input.dtype} and weight dtype {weight.dtype} differ; torch does not "
            "use its fused CUDA kernel for this (it warns and runs a composite), and this repository mirrors "
            "only the fused kernel")
    if _autograd.needs_grad(input, weight):
        return _autograd.RMSNormFunction.apply(input, normalized_shape, weight, None if eps is None else float(eps))
    return fused_rms_norm(input, normalized_shape, weight, eps)[0]
