"""Autograd for the mirror: torch.autograd.Functions whose forward and backward are our kernels,
wired as torch's derivatives.yaml wires aten's: native_layer_norm's backward is
native_layer_norm_backward(grad, input, normalized_shape, mean, rstd, weight, bias, mask), and
_fused_rms_norm's is _fused_rms_norm_backward(grad, input, normalized_shape, rstd, weight, mask),
with mask[i] = "input i needs a gradient". The forward is handed its runtime explicitly (the one
reimpl.api.runtime_for chose: the mirror's, or reimpl.fast's) and the backward runs under that same
runtime, in whichever thread autograd calls it. Not twice differentiable: torch's
double backward of LayerNorm is a composite of other ops, which this repository does not mirror.
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from . import api


def needs_grad(input, weight, bias=None) -> bool:
    return torch.is_grad_enabled() and (input.requires_grad or (weight is not None and weight.requires_grad)
                                        or (bias is not None and bias.requires_grad))


class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, normalized_shape, weight, bias, eps, rt):
        out, mean, rstd = api._native_layer_norm(input, normalized_shape, weight, bias, eps, rt=rt)  # after autocast
        ctx.normalized_shape, ctx.runtime = normalized_shape, rt
        ctx.save_for_backward(input, weight, bias, mean, rstd)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        input, weight, bias, mean, rstd = ctx.saved_tensors
        mask = (ctx.needs_input_grad[0], ctx.needs_input_grad[2], ctx.needs_input_grad[3])
        dX, dgamma, dbeta = api.native_layer_norm_backward(grad_out, input, ctx.normalized_shape, mean, rstd,
                                                          weight, bias, mask, rt=ctx.runtime)
        return dX, None, dgamma, dbeta, None, None


class RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, normalized_shape, weight, eps, rt):
        out, rstd = api._fused_rms_norm(input, normalized_shape, weight, eps, rt=rt)
        ctx.normalized_shape, ctx.runtime = normalized_shape, rt
        ctx.save_for_backward(input, weight, rstd)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        input, weight, rstd = ctx.saved_tensors
        mask = (ctx.needs_input_grad[0], ctx.needs_input_grad[2])
        dX, dgamma = api.fused_rms_norm_backward(grad_out, input, ctx.normalized_shape, rstd, weight, mask,
                                                 rt=ctx.runtime)
        return dX, None, dgamma, None, None
