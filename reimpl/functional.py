"""torch.nn.functional's layer_norm and rms_norm on our kernels, with what torch does around its
kernels: autocast, aten::rms_norm's choice between the fused kernel and a composite, autograd.

In eager mode a call goes straight to reimpl/api.py (differentiable through reimpl/autograd.py when
an argument requires grad). While torch.compile or torch.export traces, the same call goes through
the registered ops of reimpl/ops.py instead, which the tracer can see (fake implementations,
autograd and autocast registered through torch.library). Both routes run the same kernels and the
same casts, so they give the same bits; the direct one is cheaper on the host.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch

from . import autograd as _autograd
from . import ops
from .api import (_UNKNOWN, _as_shape, _check_devices, _fused_rms_norm, _native_layer_norm, autocast_fp32,
                  check_kernels, rms_norm_signature, runtime_for)
from .device import native as _native
from .mirror.input_checks import _check_rms_norm_inputs_symint

_is_compiling = torch.compiler.is_compiling
_is_autocast_enabled = torch.is_autocast_enabled
_is_grad_enabled = torch.is_grad_enabled


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5, *, kernels: str = "mirror"):
    """torch.nn.functional.layer_norm; differentiable when an argument requires grad.
    aten::layer_norm has an AutocastCUDA kernel of the fp32 kind: under autocast, floating CUDA
    arguments run as float32 and the output is float32, as in torch. `kernels`: "mirror" or "fast"
    (reimpl/api.py), for the forward and its backward."""
    if _is_compiling():
        return ops.native_layer_norm(input, _as_shape(normalized_shape), weight, bias, float(eps), kernels)[0]
    rt = runtime_for(kernels)
    if _is_autocast_enabled("cuda"):
        input, weight, bias = autocast_fp32(input, weight, bias)
    if _autograd.needs_grad(input, weight, bias):
        return _autograd.layer_norm(input, _as_shape(normalized_shape), weight, bias, float(eps), rt)
    return _native_layer_norm(input, normalized_shape, weight, bias, eps, keep=1, rt=rt)[0]  # mean, rstd unseen


# --8<-- [start:rms_norm_composite]
# mirrors: aten/src/ATen/native/layer_norm.cpp, rms_norm_composite (torch 2.11.0)
# docs: upstream/layer_norm.md#rms_norm_composite
# No line range: the .cpp is not in the wheel and its text at the pin was not available (see reference/).
def _rms_norm_composite(input, normalized_shape, weight, eps):
    """torch's RMSNorm from elementwise ops and a mean, in its op order: (result, rsqrt of the mean
    square). Each op is torch's own kernel, so the bits (and autograd's gradients) are torch's."""
    dims_to_reduce = [input.dim() - i - 1 for i in range(len(normalized_shape))]
    # upcast is needed for fp16 and bf16: toOpMathType
    opmath_t = {torch.float16: torch.float32, torch.bfloat16: torch.float32}.get(input.dtype, input.dtype)
    upcasted_input = input.to(opmath_t)
    if opmath_t in (torch.float32, torch.complex64):
        # a C++ float: eps (or float's machine epsilon) rounded to float before the add
        eps_val = float(np.float32(eps if eps is not None else np.finfo(np.float32).eps))
    else:
        eps_val = eps if eps is not None else float(np.finfo(np.float64).eps)
    rqrst_input = torch.rsqrt(torch.pow(upcasted_input, 2).mean(dims_to_reduce, keepdim=True).add_(eps_val))
    upcasted_result = upcasted_input.mul(rqrst_input)
    if weight is not None:
        upcasted_result = upcasted_result.mul(weight)
    if not _channels_last(input):  # channels-last results keep their layout
        upcasted_result, rqrst_input = upcasted_result.contiguous(), rqrst_input.contiguous()
    return upcasted_result.type_as(input), rqrst_input
# --8<-- [end:rms_norm_composite]


_warned_mixed_dtype = False


# --8<-- [start:rms_norm_symint]
# mirrors: aten/src/ATen/native/layer_norm.cpp, rms_norm_symint (torch 2.11.0)
# docs: upstream/layer_norm.md#rms_norm_symint
# No line range (as above); torch's own warning location puts the dtype check at layer_norm.cpp:344.
def rms_norm(input, normalized_shape, weight=None, eps: float | None = None, *, kernels: str = "mirror"):
    """torch.nn.functional.rms_norm (aten::rms_norm, which has no autocast kernel in torch 2.11).
    Channels-last and complex inputs, and a weight whose dtype differs from the input's, take the
    composite; everything else the fused kernel (ours: `kernels` "mirror" or "fast", reimpl/api.py)."""
    global _warned_mixed_dtype
    check_kernels(kernels)
    normalized_shape = _as_shape(normalized_shape)
    eps = None if eps is None else float(eps)  # the binding's optional double; also the plan key's
    # the C++ replay serves calls that record a graph; asked only for those, since asking costs a
    # call into it (a non-tensor argument has no requires_grad: the checks below raise torch's error)
    if _is_grad_enabled() and (getattr(input, "requires_grad", False) or getattr(weight, "requires_grad", False)) \
            and not _is_compiling():
        out = _autograd.native_call(_native.RMS_NORM, runtime_for(kernels), (input, weight), normalized_shape, eps)
        if out is not None:
            return out
    route, found = _route_key(input, normalized_shape, weight, eps)
    if route is not None and route in _FUSED_ROUTES:  # checked before, and fused: go straight there
        return _fused(input, normalized_shape, weight, eps, kernels, found)
    _check_devices("_fused_rms_norm", input=input, weight=weight)  # the dispatcher's, before the op
    _check_rms_norm_inputs_symint(input, normalized_shape, weight)

    if _channels_last(input):
        return _rms_norm_composite(input, normalized_shape, weight, eps)[0]  # composite fallback for channels last

    if input.is_complex():
        return _rms_norm_composite(input, normalized_shape, weight, eps)[0]

    if weight is not None and weight.dtype != input.dtype:
        if not _warned_mixed_dtype and not _is_compiling():  # TORCH_WARN_ONCE
            _warned_mixed_dtype = True
            warnings.warn(f"Mismatch dtype between input and weight: input dtype = {_type_meta(input.dtype)}, "
                          f"weight dtype = {_type_meta(weight.dtype)}, Cannot dispatch to fused implementation.")
        return _rms_norm_composite(input, normalized_shape, weight, eps)[0]

    if route is not None:
        if len(_FUSED_ROUTES) >= 4096:
            _FUSED_ROUTES.clear()
        _FUSED_ROUTES.add(route)
    return _fused(input, normalized_shape, weight, eps, kernels, found)
# --8<-- [end:rms_norm_symint]


# Signatures whose checks passed and that took the fused kernel: the launch-plan key (shapes,
# dtypes, devices, contiguity, alignment; complex is a dtype) and the input's strides, everything
# rms_norm_symint's checks and its choice of path read, so a repeated call skips them and its key
# serves the plan as well. Differs from upstream, which checks every call.
_FUSED_ROUTES: set = set()


def _route_key(input, normalized_shape, weight, eps):
    """(route key or None, api.rms_norm_signature's answer or the unknown marker for the full path)."""
    if _is_compiling():  # symbolic sizes are not keys; tracing happens once anyway
        return None, _UNKNOWN
    found = rms_norm_signature(input, normalized_shape, weight, eps)
    if found is None:  # not plain tensors on the current device: the full path says why, or runs unplanned
        return None, None
    try:
        return (found[0], input.stride(), input.layout), found
    except (AttributeError, TypeError, RuntimeError):  # not a strided tensor: the full path says why
        return None, None


def _fused(input, normalized_shape, weight, eps, kernels, found=_UNKNOWN):
    """aten::rms_norm's fused path: _fused_rms_norm's out, with autograd where it is needed."""
    if _is_compiling():
        return ops.fused_rms_norm(input, normalized_shape, weight, eps, kernels)[0]
    rt = runtime_for(kernels)
    if _autograd.needs_grad(input, weight):
        return _autograd.rms_norm(input, normalized_shape, weight, eps, rt, found)
    return _fused_rms_norm(input, normalized_shape, weight, eps, keep=1, rt=rt, found=found)[0]


def _channels_last(t) -> bool:
    """Tensor::suggest_memory_format() is ChannelsLast or ChannelsLast3d: a 4-D or 5-D strided tensor
    whose strides order its dims like NHWC (NDHWC), by c10's is_channels_last_strides_2d/_3d."""
    if t.dim() not in (4, 5) or t.layout != torch.strided:
        return False
    sizes, strides = t.shape, t.stride()
    if strides[1] == 0:  # a trivial C dimension: NCHW by default
        return False
    smallest = 0
    for d in ((1, 3, 2, 0) if t.dim() == 4 else (1, 4, 3, 2, 0)):
        if sizes[d] == 0 or strides[d] < smallest:
            return False
        if d == 0 and smallest == strides[1]:  # ambiguous (N111-like): NCHW by default
            return False
        smallest = strides[d] * sizes[d] if sizes[d] > 1 else strides[d]
    return True


def _type_meta(dtype: torch.dtype) -> str:
    """How c10's TypeMeta prints a dtype in torch's messages."""
    return {torch.float32: "float", torch.float64: "double", torch.float16: "c10::Half",
            torch.bfloat16: "c10::BFloat16", torch.complex64: "c10::complex<float>",
            torch.complex128: "c10::complex<double>"}.get(dtype, str(dtype).removeprefix("torch."))
