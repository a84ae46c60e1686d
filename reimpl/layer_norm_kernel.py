"""Host half of the mirror of aten/src/ATen/native/cuda/layer_norm_kernel.cu (torch 2.11.0):
dispatch, path choice and launch configuration, in upstream's names and order.

Python stands in for C++ here: template parameters (T, T_ACC, rms_norm) come first as ordinary
arguments; `Tensor*` out-parameters are tensors we write into; an undefined Tensor is None and a
null pointer is 0. Every kernel launch is one `rt.launch(kernel, blocks, threads, nshared, stream,
*args)` line, the <<<blocks, threads, nshared, stream>>>(args) of upstream.
"""
from __future__ import annotations

import torch

from . import runtime
from .kernels import (BFloat16, Half, RowwiseMomentsCUDAKernel, LayerNormForwardCUDAKernel,
                      double, float_, sizeof, vectorized_layer_norm_kernel)
from .layer_norm_checks import TORCH_CHECK, TorchCheckError, _check_layer_norm_inputs

# --8<-- [start:kCUDANumThreads]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L35-L35
# docs: upstream/layer_norm_kernel.md#kCUDANumThreads
kCUDANumThreads = 256  # block size of LayerNormForwardCUDAKernel
# --8<-- [end:kCUDANumThreads]

# Constants that upstream takes from headers (mirrored in reimpl/cuda/ for the device side).
vec_size = 4                         # layer_norm_kernel.cu
kCUDABlockReduceNumThreads = 512     # block_reduce.cuh
C10_WARP_SIZE = 32


def num_threads() -> int:
    """thread_constants.h: C10_WARP_SIZE * 4."""
    return C10_WARP_SIZE * 4


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


# --8<-- [start:can_vectorize]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L51-L55
# docs: upstream/layer_norm_kernel.md#can_vectorize
def can_vectorize(ptr: int, alignment: int) -> bool:
    return ptr % alignment == 0
# --8<-- [end:can_vectorize]


# --8<-- [start:launch_vectorized_layer_norm_kernel]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L1019-L1078
# docs: upstream/layer_norm_kernel.md#launch_vectorized_layer_norm_kernel
def launch_vectorized_layer_norm_kernel(T, T_ACC, rms_norm,
                                        N, M, eps, X_data, gamma_data, beta_data,
                                        Y_data, mean_data, rstd_data) -> None:
    rt = runtime.get()
    stream = rt.getCurrentCUDAStream()
    warp_size = rt.warp_size()
    threads = (warp_size, num_threads() // warp_size, 1)  # (32, 4): one warp per row slice
    blocks = (M, 1, 1)                                     # one block per row
    assert threads[1] % 2 == 0 or threads[1] == 1          # TORCH_INTERNAL_ASSERT_DEBUG_ONLY
    # compute_stats' inter-warp buffer: threads.y/2 (mean, sigma2) pairs + threads.y/2 counts
    nshared = threads[1] * 3 // 2 * sizeof(T_ACC) if threads[1] > 1 else 0
    rt.launch(vectorized_layer_norm_kernel[T, T_ACC, rms_norm], blocks, threads, nshared, stream,
              N, eps, X_data, gamma_data, beta_data, mean_data, rstd_data, Y_data)
# --8<-- [end:launch_vectorized_layer_norm_kernel]


# --8<-- [start:LayerNormKernelImplInternal]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L1080-L1125
# docs: upstream/layer_norm_kernel.md#LayerNormKernelImplInternal
def LayerNormKernelImplInternal(T, T_ACC, rms_norm,
                                X, gamma, beta, M, N, eps, Y, mean, rstd) -> None:
    # shapes were checked by _check_layer_norm_inputs; X, gamma, beta are contiguous
    rt = runtime.get()
    TORCH_CHECK(M <= rt.getCurrentDeviceProperties()["maxGridSize"][0],
                "M should be less than maximum CUDA grid size,   file a support request to support bigger batches")
    X_data = data_ptr(X, T)
    gamma_data = data_ptr(gamma, T) if gamma is not None else 0
    beta_data = data_ptr(beta, T) if beta is not None else 0
    Y_data = data_ptr(Y, T)
    mean_data = data_ptr(mean, T_ACC) if not rms_norm else 0
    rstd_data = data_ptr(rstd, T_ACC)

    # Fast path only if every pointer is 4-element aligned, N fits the float count exactly
    # (N <= 2^24) and N % 4 == 0 (so every row starts aligned too).
    num_vec_elems = vec_size
    alignment = num_vec_elems * sizeof(T)
    can_vec_X = can_vectorize(X_data, alignment)
    can_vec_Y = can_vectorize(Y_data, alignment)
    can_vec_gamma = can_vectorize(gamma_data, alignment) if gamma is not None else True
    can_vec_beta = can_vectorize(beta_data, alignment) if beta is not None else True

    if (T in (float_, Half, BFloat16) and N <= (1 << 24) and N % num_vec_elems == 0
            and can_vec_X and can_vec_Y and can_vec_gamma and can_vec_beta):
        launch_vectorized_layer_norm_kernel(T, T_ACC, rms_norm, N, M, eps, X_data, gamma_data, beta_data,
                                            Y_data, mean_data, rstd_data)
    else:
        cuda_stream = rt.getCurrentCUDAStream()
        rt.launch(RowwiseMomentsCUDAKernel[T, T_ACC, rms_norm], M, kCUDABlockReduceNumThreads, 0, cuda_stream,
                  N, eps, X_data, mean_data, rstd_data)
        rt.launch(LayerNormForwardCUDAKernel[T, T_ACC, rms_norm], M, kCUDANumThreads, 0, cuda_stream,
                  N, X_data, mean_data, rstd_data, gamma_data, beta_data, Y_data)
# --8<-- [end:LayerNormKernelImplInternal]


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


# --8<-- [start:LayerNormKernelImpl]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L1127-L1147
# docs: upstream/layer_norm_kernel.md#LayerNormKernelImpl
def LayerNormKernelImpl(X, gamma, beta, M, N, eps, Y, mean, rstd) -> None:
    scalar_t, acc_t = _dispatch(X, "LayerNormKernelImpl")
    LayerNormKernelImplInternal(scalar_t, acc_t, False,
                                X, gamma, beta, M, N, _cast_acc(acc_t, eps), Y, mean, rstd)
# --8<-- [end:LayerNormKernelImpl]


# --8<-- [start:RmsNormKernelImpl]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L1149-L1169
# docs: upstream/layer_norm_kernel.md#RmsNormKernelImpl
def RmsNormKernelImpl(X, gamma, M, N, eps, Y, rstd) -> None:
    scalar_t, acc_t = _dispatch(X, "LayerNormKernelImpl")  # upstream reuses LayerNorm's dispatch name
    # no beta, no mean: rms_norm=true never touches them
    LayerNormKernelImplInternal(scalar_t, acc_t, True,
                                X, gamma, None, M, N, _cast_acc(acc_t, eps), Y, None, rstd)
# --8<-- [end:RmsNormKernelImpl]


def _stat_shape(input, normalized_shape) -> list[int]:
    """Leading dims kept, normalized dims as 1: how mean and rstd are viewed on return."""
    axis = input.dim() - len(normalized_shape)
    return list(input.shape[:axis]) + [1] * (input.dim() - axis)


# --8<-- [start:layer_norm_cuda]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L1708-L1759
# docs: upstream/layer_norm_kernel.md#layer_norm_cuda
def layer_norm_cuda(input, normalized_shape, weight_opt, bias_opt, eps: float):
    weight = weight_opt
    bias = bias_opt

    M, N = _check_layer_norm_inputs(input, normalized_shape, weight, bias)
    X = expect_contiguous(input)
    gamma = expect_contiguous(weight)
    beta = expect_contiguous(bias)

    Y = torch.empty_like(X, memory_format=torch.contiguous_format)
    acc_type = toAccumulateType(input.dtype)
    mean = torch.empty((M,), dtype=acc_type, device=X.device)
    rstd = torch.empty((M,), dtype=acc_type, device=X.device)
    # no launch for M == 0: a zero-block grid is a CUDA error
    if M > 0:
        LayerNormKernelImpl(X, gamma, beta, M, N, eps, Y, mean, rstd)
    stat_shape = _stat_shape(input, normalized_shape)
    mean = mean.view(stat_shape)
    rstd = rstd.view(stat_shape)
    return Y, mean, rstd
# --8<-- [end:layer_norm_cuda]


# --8<-- [start:_fused_rms_norm_cuda]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L1837-L1887
# docs: upstream/layer_norm_kernel.md#_fused_rms_norm_cuda
def _fused_rms_norm_cuda(input, normalized_shape, weight_opt, eps):
    weight = weight_opt
    M, N = _check_layer_norm_inputs(input, normalized_shape, weight, weight)
    X = expect_contiguous(input)
    gamma = expect_contiguous(weight)

    acc_type = toAccumulateType(input.dtype)
    # eps=None means the accumulate type's machine epsilon
    if acc_type == torch.float32:
        eps_val = eps if eps is not None else float(torch.finfo(torch.float32).eps)
    else:
        eps_val = eps if eps is not None else float(torch.finfo(torch.float64).eps)

    Y = torch.empty_like(X, memory_format=torch.contiguous_format)
    rstd = torch.empty((M,), dtype=acc_type, device=X.device)

    if M > 0:
        RmsNormKernelImpl(X, gamma, M, N, eps_val, Y, rstd)

    rstd = rstd.view(_stat_shape(input, normalized_shape))
    return Y, rstd
# --8<-- [end:_fused_rms_norm_cuda]
