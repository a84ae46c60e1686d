"""The CUDA kernels of the mirror as Python objects: upstream's kernel templates with their
signatures, and the instantiations we compile. A `Kernel` (reimpl/device/kernel_types.py) prints exactly
as torch's profiler names the upstream kernel (``vectorized_layer_norm_kernel<c10::BFloat16, float,
false>``), which is how launch plans are compared with torch's recorded launches.
"""
from __future__ import annotations

from pathlib import Path

from ..device.compile import CudaSource
from ..device.kernel_types import BFloat16, CType, Half, Kernel, KernelTemplate, double, float_, sizeof  # noqa: F401

# The mirror's CUDA tree: what `reimpl.device.compile.build(SOURCE, arch)` compiles.
SOURCE = CudaSource(Path(__file__).parent / "cuda", "layer_norm_kernel.cu", lambda: all_instantiations())
NAMESPACE = "at::native"


# Signatures, in upstream's parameter order (layer_norm_kernel.cu).
RowwiseMomentsCUDAKernel = KernelTemplate(
    "RowwiseMomentsCUDAKernel", ("int64", "T_ACC", "ptr", "ptr", "ptr"), SOURCE, NAMESPACE)
LayerNormForwardCUDAKernel = KernelTemplate(
    "LayerNormForwardCUDAKernel", ("int64", "ptr", "ptr", "ptr", "ptr", "ptr", "ptr"), SOURCE, NAMESPACE)
vectorized_layer_norm_kernel = KernelTemplate(
    "vectorized_layer_norm_kernel", ("int", "T_ACC", "ptr", "ptr", "ptr", "ptr", "ptr", "ptr"), SOURCE, NAMESPACE)

FORWARD_TEMPLATES = (RowwiseMomentsCUDAKernel, LayerNormForwardCUDAKernel, vectorized_layer_norm_kernel)

# torch 2.14's signatures of the fallback forward kernels: a leading int64 M, which the CUDA kernels
# never read (reimpl/mirror/release.py). Launched only under release.use(>= 2.14), on a 2.14 cubin.
RowwiseMomentsCUDAKernel_2_14 = KernelTemplate(
    "RowwiseMomentsCUDAKernel", ("int64",) + RowwiseMomentsCUDAKernel.params, SOURCE, NAMESPACE, release="2.14")
LayerNormForwardCUDAKernel_2_14 = KernelTemplate(
    "LayerNormForwardCUDAKernel", ("int64",) + LayerNormForwardCUDAKernel.params, SOURCE, NAMESPACE, release="2.14")

_GRAD_INPUT_PARAMS = ("ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "int")
layer_norm_grad_input_kernel = KernelTemplate("layer_norm_grad_input_kernel", _GRAD_INPUT_PARAMS, SOURCE, NAMESPACE)
layer_norm_grad_input_kernel_vectorized = KernelTemplate("layer_norm_grad_input_kernel_vectorized",
                                                         _GRAD_INPUT_PARAMS, SOURCE, NAMESPACE)
# <T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y, partial_reduction, aligned_grid, rms_norm>
GammaBetaBackwardCUDAKernelTemplate = KernelTemplate(
    "GammaBetaBackwardCUDAKernelTemplate", ("int64", "int64", "ptr", "ptr", "ptr", "ptr", "ptr", "ptr"), SOURCE,
    NAMESPACE)

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

