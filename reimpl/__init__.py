"""reimpl: PyTorch's CUDA LayerNorm and RMSNorm (torch 2.11.0), mirrored line by line and
compiled at run time, bit-identical to torch.

Public API (torch CUDA tensors in and out, torch's current stream):
    native_layer_norm, fused_rms_norm                        aten's forward contracts
    native_layer_norm_backward, fused_rms_norm_backward      aten's backward contracts
    layer_norm, rms_norm                                     torch.nn.functional's signatures (differentiable)
    nn.LayerNorm, nn.RMSNorm                                 drop-in modules
    torch.ops.reimpl.*                                       the aten-level four as torch.library ops
                                                             (registered as below; reimpl/ops.py)
    in_torch(kernels)                                        context manager: torch's own LayerNorm and
                                                             RMSNorm (modules, F.*, aten ops) run our
                                                             kernels under torch's C++ autograd
                                                             (reimpl/aten_kernels.py)

The package's layers (mirror, device plumbing, emulator, checks, site) and the imports each may
make are listed in reimpl/layers.py.

Importing the package loads no torch: the public names are resolved on first use (PEP 562), and the
first use of any of them (reimpl.nn and reimpl.ops included) registers torch.ops.reimpl.* as well.
Where torch is already imported when reimpl is (the usual `import torch; import reimpl`), they are
resolved and the ops registered at once, so `torch.ops.reimpl.*` work straight after the import.
Without torch, `reimpl.emulator` and `python -m reimpl trace` still work (NumPy only).

Layer: public. May import: fast, mirror, device.
"""
import importlib as _importlib
import sys as _sys

TORCH_VERSION = "2.11.0"
TORCH_GIT_VERSION = "70d99e998b4955e0049d13a98d77ae1b14db1f45"

__all__ = ["native_layer_norm", "fused_rms_norm", "native_layer_norm_backward", "fused_rms_norm_backward",
           "layer_norm", "rms_norm", "nn", "in_torch", "TORCH_VERSION", "TORCH_GIT_VERSION"]

# public name -> the module that defines it (a submodule itself where the name is the module's)
_LAZY = {"native_layer_norm": "api", "fused_rms_norm": "api", "native_layer_norm_backward": "api",
         "fused_rms_norm_backward": "api", "layer_norm": "functional", "rms_norm": "functional",
         "nn": "nn", "ops": "ops", "in_torch": "aten_kernels"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _importlib.import_module(".ops", __name__)  # registers torch.ops.reimpl.*
    found = _importlib.import_module(f".{module}", __name__)
    value = found if module == name else getattr(found, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


if "torch" in _sys.modules:
    for _name in _LAZY:
        __getattr__(_name)
