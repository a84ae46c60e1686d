"""Autograd for the mirror: torch.autograd.Functions whose forward and backward are our kernels,
wired as torch's derivatives.yaml wires aten's: native_layer_norm's backward is
native_layer_norm_backward(grad, input, normalized_shape, mean, rstd, weight, bias, mask), and
_fused_rms_norm's is _fused_rms_norm_backward(grad, input, normalized_shape, rstd, weight, mask),
with mask[i] = "input i needs a gradient". The forward is handed its runtime explicitly (the one
reimpl.api.runtime_for chose: the mirror's, or reimpl.fast's) and the backward runs under that same
runtime, in whichever thread autograd calls it. Not twice differentiable: torch's
double backward of LayerNorm is a composite of other ops, which this repository does not mirror.

Host cost: torch's own norms have C++ autograd nodes; ours are Python ones, so every Python step
between the user's call and the kernels is paid twice per training step. So a call is keyed once,
by its forward's launch-plan key (reimpl/api.py), and every call with that key shares one
`_Signature`: after the first, the forward replays its plan's compiled launches directly, and the
backward replays the backward plan's, chosen by the few things about the incoming gradient and the
fresh statistics that the forward's key cannot know (contiguity, address alignment) and by which
inputs need a gradient. `apply` goes straight to the C++ Function machinery where functorch
transforms are off (torch.autograd.Function.apply maps over the arguments first, for those
transforms), and the backward skips `once_differentiable`'s no_grad block unless a graph of the
backward is being built, where it keeps that decorator's error.
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from . import api
from .device import native, replay

_transforms_active = torch._C._are_functorch_transforms_active


def needs_grad(input, weight, bias=None) -> bool:
    return torch.is_grad_enabled() and (input.requires_grad or (weight is not None and weight.requires_grad)
                                        or (bias is not None and bias.requires_grad))


def _direct(cls):
    """cls.apply without torch.autograd.Function.apply's Python step: what that step calls once it is
    done (it maps over the arguments first, for functorch transforms; callers take cls.apply
    while those are active)."""
    return torch._C._FunctionBase.__dict__["apply"].__get__(None, cls)


_SIGNATURE = "autograd"  # rt.plans holds each _Signature under (_SIGNATURE, the forward's plan key)


class _Op:
    """One differentiable op: its forward's and backward's aten names, and the api calls that run
    them in full, as functions of (signature, tensors) and (signature, tensors, mask)."""
    __slots__ = ("method", "backward_method", "full_forward", "full_backward")

    def __init__(self, method: str, backward_method: str, full_forward, full_backward):
        self.method, self.backward_method = method, backward_method
        self.full_forward, self.full_backward = full_forward, full_backward


class _Signature:
    """What the differentiable calls of one op with one forward plan key share: the normalized
    shape, eps and runtime, and once the first has kept launch plans, their replays: `forward`
    (None: the full path) and `backward`, one per (mask, incoming gradient's contiguity, each
    backward tensor's address alignment), False where that call keeps no plan. `stream` reads the
    current stream (after `adopt`, of the key's device, with no Python frame). `key`: the plan key,
    until `adopt`."""
    __slots__ = ("op", "shape", "eps", "rt", "forward", "backward", "stream", "key")

    def __init__(self, op: _Op, shape: tuple, eps, rt, key=None):
        self.op, self.shape, self.eps, self.rt, self.key = op, shape, eps, rt, key
        self.forward, self.backward, self.stream = None, {}, rt.getCurrentCUDAStream

    @staticmethod
    def of(op: _Op, tensors: tuple, shape: tuple, eps, rt, found=api._UNKNOWN):
        """(signature, addresses of `tensors`) of a differentiable call of `op`. The addresses are
        None where the call runs in full: api.signature's reasons (the signature is then a fresh
        one), and a signature's first call, whose plan `adopt` keeps afterwards. `found`:
        api.signature's answer, where the caller has it."""
        if found is api._UNKNOWN:
            found = api.signature(op.method, tensors, (shape, api._eps_key(eps)))
        if found is None:
            return _Signature(op, shape, eps, rt), None
        key, ptrs = found
        sig = rt.plans.get((_SIGNATURE, key))
        if sig is None:
            return _Signature(op, shape, eps, rt, key), None
        return sig, ptrs

    def adopt(self):
        """After a signature's first call (made on its key's device, the current one): keep its plan's
        replay (if it has a plan) and the signature. Returns the plan, or None."""
        key, self.key = self.key, None
        plan = self.rt.plans.get(key)
        if plan is not None:
            self.forward = plan.replayer(self.rt)
        self.stream = self.rt.stream_reader()
        if len(self.rt.plans) >= replay.MAX_PLANS:
            self.rt.plans.clear()
        self.rt.plans[(_SIGNATURE, key)] = self
        return plan

    def run_forward(self, ctx, inputs: tuple, ptrs):
        """The forward's output (the plan's replay where there is one, else the op's full call);
        ctx.stats: its statistics, for the backward."""
        replay_forward = self.forward
        if ptrs is None or replay_forward is None:
            out, *stats = self.op.full_forward(self, inputs)
        else:
            out, *stats = replay_forward(inputs, ptrs, self.stream())
        ctx.sig, ctx.stats = self, stats
        return out

    def run_backward(self, tensors: tuple, mask: tuple):
        """The backward op's outputs for `tensors` (its arguments in the aten schema's order, the
        incoming gradient first) and `mask`: its plan's replay where this signature has one for
        them, else the op's full backward call, whose plan, if it keeps one, is kept for the next."""
        ptrs = [0 if t is None else t.data_ptr() for t in tensors]
        case = (mask, tensors[0].is_contiguous(), *[p & 63 for p in ptrs])
        fn = self.backward.get(case)
        if fn:
            return fn(tensors, ptrs, self.stream())
        out = self.op.full_backward(self, tensors, mask)
        if fn is None:
            plan = self.backward_plan(tensors, mask)
            self.backward[case] = False if plan is None else plan.replayer(self.rt)
        return out

    def run_backward_under_graph(self, tensors: tuple, mask: tuple):
        """run_backward where a graph of the backward is asked for (the C++ node's create_graph case):
        under once_differentiable, as the Python node's (_once), so that differentiating it again
        raises torch's error."""
        return once_differentiable(lambda _ctx, *_grads: self.run_backward(tensors, mask))(None, tensors[0])

    def backward_plan(self, tensors: tuple, mask: tuple):
        """The launch plan the backward op's full call for these tensors and mask kept, or None."""
        found = api.signature(self.op.backward_method, tensors, (self.shape, mask), 1)
        return None if found is None else self.rt.plans.get(found[0])


def _once(backward):
    """`backward` as a Function's backward: as is when autograd runs it without building a graph
    (grad mode is off there), under once_differentiable when create_graph asks for one."""
    guarded = once_differentiable(backward)

    def run(ctx, grad_out):
        return guarded(ctx, grad_out) if torch.is_grad_enabled() else backward(ctx, grad_out)
    return staticmethod(run)


def _layer_norm_backward(ctx, grad_out):
    input, weight, bias = ctx.saved_tensors
    needs, (mean, rstd) = ctx.needs_input_grad, ctx.stats
    dX, dgamma, dbeta = ctx.sig.run_backward((grad_out, input, mean, rstd, weight, bias),
                                             (needs[0], needs[1], needs[2]))
    return dX, dgamma, dbeta, None, None


# mean and rstd are kept on ctx rather than saved: no one else holds them, so nothing can change
# them in place, and a saved tensor costs a pack in the forward and an unpack in the backward
class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, sig, ptrs):
        """Under sig's runtime, with sig's normalized shape and eps (input, weight and bias after
        autocast); ptrs: the inputs' addresses, where sig has a plan to replay."""
        out = sig.run_forward(ctx, (input, weight, bias), ptrs)
        ctx.save_for_backward(input, weight, bias)
        return out

    backward = _once(_layer_norm_backward)


def _rms_norm_backward(ctx, grad_out):
    input, weight = ctx.saved_tensors
    needs, (rstd,) = ctx.needs_input_grad, ctx.stats
    dX, dgamma = ctx.sig.run_backward((grad_out, input, rstd, weight), (needs[0], needs[1]))
    return dX, dgamma, None, None


class RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, sig, ptrs):
        out = sig.run_forward(ctx, (input, weight), ptrs)
        ctx.save_for_backward(input, weight)  # rstd on ctx, as LayerNorm's statistics
        return out

    backward = _once(_rms_norm_backward)


_LAYER_NORM = _Op("native_layer_norm", "native_layer_norm_backward",
                  lambda sig, t: api._native_layer_norm(t[0], sig.shape, t[1], t[2], sig.eps, rt=sig.rt),
                  lambda sig, t, mask: api._native_layer_norm_backward(t[0], t[1], sig.shape, t[2], t[3], t[4], t[5],
                                                                       mask, sig.rt))
_RMS_NORM = _Op("_fused_rms_norm", "_fused_rms_norm_backward",
                lambda sig, t: api._fused_rms_norm(t[0], sig.shape, t[1], sig.eps, rt=sig.rt),
                lambda sig, t, mask: api._fused_rms_norm_backward(t[0], t[1], sig.shape, t[2], t[3], mask, sig.rt))
_apply_layer_norm = _direct(LayerNormFunction)
_apply_rms_norm = _direct(RMSNormFunction)


_native = None  # the C++ replay's module (reimpl/device/native.py) once asked for; False: there is none


def _native_module():
    global _native
    if _native is None:
        _native = native.module() or False
    return _native


def native_call(op: int, rt, tensors: tuple, normalized_shape: tuple, eps):
    """The C++ replay's output for a call that records a graph and has an entry there (the node is
    a C++ one, its backward this signature's run_backward); None: the call takes the Python path."""
    mod = _native if _native is not None else _native_module()
    if not mod or not api.USE_PLANS or _transforms_active():
        return None
    if op == native.LAYER_NORM:
        return mod.layer_norm(*tensors, normalized_shape, eps, id(rt))
    return mod.rms_norm(*tensors, normalized_shape, eps, id(rt))


def _adopt(sig, op: int, tensors: tuple, normalized_shape: tuple, eps) -> None:
    """A signature's first call done: keep its plan, and give the C++ replay an entry for it."""
    plan = sig.adopt()
    if plan is not None and _native_module():
        native.add(op, sig.rt, tensors, normalized_shape, eps, sig, plan)


def layer_norm(input, normalized_shape: tuple, weight, bias, eps: float, rt):
    """LayerNormFunction's output for input, weight and bias (after autocast) under runtime rt."""
    out = native_call(native.LAYER_NORM, rt, (input, weight, bias), normalized_shape, eps)
    if out is not None:
        return out
    sig, ptrs = _Signature.of(_LAYER_NORM, (input, weight, bias), normalized_shape, eps, rt)
    out = (LayerNormFunction.apply if _transforms_active() else _apply_layer_norm)(input, weight, bias, sig, ptrs)
    if sig.key is not None:
        _adopt(sig, native.LAYER_NORM, (input, weight, bias), normalized_shape, eps)
    return out


def rms_norm(input, normalized_shape: tuple, weight, eps, rt, found=api._UNKNOWN):
    """RMSNormFunction's output for input and weight under runtime rt (found: as _Signature.of's).
    The caller has asked native_call first (reimpl/functional.py, before its route's checks)."""
    sig, ptrs = _Signature.of(_RMS_NORM, (input, weight), normalized_shape, eps, rt, found)
    out = (RMSNormFunction.apply if _transforms_active() else _apply_rms_norm)(input, weight, sig, ptrs)
    if sig.key is not None:
        _adopt(sig, native.RMS_NORM, (input, weight), normalized_shape, eps)
    return out
