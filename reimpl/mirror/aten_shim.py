"""The pieces of ATen's C++ API that the host mirror (reimpl/mirror/layer_norm_kernel.py) calls, written
for torch tensors in Python: dtype dispatch, typed data pointers, contiguity, `Tensor*`
out-parameters, and the allocation helpers. Each keeps the C++ behaviour the mirror relies on,
including its error messages; none of them is part of layer_norm_kernel.cu.
"""
from __future__ import annotations

import torch

from .kernel_table import BFloat16, Half, double, float_
from .input_checks import TorchCheckError

_TORCH_TO_C = {torch.float32: (float_, float_), torch.float16: (Half, float_),
               torch.bfloat16: (BFloat16, float_), torch.float64: (double, double)}
_C_TO_TORCH = {float_: torch.float32, Half: torch.float16, BFloat16: torch.bfloat16, double: torch.float64}
_SCALAR_TYPE_NAME = {torch.float32: "Float", torch.float16: "Half", torch.bfloat16: "BFloat16",
                     torch.float64: "Double", torch.int64: "Long", torch.int32: "Int", torch.int16: "Short",
                     torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool",
                     torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble"}


def scalar_type_name(dtype: torch.dtype) -> str:
    return _SCALAR_TYPE_NAME.get(dtype, str(dtype).replace("torch.", ""))


def toAccumulateType(dtype: torch.dtype) -> torch.dtype:
    """at::toAccumulateType(type, /*is_cuda=*/true) for the types LayerNorm accepts."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def data_ptr(t, T) -> int:
    """Tensor::data_ptr<T>() / const_data_ptr<T>(): the address, after the same dtype check."""
    if t.dtype is not _C_TO_TORCH[T]:
        raise TorchCheckError(f"expected scalar type {scalar_type_name(_C_TO_TORCH[T])} "
                              f"but found {scalar_type_name(t.dtype)}")
    return t.data_ptr()


def expect_contiguous(t):
    """Tensor::expect_contiguous(): the tensor itself if contiguous, else a contiguous copy."""
    return t if t is None or t.is_contiguous() else t.contiguous()


def empty_like(t):
    """at::native::empty_like(t, ..., LEGACY_CONTIGUOUS_MEMORY_FORMAT); on an undefined tensor
    (an absent weight or bias whose gradient was asked for) ATen fails with this message."""
    if t is None:
        raise TorchCheckError("tensor does not have a device")
    return torch.empty_like(t, memory_format=torch.contiguous_format)


def zeros_like(t):
    """at::native::zeros_like(t, ..., LEGACY_CONTIGUOUS_MEMORY_FORMAT): torch's fill kernel."""
    if t is None:
        raise TorchCheckError("tensor does not have a device")
    return torch.zeros_like(t, memory_format=torch.contiguous_format)


class TensorRef:
    """A `Tensor*` out-parameter. `.t` is the tensor, None when undefined. Upstream assigns through
    the pointer (`*dgamma = dgamma_blocks.sum(0)`), which a plain Python argument cannot do."""
    __slots__ = ("t",)

    def __init__(self, t=None):
        self.t = t

    def defined(self) -> bool:
        return self.t is not None

    def size(self, dim: int) -> int:
        """`(*ref).size(dim)`. An undefined Tensor answers as c10's default TensorImpl shape, one
        dimension of size 0; upstream's partial GammaBeta path relies on that (see its comment)."""
        if self.t is None:
            return (0,)[dim]
        return self.t.size(dim)


def _dispatch(X, name: str):
    """AT_DISPATCH_FLOATING_TYPES_AND2(Half, BFloat16, ...): (scalar_t, acc_type<scalar_t, true>)."""
    types = _TORCH_TO_C.get(X.dtype)
    if types is None:
        # AT_DISPATCH raises through TORCH_CHECK_NOT_IMPLEMENTED: NotImplementedError in Python
        raise NotImplementedError(f'"{name}" not implemented for \'{scalar_type_name(X.dtype)}\'')
    return types


def _cast_acc(T_ACC, eps: float):
    """static_cast<acc_t>(eps): eps rounds to float when the accumulate type is float."""
    return T_ACC.np_scalar(eps)
