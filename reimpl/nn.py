"""Drop-in modules: torch.nn.LayerNorm and torch.nn.RMSNorm with our kernels in both passes.

They subclass torch's modules, so constructor arguments, parameters, initialisation, state_dict
keys and repr are torch's own; only forward differs, calling reimpl.layer_norm / reimpl.rms_norm
(reimpl/functional.py; differentiable through reimpl/autograd.py). A model can swap one for the other either way and
load the other's state_dict.
"""
from __future__ import annotations

import torch

from . import functional
from .device import runtime as _runtime


class LayerNorm(torch.nn.LayerNorm):
    runtime = None  # None: the mirror's kernels; reimpl.fast.use_fast sets its FastRuntime

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.runtime is None:  # (the runtime switch costs a context manager per call: skip it)
            return functional.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)
        with _runtime.use(self.runtime):
            return functional.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(torch.nn.RMSNorm):
    runtime = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.runtime is None:
            return functional.rms_norm(x, self.normalized_shape, self.weight, self.eps)
        with _runtime.use(self.runtime):
            return functional.rms_norm(x, self.normalized_shape, self.weight, self.eps)
