"""Drop-in modules: torch.nn.LayerNorm and torch.nn.RMSNorm with our kernels in both passes.

They subclass torch's modules, so constructor arguments, parameters, initialisation, state_dict
keys and repr are torch's own; only forward differs, calling reimpl.layer_norm / reimpl.rms_norm
(reimpl/functional.py; differentiable through reimpl/autograd.py). A model can swap one for the other either way and
load the other's state_dict.
"""
from __future__ import annotations

import torch

from . import functional


class LayerNorm(torch.nn.LayerNorm):
    kernels = "mirror"  # or "fast": reimpl.fast.use_fast sets it

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return functional.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps,
                                     kernels=self.kernels)


class RMSNorm(torch.nn.RMSNorm):
    kernels = "mirror"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return functional.rms_norm(x, self.normalized_shape, self.weight, self.eps, kernels=self.kernels)
