"""Kernels as Python objects: C scalar types, `__global__` templates and their instantiations.
A `Kernel` prints as torch's profiler names a kernel (``vectorized_layer_norm_kernel<c10::BFloat16,
float, false>``) and carries its NVRTC name expression and the source tree that instantiates it,
which is all `compile.build` and the runtimes need. The mirror's templates are in reimpl/mirror/kernel_table.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .compile import CudaSource


@dataclass(frozen=True, eq=False)  # singletons: identity hashing keeps kernel lookups cheap
class CType:
    """A C++ scalar type as the kernels see it: its spelling, size and NumPy twin (for scalars)."""
    name: str
    itemsize: int
    np_scalar: type | None

    def __str__(self) -> str:
        return self.name


float_ = CType("float", 4, np.float32)
double = CType("double", 8, np.float64)
Half = CType("c10::Half", 2, None)
BFloat16 = CType("c10::BFloat16", 2, None)


def sizeof(t: CType) -> int:
    return t.itemsize


def _template_arg(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v}u"  # upstream's tile sizes are `unsigned int` template parameters
    return str(v)


# Parameter kinds of a kernel signature, used to pack launch arguments:
#   "int" (32-bit), "int64", "T_ACC" (the accumulate type), "ptr" (any pointer; 0 is nullptr).
class KernelTemplate:
    """A `__global__` template in the CUDA tree `source`, declared in C++ namespace `namespace`;
    `tmpl[T, T_ACC, ...]` is the instantiation, the same object every time. The second template
    argument is the accumulate type, which `T_ACC` parameters are packed as."""

    def __init__(self, name: str, params: tuple[str, ...], source: CudaSource, namespace: str,
                 release: str | None = None):
        self.name = name
        self.params = params
        self.source = source
        self.namespace = namespace
        # set when this is another build's signature of a kernel in `source` (a later torch release's):
        # only that build's binary can launch it, not ours
        self.release = release
        self._instances: dict[tuple, Kernel] = {}

    def __getitem__(self, targs) -> "Kernel":
        k = self._instances.get(targs)
        if k is None:
            k = self._instances[targs] = Kernel(self, tuple(targs))
        return k

    def __repr__(self) -> str:
        return f"KernelTemplate({self.name!r})"


class Kernel:
    """One instantiation: its name as torch's profiler prints it, and its NVRTC name expression."""

    def __init__(self, template: KernelTemplate, targs: tuple):
        self.template = template
        self.targs = targs
        self.name = f"{template.name}<{', '.join(_template_arg(a) for a in targs)}>"
        self.expr = f"{template.namespace}::{self.name}"  # instantiates it under NVRTC
        self.T_ACC: CType = targs[1]
        self.source = template.source  # the tree that instantiates it (a runtime loads one module per tree)

    def __repr__(self) -> str:
        return f"Kernel({self.name!r})"

    def __str__(self) -> str:
        return self.name


_STRUCT_OF_KIND = {"ptr": "Q", "int": "i", "int64": "q"}


def param_codes(kernel) -> list[str]:
    """The C type of each of kernel's parameters as a struct code: Q (a pointer), i, q, and f or d
    for T_ACC (float or double, by the instance's accumulation type)."""
    acc = "f" if kernel.T_ACC.itemsize == 4 else "d"
    return [_STRUCT_OF_KIND.get(k) or acc for k in kernel.template.params]
