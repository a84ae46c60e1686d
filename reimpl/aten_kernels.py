"""Our kernels as torch's own: the mirror's or reimpl.fast's four entry points registered as aten's
CUDA kernels, so torch.nn.LayerNorm, torch.nn.RMSNorm, F.layer_norm, F.rms_norm and the aten ops
themselves run them, under torch's own C++ host code and autograd.

    with reimpl.in_torch("fast"):          # or reimpl.fast.in_torch()
        loss = model(x).loss               # torch's modules, unchanged, on our kernels
        loss.backward()

Why: reimpl's functional calls and modules differentiate through a Python autograd.Function, whose
node costs tens of microseconds a step on the host (the training guide measures it). Here autograd,
autocast, aten::layer_norm's and aten::rms_norm's composites and the choice of the fused RMSNorm are
torch's C++; only the four CUDA kernels are ours, called by the dispatcher with the arguments aten's
schema gives them:

    aten::native_layer_norm            (input, normalized_shape, weight, bias, eps) -> (out, mean, rstd)
    aten::native_layer_norm_backward   (grad_out, input, normalized_shape, mean, rstd, weight, bias,
                                        output_mask) -> (dX, dgamma, dbeta)
    aten::_fused_rms_norm              (input, normalized_shape, weight, eps) -> (out, rstd)
    aten::_fused_rms_norm_backward     (grad_out, input, normalized_shape, rstd, weight, output_mask)
                                        -> (dX, dweight)

They stay registered until the `with` block ends (or `uninstall()`), for every thread: a
registration is the dispatcher's, not a thread's. While they are, torch's own kernels for these four
ops are out of reach (the dispatcher keeps them, and puts them back on uninstall). torch.compile's
Inductor decomposes the norms into its own kernels and never calls these; compiled models reach our
kernels through reimpl's registered ops instead (reimpl/ops.py). The double backward is torch's own
composite of other ops, as without us.
"""
from __future__ import annotations

import contextlib
import threading
import warnings

import torch

from . import api
from .fast.runtime import fast_runtime

_OPS = ("native_layer_norm", "native_layer_norm_backward", "_fused_rms_norm", "_fused_rms_norm_backward")
_lock = threading.Lock()
_state = {"library": None, "kernels": None}


def _kernels_for(kernels: str):
    """The four dispatcher kernels of `kernels`: the forwards after autocast (torch's AutocastCUDA
    kernel has run by then), the backwards as reimpl's own entry points, which take the dispatcher's
    lists. The runtime is looked up per call: the mirror's is the calling context's (None), and the
    fast one is made on first use, so installing needs no GPU."""
    def rt():
        return fast_runtime() if kernels == "fast" else None

    def native_layer_norm(input, normalized_shape, weight, bias, eps):
        return api._native_layer_norm(input, normalized_shape, weight, bias, eps, rt=rt())

    def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
        return api.native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
                                              output_mask, rt=rt())

    def _fused_rms_norm(input, normalized_shape, weight, eps):
        return api._fused_rms_norm(input, normalized_shape, weight, eps, rt=rt())

    def _fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask):
        return api.fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask, rt=rt())
    return dict(zip(_OPS, (native_layer_norm, native_layer_norm_backward, _fused_rms_norm, _fused_rms_norm_backward)))


def installed() -> str | None:
    """Which kernels ("mirror" or "fast") torch's four ops run now; None: torch's own."""
    return _state["kernels"]


def install(kernels: str = "mirror") -> None:
    """Register `kernels`' four entry points as aten's CUDA kernels (replacing any installed before)."""
    api.check_kernels(kernels)
    with _lock:
        _uninstall_locked()
        library = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():  # the dispatcher warns, once, that an aten kernel is overridden
            warnings.filterwarnings("ignore", message=".*[Oo]verrid")
            for name, fn in _kernels_for(kernels).items():
                library.impl(name, fn, "CUDA")
        _state.update(library=library, kernels=kernels)


def uninstall() -> None:
    """Give torch's four ops their own kernels back."""
    with _lock:
        _uninstall_locked()


def _uninstall_locked() -> None:
    if _state["library"] is not None:
        _state["library"]._destroy()
    _state.update(library=None, kernels=None)


@contextlib.contextmanager
def in_torch(kernels: str = "mirror"):
    """Inside the block, torch's LayerNorm and RMSNorm (modules, functional calls, aten ops; forward
    and backward) run `kernels`' kernels; after it, whatever ran before."""
    before = installed()
    install(kernels)
    try:
        yield
    finally:
        if before is None:
            uninstall()
        else:
            install(before)
