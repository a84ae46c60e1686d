"""Our four aten-level entry points as torch.library custom ops, so torch.compile and torch.export
can put them in a graph:

    torch.ops.reimpl.native_layer_norm(input, normalized_shape, weight?, bias?, eps, kernels) -> (out, mean, rstd)
    torch.ops.reimpl.native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?,
                                                bias?, output_mask, kernels) -> (dX?, dgamma?, dbeta?)
    torch.ops.reimpl.fused_rms_norm(input, normalized_shape, weight?, eps?, kernels) -> (out, rstd)
    torch.ops.reimpl.fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight?,
                                             output_mask, kernels) -> (dX?, dweight?)

The schemas are aten's, except that the backward ops return `Tensor?` where aten returns an
undefined Tensor (Python sees None in both), and that each takes a last argument `kernels`
("mirror", the default, or "fast"; reimpl/api.py), which a forward hands on to its backward, so a
compiled graph runs the kernels it was traced with in both passes. Each op runs reimpl/api.py on real tensors; its fake implementation gives
the shapes, dtypes and strides that the CUDA kernels' host code allocates (contiguous outputs, the
statistics in the accumulate type with the normalized dims kept as 1), after the same shape checks.
Autograd is registered as torch's derivatives.yaml wires aten's ops (forward -> its backward op, mask
= which inputs need a gradient), and autocast as aten's AutocastCUDA table has it: native_layer_norm
runs in float32, the RMSNorm ops have no autocast rule. Importing this module registers the ops.
"""
from __future__ import annotations

import torch

from . import api
from .mirror.aten_shim import toAccumulateType
from .mirror.input_checks import _check_layer_norm_inputs
from .mirror.layer_norm_kernel import _stat_shape

_SCHEMAS = {
    "native_layer_norm": "(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps,"
                         " str kernels=\"mirror\") -> (Tensor, Tensor, Tensor)",
    "native_layer_norm_backward": "(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean,"
                                  " Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask,"
                                  " str kernels=\"mirror\") -> (Tensor?, Tensor?, Tensor?)",
    "fused_rms_norm": "(Tensor input, SymInt[] normalized_shape, Tensor? weight, float? eps,"
                      " str kernels=\"mirror\") -> (Tensor, Tensor)",
    "fused_rms_norm_backward": "(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor rstd,"
                               " Tensor? weight, bool[2] output_mask, str kernels=\"mirror\") -> (Tensor?, Tensor?)",
}


def _op(name, impl):
    return torch.library.custom_op(f"reimpl::{name}", impl, mutates_args=(), schema=_SCHEMAS[name])


# (native_layer_norm's op calls the post-autocast entry: its autocast rule is registered below, at the
# dispatcher, as aten's is)
native_layer_norm = _op("native_layer_norm", lambda input, normalized_shape, weight, bias, eps, kernels="mirror":
                        api._native_layer_norm(input, normalized_shape, weight, bias, eps,
                                               rt=api.runtime_for(kernels)))
native_layer_norm_backward = _op(
    "native_layer_norm_backward",
    lambda grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask, kernels="mirror":
    api.native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask,
                                   kernels=kernels))
fused_rms_norm = _op("fused_rms_norm", lambda input, normalized_shape, weight, eps, kernels="mirror":
                     api.fused_rms_norm(input, normalized_shape, weight, eps, kernels=kernels))
fused_rms_norm_backward = _op(
    "fused_rms_norm_backward",
    lambda grad_out, input, normalized_shape, rstd, weight, output_mask, kernels="mirror":
    api.fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask, kernels=kernels))


# Fake implementations: what layer_norm_cuda and friends allocate, on tensors without data.

def _like(t):
    return torch.empty_like(t, memory_format=torch.contiguous_format)


def _stat(input, normalized_shape):
    return input.new_empty(_stat_shape(input, normalized_shape), dtype=toAccumulateType(input.dtype))


@native_layer_norm.register_fake
def _(input, normalized_shape, weight, bias, eps, kernels="mirror"):
    _check_layer_norm_inputs(input, normalized_shape, weight, bias)
    return _like(input), _stat(input, normalized_shape), _stat(input, normalized_shape)


@fused_rms_norm.register_fake
def _(input, normalized_shape, weight, eps, kernels="mirror"):
    _check_layer_norm_inputs(input, normalized_shape, weight, weight)
    return _like(input), _stat(input, normalized_shape)


@native_layer_norm_backward.register_fake
def _(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask, kernels="mirror"):
    _check_layer_norm_inputs(input, normalized_shape, weight, bias)
    return (_like(input) if output_mask[0] else None, _like(weight) if output_mask[1] else None,
            _like(bias) if output_mask[2] else None)


@fused_rms_norm_backward.register_fake
def _(grad_out, input, normalized_shape, rstd, weight, output_mask, kernels="mirror"):
    _check_layer_norm_inputs(input, normalized_shape, weight, weight)
    return _like(input) if output_mask[0] else None, _like(weight) if output_mask[1] else None


# Autograd, as derivatives.yaml: only the first output carries a gradient.

def _ln_setup(ctx, inputs, output):
    input, normalized_shape, weight, bias, _eps, *kernels = inputs
    _out, mean, rstd = output
    ctx.mark_non_differentiable(mean, rstd)
    ctx.normalized_shape, ctx.kernels = normalized_shape, (kernels or ["mirror"])[0]
    ctx.save_for_backward(input, weight, bias, mean, rstd)


def _ln_backward(ctx, grad_out, _grad_mean, _grad_rstd):
    input, weight, bias, mean, rstd = ctx.saved_tensors
    mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[2], ctx.needs_input_grad[3]]
    dX, dgamma, dbeta = native_layer_norm_backward(grad_out, input, ctx.normalized_shape, mean, rstd,
                                                   weight, bias, mask, ctx.kernels)
    return dX, None, dgamma, dbeta, None, None


def _rms_setup(ctx, inputs, output):
    input, normalized_shape, weight, _eps, *kernels = inputs
    _out, rstd = output
    ctx.mark_non_differentiable(rstd)
    ctx.normalized_shape, ctx.kernels = normalized_shape, (kernels or ["mirror"])[0]
    ctx.save_for_backward(input, weight, rstd)


def _rms_backward(ctx, grad_out, _grad_rstd):
    input, weight, rstd = ctx.saved_tensors
    mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[2]]
    dX, dgamma = fused_rms_norm_backward(grad_out, input, ctx.normalized_shape, rstd, weight, mask, ctx.kernels)
    return dX, None, dgamma, None, None


native_layer_norm.register_autograd(_ln_backward, setup_context=_ln_setup)
fused_rms_norm.register_autograd(_rms_backward, setup_context=_rms_setup)
# aten::native_layer_norm's AutocastCUDA kernel is of the fp32 kind; aten::_fused_rms_norm has none
torch.library.register_autocast("reimpl::native_layer_norm", "cuda", torch.float32)
