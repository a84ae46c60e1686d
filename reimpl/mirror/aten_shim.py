"""The pieces of ATen's C++ API that the host mirror (reimpl/mirror/layer_norm_kernel.py) calls, written
in Python: dtype dispatch, typed data pointers, contiguity, `Tensor*` out-parameters, and the
allocation helpers. Each keeps the C++ behaviour the mirror relies on, including its error messages;
none of them is part of layer_norm_kernel.cu.

The host mirror runs on two kinds of tensor. Torch's (CUDA tensors on the real path; CPU tensors in
the launch-plan tests) go to torch, as before. `StandInTensor`s, tensors without data that
`StandInDevice` hands out, are what the CPU emulator (reimpl/emulator/api.py) runs the mirror on:
shape, dtype, address and the few Tensor methods the mirror calls, so the emulator needs no torch.
The emulator takes the stand-ins whether or not torch is installed: one path, the same addresses on
every machine, tested everywhere. Only the helpers below tell the two apart (by the tensor's or the
device's type), and this module imports torch only when a torch tensor reaches it.
"""
from __future__ import annotations

import math
import sys

from .kernel_table import BFloat16, Half, double, float_
from .input_checks import TorchCheckError


class ScalarType:
    """A dtype of the stand-in tensors: torch's name for it, c10's ScalarType name, its size in bytes."""
    __slots__ = ("name", "c10_name", "itemsize")

    def __init__(self, name: str, c10_name: str, itemsize: int):
        self.name, self.c10_name, self.itemsize = name, c10_name, itemsize

    def __repr__(self) -> str:
        return self.name


# torch's dtype names, c10's ScalarType names and sizes, for the dtypes the mirror can meet
_SCALAR_TYPES = (("float32", "Float", 4), ("float16", "Half", 2), ("bfloat16", "BFloat16", 2), ("float64", "Double", 8),
                 ("int64", "Long", 8), ("int32", "Int", 4), ("int16", "Short", 2), ("int8", "Char", 1),
                 ("uint8", "Byte", 1), ("bool", "Bool", 1), ("complex64", "ComplexFloat", 8),
                 ("complex128", "ComplexDouble", 16))
STANDIN_DTYPES = {name: ScalarType(name, c10, size) for name, c10, size in _SCALAR_TYPES}

_C_TYPES = {"Float": (float_, float_), "Half": (Half, float_), "BFloat16": (BFloat16, float_), "Double": (double, double)}
_C_TO_NAME = {float_: "Float", Half: "Half", BFloat16: "BFloat16", double: "Double"}
_ACC_NAME = {"Half": "float32", "BFloat16": "float32"}  # acc_type<T, /*is_cuda=*/true>; others keep their own

# dtype object -> c10 name, and dtype object -> its accumulate dtype (of the same kind: stand-in or
# torch). The stand-ins' are here from the start; torch's are added when a torch dtype first comes by.
_NAME_OF = {dt: dt.c10_name for dt in STANDIN_DTYPES.values()}
_ACC_OF = {dt: STANDIN_DTYPES[_ACC_NAME.get(dt.c10_name, dt.name)] for dt in STANDIN_DTYPES.values()}


def _learn_torch_dtypes() -> None:
    torch = sys.modules.get("torch")
    if torch is None or torch.float32 in _NAME_OF:
        return
    for name, c10, _ in _SCALAR_TYPES:
        dt = getattr(torch, name)
        _NAME_OF[dt] = c10
        _ACC_OF[dt] = getattr(torch, _ACC_NAME.get(c10, name))


def scalar_type_name(dtype) -> str:
    name = _NAME_OF.get(dtype)
    if name is None:
        _learn_torch_dtypes()
        name = _NAME_OF.get(dtype)
    return name if name is not None else str(dtype).replace("torch.", "")


def toAccumulateType(dtype):
    """at::toAccumulateType(type, /*is_cuda=*/true) for the types LayerNorm accepts."""
    acc = _ACC_OF.get(dtype)
    if acc is None:
        _learn_torch_dtypes()
        acc = _ACC_OF.get(dtype, dtype)
    return acc


def numeric_limits_epsilon(T) -> float:
    """std::numeric_limits<T>::epsilon() for float and double."""
    return 2.0 ** -23 if T is float_ else 2.0 ** -52


class StandInDevice:
    """Where stand-in tensors live. Hands out addresses as an allocator would (aligned, never reused,
    so every tensor keeps its own; 0 for an empty one, as torch's allocators give nullptr), and logs
    what the host mirror makes: `made` holds (op, result, source) for every tensor created, op one of
    "empty", "zeros" (zeros_like: a fill) or "sum" (`src.sum(0)`), in the order the mirror asked."""
    ALIGN = 512  # the CUDA caching allocator's block granularity

    def __init__(self):
        self._next = 1 << 20
        self.made = []

    def _alloc(self, nbytes: int) -> int:
        if nbytes == 0:
            return 0
        ptr = self._next
        self._next += -(-nbytes // self.ALIGN) * self.ALIGN
        return ptr

    def tensor(self, shape, dtype: ScalarType, offset: int = 0) -> "StandInTensor":
        """A fresh allocation of numel + offset elements, viewed from element `offset` as `shape` (what
        `torch.empty(numel + offset)[offset:].view(shape)` gives)."""
        shape = tuple(int(s) for s in shape)
        base = self._alloc((math.prod(shape) + offset) * dtype.itemsize)
        return StandInTensor(shape, dtype, self, base + offset * dtype.itemsize if base else 0)

    def empty(self, shape, dtype: ScalarType, op: str = "empty", src=None) -> "StandInTensor":
        t = self.tensor(shape, dtype)
        self.made.append((op, t, src))
        return t


class StandInTensor:
    """A contiguous tensor without data: shape, dtype, device and address, and the torch.Tensor methods
    the host mirror and the shape checks call on their tensors."""
    __slots__ = ("shape", "dtype", "device", "_ptr")

    def __init__(self, shape: tuple, dtype: ScalarType, device: StandInDevice, ptr: int):
        self.shape, self.dtype, self.device, self._ptr = shape, dtype, device, ptr

    def __repr__(self) -> str:
        return f"StandInTensor(shape={list(self.shape)}, dtype={self.dtype}, data_ptr={self._ptr:#x})"

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def stride(self) -> tuple[int, ...]:
        out, step = [], 1
        for s in reversed(self.shape):
            out.append(step)
            step *= max(s, 1)
        return tuple(reversed(out))

    def element_size(self) -> int:
        return self.dtype.itemsize

    def data_ptr(self) -> int:
        return self._ptr

    def is_contiguous(self, memory_format=None) -> bool:
        return True

    def contiguous(self, memory_format=None) -> "StandInTensor":
        return self

    def view(self, *shape) -> "StandInTensor":
        shape = tuple(int(s) for s in (shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape))
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.numel() // known if s == -1 else s for s in shape)
        if math.prod(shape) != self.numel():
            raise TorchCheckError(f"shape '{list(shape)}' is invalid for input of size {self.numel()}")
        return StandInTensor(shape, self.dtype, self.device, self._ptr)

    def sum(self, dim: int) -> "StandInTensor":
        """`t.sum(0)` of a 2-D tensor (the partial GammaBeta path's second pass); the emulator computes it."""
        if dim != 0 or self.dim() != 2:
            raise NotImplementedError(f"sum({dim}) of a {self.dim()}-D stand-in tensor")
        return self.device.empty(self.shape[1:], self.dtype, "sum", self)


def empty(size, dtype, device):
    """at::empty(size, options): a stand-in on a StandInDevice, else torch.empty."""
    if type(device) is StandInDevice:
        return device.empty(size, dtype)
    import torch
    return torch.empty(size, dtype=dtype, device=device)


def data_ptr(t, T) -> int:
    """Tensor::data_ptr<T>() / const_data_ptr<T>(): the address, after the same dtype check."""
    if scalar_type_name(t.dtype) != _C_TO_NAME[T]:
        raise TorchCheckError(f"expected scalar type {_C_TO_NAME[T]} but found {scalar_type_name(t.dtype)}")
    return t.data_ptr()


def expect_contiguous(t):
    """Tensor::expect_contiguous(): the tensor itself if contiguous, else a contiguous copy."""
    return t if t is None or t.is_contiguous() else t.contiguous()


def empty_like(t):
    """at::native::empty_like(t, ..., LEGACY_CONTIGUOUS_MEMORY_FORMAT); on an undefined tensor
    (an absent weight or bias whose gradient was asked for) ATen fails with this message."""
    if t is None:
        raise TorchCheckError("tensor does not have a device")
    if type(t) is StandInTensor:
        return t.device.empty(t.shape, t.dtype)
    import torch
    return torch.empty_like(t, memory_format=torch.contiguous_format)


def zeros_like(t):
    """at::native::zeros_like(t, ..., LEGACY_CONTIGUOUS_MEMORY_FORMAT): torch's fill kernel."""
    if t is None:
        raise TorchCheckError("tensor does not have a device")
    if type(t) is StandInTensor:
        return t.device.empty(t.shape, t.dtype, "zeros")
    import torch
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
    types = _C_TYPES.get(scalar_type_name(X.dtype))
    if types is None:
        # AT_DISPATCH raises through TORCH_CHECK_NOT_IMPLEMENTED: NotImplementedError in Python
        raise NotImplementedError(f'"{name}" not implemented for \'{scalar_type_name(X.dtype)}\'')
    return types


def _cast_acc(T_ACC, eps: float):
    """static_cast<acc_t>(eps): eps rounds to float when the accumulate type is float."""
    return T_ACC.np_scalar(eps)
