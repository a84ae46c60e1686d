"""reimpl: PyTorch's CUDA LayerNorm and RMSNorm (torch 2.11.0), mirrored line by line and
compiled at run time, bit-identical to torch.

Public API (torch CUDA tensors in and out, torch's current stream):
    native_layer_norm, fused_rms_norm                        aten's forward contracts
    native_layer_norm_backward, fused_rms_norm_backward      aten's backward contracts
    layer_norm, rms_norm                                     torch.nn.functional's signatures (differentiable)
    nn.LayerNorm, nn.RMSNorm                                 drop-in modules
    torch.ops.reimpl.*                                       the aten-level four as torch.library ops
                                                             (registered on import; reimpl/ops.py)

The package's layers (mirror, device plumbing, emulator, checks, site) and the imports each may
make are listed in reimpl/layers.py.
"""
from . import nn, ops  # noqa: F401  (ops: registers torch.ops.reimpl.*)
from .api import fused_rms_norm, fused_rms_norm_backward, native_layer_norm, native_layer_norm_backward
from .functional import layer_norm, rms_norm

TORCH_VERSION = "2.11.0"
TORCH_GIT_VERSION = "70d99e998b4955e0049d13a98d77ae1b14db1f45"

__all__ = ["native_layer_norm", "fused_rms_norm", "native_layer_norm_backward", "fused_rms_norm_backward",
           "layer_norm", "rms_norm", "nn", "TORCH_VERSION", "TORCH_GIT_VERSION"]
