"""Public API: aten's contracts on torch CUDA tensors, computed by the mirror.

    native_layer_norm(input, normalized_shape, weight, bias, eps) -> (out, mean, rstd)
    fused_rms_norm(input, normalized_shape, weight, eps)           -> (out, rstd)
    native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
                               output_mask)                       -> (dX, dgamma, dbeta)
    fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask)
                                                                   -> (dX, dweight)

torch.nn.functional's differentiable layer_norm / rms_norm are in reimpl/functional.py.

What the dispatcher does before upstream's code runs (device checks, the device guard) is done here.
Kernels run on torch's current stream; nothing here synchronizes with the host or copies data.
"""
from __future__ import annotations

import contextlib

import torch

from .layer_norm_checks import TorchCheckError
from .layer_norm_kernel import (_fused_rms_norm_backward_cuda, _fused_rms_norm_cuda, layer_norm_backward_cuda,
                                layer_norm_cuda)


def _as_shape(normalized_shape) -> tuple[int, ...]:
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(normalized_shape)


def _check_devices(method: str, **tensors) -> None:
    """The dispatcher's common-device check, then our own: this mirror runs on CUDA only."""
    common = None
    for name, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"reimpl.{method}(): argument '{name}' must be a Tensor, not {type(t).__name__}")
        if common is None:
            common, first = t.device, name
        elif t.device != common:
            raise TorchCheckError(
                f"Expected all tensors to be on the same device, but got {name} is on {t.device}, "
                f"different from other tensors on {common} (when checking argument in method "
                f"wrapper_CUDA__{method})")
    if common.type != "cuda":
        raise TorchCheckError(f"reimpl.{method}(): expected CUDA tensors, but got {first} on {common} "
                              "(this repository mirrors torch's CUDA kernels only)")


def _guard(device: torch.device):
    """The dispatcher's DeviceGuard: run on the input's GPU (a no-op when it is already current)."""
    if device.index is None or device.index == torch._C._cuda_getDevice():
        return contextlib.nullcontext()
    return torch.cuda.device(device.index)


def native_layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """torch.ops.aten.native_layer_norm: returns (out, mean, rstd); mean/rstd keep the leading dims."""
    _check_devices("native_layer_norm", input=input, weight=weight, bias=bias)
    with _guard(input.device):
        return layer_norm_cuda(input, _as_shape(normalized_shape), weight, bias, float(eps))


def fused_rms_norm(input, normalized_shape, weight=None, eps: float | None = None):
    """torch.ops.aten._fused_rms_norm: returns (out, rstd)."""
    _check_devices("_fused_rms_norm", input=input, weight=weight)
    with _guard(input.device):
        return _fused_rms_norm_cuda(input, _as_shape(normalized_shape), weight,
                                    None if eps is None else float(eps))


def _mask(output_mask, n: int) -> tuple[bool, ...]:
    mask = tuple(bool(m) for m in output_mask)
    if len(mask) != n:
        raise TypeError(f"output_mask must hold {n} bools, got {len(mask)}")
    return mask


def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight=None, bias=None,
                               output_mask=(True, True, True)):
    """torch.ops.aten.native_layer_norm_backward: (grad_input, grad_weight, grad_bias), None where
    output_mask is False."""
    _check_devices("native_layer_norm_backward", grad_out=grad_out, input=input, mean=mean, rstd=rstd,
                   weight=weight, bias=bias)
    with _guard(input.device):
        return layer_norm_backward_cuda(grad_out, input, _as_shape(normalized_shape), mean, rstd, weight, bias,
                                        _mask(output_mask, 3))


def fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight=None, output_mask=(True, True)):
    """torch.ops.aten._fused_rms_norm_backward: (grad_input, grad_weight), None where output_mask is False."""
    _check_devices("_fused_rms_norm_backward", grad_out=grad_out, input=input, rstd=rstd, weight=weight)
    with _guard(input.device):
        return _fused_rms_norm_backward_cuda(grad_out, input, _as_shape(normalized_shape), rstd, weight,
                                             _mask(output_mask, 2))
