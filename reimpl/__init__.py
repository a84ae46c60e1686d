"""reimpl: PyTorch's CUDA LayerNorm and RMSNorm (torch 2.11.0), mirrored line by line and
compiled at run time, bit-identical to torch.

Public API (torch CUDA tensors in and out, torch's current stream):
    native_layer_norm, fused_rms_norm   aten's contracts
    layer_norm, rms_norm                torch.nn.functional's signatures
"""
from .api import fused_rms_norm, layer_norm, native_layer_norm, rms_norm

TORCH_VERSION = "2.11.0"
TORCH_GIT_VERSION = "70d99e998b4955e0049d13a98d77ae1b14db1f45"

__all__ = ["native_layer_norm", "fused_rms_norm", "layer_norm", "rms_norm", "TORCH_VERSION", "TORCH_GIT_VERSION"]
