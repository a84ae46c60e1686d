"""Autograd for the mirror: torch.autograd.Functions whose forward and backward are our kernels,
wired as torch's derivatives.yaml wires aten's: native_layer_norm's backward is
native_layer_norm_backward(grad, input, normalized_shape, mean, rstd, weight, bias, mask), and
_fused_rms_norm's is _fused_rms_norm_backward(grad, input, normalized_shape, rstd, weight, mask),
with mask[i] = "input i needs a gradient". The forward is handed its runtime explicitly (the one
reimpl.api.runtime_for chose: the mirror's, or reimpl.fast's) and the backward runs under that same
runtime, in whichever thread autograd calls it. Not twice differentiable: torch's
double backward of LayerNorm is a composite of other ops, which this repository does not mirror.

Host cost: torch's own norms have C++ autograd nodes; ours are Python ones, so every Python step
between the user's call and the kernels is paid twice per training step. `apply` goes straight to
the C++ Function machinery where functorch transforms are off (torch.autograd.Function.apply maps
over the arguments first, for those transforms), and the backward skips `once_differentiable`'s
no_grad block unless a graph of the backward is being built, where it keeps that decorator's error.
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from . import api

_transforms_active = torch._C._are_functorch_transforms_active


def needs_grad(input, weight, bias=None) -> bool:
    return torch.is_grad_enabled() and (input.requires_grad or (weight is not None and weight.requires_grad)
                                        or (bias is not None and bias.requires_grad))


def _direct_apply(cls):
    """cls.apply without torch.autograd.Function.apply's Python step (what it calls once that step is
    done), falling back to it while functorch transforms are active."""
    direct = torch._C._FunctionBase.__dict__["apply"].__get__(None, cls)
    full = cls.apply

    def apply(*args):
        return full(*args) if _transforms_active() else direct(*args)
    return apply


def _once(backward):
    """`backward` as a Function's backward: as is when autograd runs it without building a graph
    (grad mode is off there), under once_differentiable when create_graph asks for one."""
    guarded = once_differentiable(backward)

    def run(ctx, grad_out):
        return guarded(ctx, grad_out) if torch.is_grad_enabled() else backward(ctx, grad_out)
    return staticmethod(run)


def _layer_norm_backward(ctx, grad_out):
    input, weight, bias = ctx.saved_tensors
    needs = ctx.needs_input_grad
    dX, dgamma, dbeta = api._native_layer_norm_backward(grad_out, input, ctx.normalized_shape, *ctx.stats, weight,
                                                       bias, (needs[0], needs[2], needs[3]), ctx.runtime)
    return dX, None, dgamma, dbeta, None, None


# mean and rstd are kept on ctx rather than saved: no one else holds them, so nothing can change
# them in place, and a saved tensor costs a pack in the forward and an unpack in the backward
class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, normalized_shape, weight, bias, eps, rt):
        out, mean, rstd = api._native_layer_norm(input, normalized_shape, weight, bias, eps, rt=rt)  # after autocast
        ctx.normalized_shape, ctx.runtime, ctx.stats = normalized_shape, rt, (mean, rstd)
        ctx.save_for_backward(input, weight, bias)
        return out

    backward = _once(_layer_norm_backward)


def _rms_norm_backward(ctx, grad_out):
    input, weight = ctx.saved_tensors
    needs = ctx.needs_input_grad
    dX, dgamma = api._fused_rms_norm_backward(grad_out, input, ctx.normalized_shape, ctx.rstd, weight,
                                              (needs[0], needs[2]), ctx.runtime)
    return dX, None, dgamma, None, None


class RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, normalized_shape, weight, eps, rt):
        out, rstd = api._fused_rms_norm(input, normalized_shape, weight, eps, rt=rt)
        ctx.normalized_shape, ctx.runtime, ctx.rstd = normalized_shape, rt, rstd  # as LayerNorm's stats
        ctx.save_for_backward(input, weight)
        return out

    backward = _once(_rms_norm_backward)


layer_norm = _direct_apply(LayerNormFunction)  # LayerNormFunction.apply(input, shape, weight, bias, eps, rt)
rms_norm = _direct_apply(RMSNormFunction)      # RMSNormFunction.apply(input, shape, weight, eps, rt)
