"""The CUDA kernels of the mirror as Python objects: C types, kernel templates and the
instantiations we compile. A `Kernel` prints exactly as torch's profiler names the upstream
kernel (``vectorized_layer_norm_kernel<c10::BFloat16, float, false>``), which is how launch
plans are compared with torch's recorded launches.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .device.compile import CudaSource


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
    """`tmpl[T, T_ACC, rms_norm]` is the instantiation, the same object every time."""

    def __init__(self, name: str, params: tuple[str, ...]):
        self.name = name
        self.params = params
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
        self.expr = f"at::native::{self.name}"  # instantiates it under NVRTC
        self.T_ACC: CType = targs[1]
        self.source = SOURCE  # the tree that instantiates it (the device runtime loads per source)

    def __repr__(self) -> str:
        return f"Kernel({self.name!r})"

    def __str__(self) -> str:
        return self.name


# Signatures, in upstream's parameter order (layer_norm_kernel.cu).
RowwiseMomentsCUDAKernel = KernelTemplate(
    "RowwiseMomentsCUDAKernel", ("int64", "T_ACC", "ptr", "ptr", "ptr"))
LayerNormForwardCUDAKernel = KernelTemplate(
    "LayerNormForwardCUDAKernel", ("int64", "ptr", "ptr", "ptr", "ptr", "ptr", "ptr"))
vectorized_layer_norm_kernel = KernelTemplate(
    "vectorized_layer_norm_kernel", ("int", "T_ACC", "ptr", "ptr", "ptr", "ptr", "ptr", "ptr"))

FORWARD_TEMPLATES = (RowwiseMomentsCUDAKernel, LayerNormForwardCUDAKernel, vectorized_layer_norm_kernel)

_GRAD_INPUT_PARAMS = ("ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "int")
layer_norm_grad_input_kernel = KernelTemplate("layer_norm_grad_input_kernel", _GRAD_INPUT_PARAMS)
layer_norm_grad_input_kernel_vectorized = KernelTemplate("layer_norm_grad_input_kernel_vectorized",
                                                         _GRAD_INPUT_PARAMS)
# <T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y, partial_reduction, aligned_grid, rms_norm>
GammaBetaBackwardCUDAKernelTemplate = KernelTemplate(
    "GammaBetaBackwardCUDAKernelTemplate", ("int64", "int64", "ptr", "ptr", "ptr", "ptr", "ptr", "ptr"))

# (block_dim_x, block_dim_y, rows_per_block_y, partial_reduction) of each GammaBeta instantiation
# the host code names: ConfigureAndLaunchGammaBetaBackwardKernel's four tiles with both values of
# partial_reduction (its branch is a run-time `if`), and LaunchGammaBetaBackwardCUDAKernel's
# partial-only <32, 1, 32>. Each also comes with aligned_grid false/true.
GAMMA_BETA_TILES = tuple((32, y, rows, partial)
                         for y, rows in ((1, 8), (8, 64), (16, 128), (32, 256))
                         for partial in (False, True)) + ((32, 1, 32, True),)

# (T, T_ACC) pairs of AT_DISPATCH_FLOATING_TYPES_AND2(Half, BFloat16, ...) with acc_type<T, true>.
DISPATCH_TYPES = ((double, double), (float_, float_), (Half, float_), (BFloat16, float_))


def forward_instantiations() -> list[Kernel]:
    """Every forward kernel torch 2.11 instantiates: 3 templates x 4 dtypes x rms_norm."""
    return [tmpl[T, T_ACC, rms]
            for tmpl in FORWARD_TEMPLATES
            for T, T_ACC in DISPATCH_TYPES
            for rms in (False, True)]


def backward_instantiations() -> list[Kernel]:
    """Every backward kernel torch 2.11 instantiates on CUDA (the vectorized grad-input kernel exists
    for double too: upstream's choice between the two is a run-time `if`)."""
    out = [tmpl[T, T_ACC, rms]
           for tmpl in (layer_norm_grad_input_kernel, layer_norm_grad_input_kernel_vectorized)
           for T, T_ACC in DISPATCH_TYPES
           for rms in (False, True)]
    out += [GammaBetaBackwardCUDAKernelTemplate[T, T_ACC, bx, by, rows, partial, aligned, rms]
            for T, T_ACC in DISPATCH_TYPES
            for bx, by, rows, partial in GAMMA_BETA_TILES
            for aligned in (False, True)
            for rms in (False, True)]
    return out


def all_instantiations() -> list[Kernel]:
    return forward_instantiations() + backward_instantiations()


# The mirror's CUDA tree: what `reimpl.device.compile.build(SOURCE, arch)` compiles.
SOURCE = CudaSource(Path(__file__).parent / "cuda", "layer_norm_kernel.cu", all_instantiations)
