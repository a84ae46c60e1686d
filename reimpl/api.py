"""Public API: aten's contracts on torch CUDA tensors, computed by the mirror.

    native_layer_norm(input, normalized_shape, weight, bias, eps) -> (out, mean, rstd)
    fused_rms_norm(input, normalized_shape, weight, eps)           -> (out, rstd)
    native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
                               output_mask)                       -> (dX, dgamma, dbeta)
    fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask)
                                                                   -> (dX, dweight)

torch.nn.functional's differentiable layer_norm / rms_norm are in reimpl/functional.py.

What the dispatcher does before upstream's code runs is done here: autocast (aten::native_layer_norm
has an AutocastCUDA kernel of the fp32 kind; the other three have none), the device checks and the
device guard. Kernels run on torch's current stream; nothing here synchronizes with the host or
copies data.

Which kernels: every entry point takes `kernels="mirror"` (torch's, mirrored) or `kernels="fast"`
(reimpl.fast's, with torch's bits). Either way the mirror's host dispatch decides the path; "fast"
runs it under reimpl.fast's runtime, which swaps in its own kernels where torch launches a
vectorized one. "mirror" runs it under the runtime of the calling context (reimpl.device.runtime:
the real one by default, a recording one in the CPU tests).

Host cost: each entry point keys its call by everything the host mirror's decisions depend on and
replays the launches of the first call with that key (reimpl/device/replay.py), so a repeated
signature skips the mirror's Python; the first call of each signature runs it in full.
"""
from __future__ import annotations

import contextlib
import math

import torch

from .device import replay, runtime
from .fast.runtime import fast_runtime
from .mirror.input_checks import TorchCheckError
from .mirror.layer_norm_kernel import (_fused_rms_norm_backward_cuda, _fused_rms_norm_cuda, layer_norm_backward_cuda,
                                layer_norm_cuda)

_get_device = getattr(torch._C, "_cuda_getDevice", None)  # absent from CPU-only builds
USE_PLANS = True  # False: every call runs the host mirror in full (the host benchmark measures both)
_is_autocast_enabled = torch.is_autocast_enabled


def autocast_fp32(*tensors):
    """What an AutocastCUDA kernel of the fp32 kind does to its tensor arguments before the op runs
    (aten/src/ATen/autocast_mode.h, cached_cast to kFloat): floating CUDA tensors other than float64
    become float32; anything else passes unchanged. The cast is differentiable (its gradient is a
    cast back), as torch's is."""
    return tuple(t.to(torch.float32) if (isinstance(t, torch.Tensor) and t.is_cuda and t.is_floating_point()
                                         and t.dtype is not torch.float64 and t.dtype is not torch.float32)
                 else t for t in tensors)


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


def _eps_key(eps):
    """eps as a plan key: -0.0 == 0.0 in Python, so a zero keeps its sign beside it (eps is a launch
    argument, and the plan replays the first call's)."""
    return (eps, math.copysign(1.0, eps)) if eps == 0 else eps


KERNELS = ("mirror", "fast")


def check_kernels(kernels) -> None:
    if kernels not in KERNELS:
        raise ValueError(f"kernels must be one of {KERNELS}, not {kernels!r}")


def runtime_for(kernels: str):
    """The runtime whose launches give `kernels`' results (see the module docstring)."""
    if kernels == "fast":
        return fast_runtime()
    if kernels == "mirror":
        return runtime.get()
    check_kernels(kernels)


def signature(method, tensors, extra, device_of: int = 0):
    """(key, ptrs): the launch-plan key of a call of `method` on `tensors` (in the aten schema's order;
    `device_of` indexes the one whose device the call runs on) with the scalar arguments `extra`,
    and the tensors' addresses (0 for None); or None where the call must take the full path (an
    argument that is not a tensor, a tensor off the current device, plans switched off)."""
    ptrs, parts = [], [method]
    try:
        for t in tensors:  # one loop, not two comprehensions: this runs on every call
            if t is None:
                ptrs.append(0)
                parts.append(None)
            else:
                p = t.data_ptr()
                ptrs.append(p)
                # what the host mirror's decisions read of each tensor: shape, dtype, device,
                # contiguity and the low bits of its address (the vectorized paths test 16-byte alignment)
                parts.append((t.shape, t.dtype, t.get_device(), t.is_contiguous(), p & 63))
        key = (*parts, *extra)
        device = tensors[device_of].get_device()
    except (AttributeError, TypeError):  # not a tensor: the full path raises torch's error
        return None
    if device < 0 or device != _get_device() or not USE_PLANS:  # the full path checks and guards
        return None
    return key, ptrs


_UNKNOWN = object()


def _plan_call(method, names, tensors, extra, mirror, keep=None, rt=None, found=_UNKNOWN):
    """The mirror call `mirror()` of `tensors` (named `names`, in the aten schema's order) under the
    runtime `rt`, replayed from a launch plan when this signature has one. The checks run on a
    signature's first call only: the key holds every tensor's device, so a later call with the key
    would pass them too. `found`: `signature`'s answer, where the caller has it."""
    if rt is None:
        rt = runtime.get()
    if found is _UNKNOWN:
        found = signature(method, tensors, extra, names.index("input"))
    if found is None:
        _check_devices(method, **dict(zip(names, tensors)))
        with _guard(tensors[names.index("input")].device), runtime.use(rt):
            return mirror()
    key, ptrs = found
    plan = rt.plans.get(key)
    if plan is not None:  # the common case, looked up once
        return plan.replay(rt, ptrs, keep, tensors)
    if key not in rt.plans:
        _check_devices(method, **dict(zip(names, tensors)))
    return replay.call(rt, key, tensors, mirror, ptrs, keep)


def native_layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5, *,
                      kernels: str = "mirror"):
    """torch.ops.aten.native_layer_norm: returns (out, mean, rstd); mean/rstd keep the leading dims."""
    if _is_autocast_enabled("cuda"):
        input, weight, bias = autocast_fp32(input, weight, bias)
    return _native_layer_norm(input, normalized_shape, weight, bias, eps, rt=runtime_for(kernels))


def _native_layer_norm(input, normalized_shape, weight, bias, eps, keep=None, rt=None):
    """native_layer_norm after autocast, under runtime `rt` (None: the context's). keep=1: the caller
    drops mean and rstd (reimpl/device/replay.py)."""
    shape, eps = _as_shape(normalized_shape), float(eps)
    return _plan_call("native_layer_norm", ("input", "weight", "bias"), (input, weight, bias),
                      (shape, _eps_key(eps)),
                      lambda: layer_norm_cuda(input, shape, weight, bias, eps), keep, rt)


def fused_rms_norm(input, normalized_shape, weight=None, eps: float | None = None, *, kernels: str = "mirror"):
    """torch.ops.aten._fused_rms_norm: returns (out, rstd)."""
    return _fused_rms_norm(input, normalized_shape, weight, eps, rt=runtime_for(kernels))


def _fused_rms_norm(input, normalized_shape, weight, eps, keep=None, rt=None, found=_UNKNOWN):
    """fused_rms_norm under runtime `rt` (None: the context's); keep: as _native_layer_norm's;
    found: `signature`'s answer for it, where the caller has it (rms_norm_signature)."""
    shape, eps = _as_shape(normalized_shape), None if eps is None else float(eps)
    return _plan_call("_fused_rms_norm", ("input", "weight"), (input, weight), (shape, _eps_key(eps)),
                      lambda: _fused_rms_norm_cuda(input, shape, weight, eps), keep, rt, found)


def rms_norm_signature(input, shape: tuple, weight, eps):
    """`signature` of a _fused_rms_norm call (eps already a float or None)."""
    return signature("_fused_rms_norm", (input, weight), (shape, _eps_key(eps)))


def _mask(output_mask, n: int) -> tuple[bool, ...]:
    mask = tuple(bool(m) for m in output_mask)
    if len(mask) != n:
        raise TypeError(f"output_mask must hold {n} bools, got {len(mask)}")
    return mask


def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight=None, bias=None,
                               output_mask=(True, True, True), *, kernels: str = "mirror", rt=None):
    """torch.ops.aten.native_layer_norm_backward: (grad_input, grad_weight, grad_bias), None where
    output_mask is False. (rt: a runtime object instead of `kernels`, as autograd passes the forward's.)"""
    return _native_layer_norm_backward(grad_out, input, _as_shape(normalized_shape), mean, rstd, weight, bias,
                                       _mask(output_mask, 3), rt or runtime_for(kernels))


_LN_BACKWARD_NAMES = ("grad_out", "input", "mean", "rstd", "weight", "bias")


def _native_layer_norm_backward(grad_out, input, shape: tuple, mean, rstd, weight, bias, mask: tuple, rt):
    """native_layer_norm_backward with the shape and mask already tuples (autograd's call)."""
    return _plan_call("native_layer_norm_backward", _LN_BACKWARD_NAMES, (grad_out, input, mean, rstd, weight, bias),
                      (shape, mask),
                      lambda: layer_norm_backward_cuda(grad_out, input, shape, mean, rstd, weight, bias, mask), rt=rt)


def fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight=None, output_mask=(True, True), *,
                            kernels: str = "mirror", rt=None):
    """torch.ops.aten._fused_rms_norm_backward: (grad_input, grad_weight), None where output_mask is
    False. (rt: as native_layer_norm_backward's.)"""
    return _fused_rms_norm_backward(grad_out, input, _as_shape(normalized_shape), rstd, weight, _mask(output_mask, 2),
                                    rt or runtime_for(kernels))


def _fused_rms_norm_backward(grad_out, input, shape: tuple, rstd, weight, mask: tuple, rt):
    """fused_rms_norm_backward with the shape and mask already tuples (autograd's call)."""
    return _plan_call("_fused_rms_norm_backward", ("grad_out", "input", "rstd", "weight"), (grad_out, input, rstd, weight),
                      (shape, mask), lambda: _fused_rms_norm_backward_cuda(grad_out, input, shape, rstd, weight, mask),
                      rt=rt)
