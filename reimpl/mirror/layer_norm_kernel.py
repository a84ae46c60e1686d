"""Host half of the mirror of aten/src/ATen/native/cuda/layer_norm_kernel.cu (torch 2.11.0):
dispatch, path choice and launch configuration, in upstream's names and order.

Python stands in for C++ here: template parameters (T, T_ACC, rms_norm, and the GammaBeta tile
sizes) come first as ordinary arguments; the forward's `Tensor*` out-parameters are tensors we
write into, the backward's are `TensorRef`s (upstream assigns through them); an undefined Tensor
is None and a null pointer is 0. Tensors are torch's, or the CPU emulator's stand-ins: the at::
calls go through aten_shim.py, so this module needs no torch. Every kernel launch is one
`rt.launch(kernel, blocks, threads, nshared, stream, *args)` line, the
<<<blocks, threads, nshared, stream>>>(args) of upstream.
"""
from __future__ import annotations

from ..device import runtime
from .aten_shim import (TensorRef, _cast_acc, _dispatch, data_ptr, empty, empty_like, expect_contiguous,
                        numeric_limits_epsilon, scalar_type_name, toAccumulateType, zeros_like)
from . import release
from .kernel_table import (BFloat16, GammaBetaBackwardCUDAKernelTemplate, Half, LayerNormForwardCUDAKernel,
                           LayerNormForwardCUDAKernel_2_14, RowwiseMomentsCUDAKernel, RowwiseMomentsCUDAKernel_2_14,
                           double, float_, layer_norm_grad_input_kernel, layer_norm_grad_input_kernel_vectorized,
                           sizeof, vectorized_layer_norm_kernel)
from .input_checks import TORCH_CHECK, _check_layer_norm_inputs

# --8<-- [start:kCUDANumThreads]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L35-L35
# docs: upstream/layer_norm_kernel.md#kCUDANumThreads
kCUDANumThreads = 256  # block size of LayerNormForwardCUDAKernel
# --8<-- [end:kCUDANumThreads]

# Constants that upstream takes from headers (mirrored in reimpl/mirror/cuda/ for the device side).
vec_size = 4                         # layer_norm_kernel.cu
kCUDABlockReduceNumThreads = 512     # block_reduce.cuh
C10_WARP_SIZE = 32


INT_MAX = 2**31 - 1


def _expected_true(cond: str) -> str:
    """What a TORCH_CHECK without a message says."""
    return (f"Expected {cond} to be true, but got false.  (Could this error message be improved?  "
            "If so, please report an enhancement request to PyTorch.)")


def num_threads() -> int:
    """thread_constants.h: C10_WARP_SIZE * 4."""
    return C10_WARP_SIZE * 4


# --8<-- [start:can_vectorize]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L51-L55
# docs: upstream/layer_norm_kernel.md#can_vectorize
def can_vectorize(ptr: int, alignment: int) -> bool:
    return ptr % alignment == 0
# --8<-- [end:can_vectorize]


# --8<-- [start:LaunchAndCheckGammaBetaBackwardKernel]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L869-L912
# docs: upstream/layer_norm_kernel.md#LaunchAndCheckGammaBetaBackwardKernel
# aligned_grid, a run-time bool here, picks the template instantiation that skips bound checks.
# (C10_CUDA_KERNEL_LAUNCH_CHECK: the runtime raises if the launch fails.)
def LaunchAndCheckGammaBetaBackwardKernel(T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y,
                                          partial_reduction, rms_norm,
                                          aligned_grid, blocks, threads, shmem_sz, cuda_stream,
                                          dY_data, X_data, mean_data, rstd_data, M, N,
                                          dgamma_data, dbeta_data) -> None:
    rt = runtime.get()
    if aligned_grid:
        rt.launch(GammaBetaBackwardCUDAKernelTemplate[T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y,
                                                      partial_reduction, True, rms_norm],
                  blocks, threads, shmem_sz, cuda_stream,
                  M, N, dY_data, X_data, mean_data, rstd_data, dgamma_data, dbeta_data)
    else:
        rt.launch(GammaBetaBackwardCUDAKernelTemplate[T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y,
                                                      partial_reduction, False, rms_norm],
                  blocks, threads, shmem_sz, cuda_stream,
                  M, N, dY_data, X_data, mean_data, rstd_data, dgamma_data, dbeta_data)
# --8<-- [end:LaunchAndCheckGammaBetaBackwardKernel]


# --8<-- [start:ConfigureAndLaunchGammaBetaBackwardKernel]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L914-L946
# docs: upstream/layer_norm_kernel.md#ConfigureAndLaunchGammaBetaBackwardKernel
def ConfigureAndLaunchGammaBetaBackwardKernel(T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y, rms_norm,
                                              dY_data, X_data, mean_data, rstd_data, M, N,
                                              dgamma, dbeta, cuda_stream) -> None:
    dgamma_data = data_ptr(dgamma.t, T) if dgamma.defined() else 0
    dbeta_data = data_ptr(dbeta.t, T) if dbeta.defined() else 0
    aligned_grid = (M % rows_per_block_y == 0) and (N % block_dim_x == 0)
    threads = (block_dim_x, block_dim_y, 1)
    blocks = ((N + block_dim_x - 1) // block_dim_x, 1, 1)  # one block per 32 columns; blocks.y = 1
    # two transposed (block_dim_x + 1) x block_dim_y tiles, for dg and db
    shmem_sz = (block_dim_x + 1) * block_dim_y * sizeof(T_ACC) * 2
    if blocks[1] == 1 and threads[1] == 1:
        # one thread per column already holds the whole column sum: nothing to reduce across threads
        LaunchAndCheckGammaBetaBackwardKernel(T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y, True, rms_norm,
                                              aligned_grid, blocks, threads, shmem_sz, cuda_stream,
                                              dY_data, X_data, mean_data, rstd_data, M, N, dgamma_data, dbeta_data)
    else:
        LaunchAndCheckGammaBetaBackwardKernel(T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y, False, rms_norm,
                                              aligned_grid, blocks, threads, shmem_sz, cuda_stream,
                                              dY_data, X_data, mean_data, rstd_data, M, N, dgamma_data, dbeta_data)
# --8<-- [end:ConfigureAndLaunchGammaBetaBackwardKernel]


# --8<-- [start:LaunchGammaBetaBackwardCUDAKernel]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L948-L1017
# docs: upstream/layer_norm_kernel.md#LaunchGammaBetaBackwardCUDAKernel
def LaunchGammaBetaBackwardCUDAKernel(T, T_ACC, rms_norm,
                                      dY_data, X_data, mean_data, rstd_data, M, N,
                                      dgamma, dbeta, cuda_stream) -> None:
    block_dim_x = 32
    sm_count = runtime.get().getCurrentDeviceProperties()["multiProcessorCount"]
    if M > 64 * 1024 and N // block_dim_x < sm_count // 2:
        # Tall and narrow: too few column blocks to fill the GPU, so split M across blocks.y as
        # well; each thread row writes a partial sum and torch's .sum(0) adds them up.
        block_dim_y = 1
        rows_per_block_y = 32
        aligned_grid = (M % rows_per_block_y == 0) and (N % block_dim_x == 0)
        threads = (block_dim_x, block_dim_y, 1)
        blocks_x = (N + block_dim_x - 1) // block_dim_x
        blocks_y = (M + rows_per_block_y - 1) // rows_per_block_y
        max_grid_size = 64 * 1024 // 2
        blocks_y = min(max_grid_size // blocks_x, blocks_y)  # the kernel grid-strides over the rest of M
        blocks = (blocks_x, blocks_y, 1)
        dgamma_blocks = None
        dbeta_blocks = None
        dgamma_blocks_ptr = 0
        dbeta_blocks_ptr = 0
        # differs from 2.11 under release.use(>= 2.14): each buffer N wide, from its own gradient
        per_tensor = release.at_least(release.HUGE_M_BUFFERS_PER_TENSOR)
        if dgamma.defined():
            # size(-1) is N only for a 1-D normalized_shape (as upstream)
            dgamma_blocks = empty((blocks_y * threads[1], N if per_tensor else dgamma.size(-1)),
                                  dtype=dgamma.t.dtype, device=dgamma.t.device)
            dgamma_blocks_ptr = data_ptr(dgamma_blocks, T)
        if dbeta.defined() and not rms_norm:
            # upstream sizes dbeta's buffer from dgamma: with dgamma not requested that is 0 columns,
            # so the kernel gets a null db and .sum(0) returns an empty dbeta (torch 2.11 does this)
            dbeta_blocks = empty((blocks_y * threads[1], N if per_tensor else dgamma.size(-1)),
                                 dtype=dbeta.t.dtype, device=dbeta.t.device)
            dbeta_blocks_ptr = data_ptr(dbeta_blocks, T)
        LaunchAndCheckGammaBetaBackwardKernel(T, T_ACC, block_dim_x, block_dim_y, rows_per_block_y, True, rms_norm,
                                              aligned_grid, blocks, threads, 0, cuda_stream,
                                              dY_data, X_data, mean_data, rstd_data, M, N,
                                              dgamma_blocks_ptr, dbeta_blocks_ptr)

        # the second pass is torch's own reduction kernel, as upstream
        if dgamma_blocks is not None:
            dgamma.t = dgamma_blocks.sum(0).view(dgamma.t.shape) if per_tensor else dgamma_blocks.sum(0)
        if not rms_norm:
            if dbeta_blocks is not None:
                dbeta.t = dbeta_blocks.sum(0).view(dbeta.t.shape) if per_tensor else dbeta_blocks.sum(0)
    else:
        # Smaller tiles for small M, so that fewer threads idle; the block covers
        # rows_per_block_y rows with block_dim_y thread rows of 8 (or, for <32, 1, 8>, one row of 8).
        if M < 64:
            ConfigureAndLaunchGammaBetaBackwardKernel(T, T_ACC, block_dim_x, 1, 8, rms_norm,
                                                      dY_data, X_data, mean_data, rstd_data, M, N,
                                                      dgamma, dbeta, cuda_stream)
        elif M < 128:
            ConfigureAndLaunchGammaBetaBackwardKernel(T, T_ACC, block_dim_x, 8, 64, rms_norm,
                                                      dY_data, X_data, mean_data, rstd_data, M, N,
                                                      dgamma, dbeta, cuda_stream)
        elif M < 256:
            ConfigureAndLaunchGammaBetaBackwardKernel(T, T_ACC, block_dim_x, 16, 128, rms_norm,
                                                      dY_data, X_data, mean_data, rstd_data, M, N,
                                                      dgamma, dbeta, cuda_stream)
        else:
            ConfigureAndLaunchGammaBetaBackwardKernel(T, T_ACC, block_dim_x, 32, 256, rms_norm,
                                                      dY_data, X_data, mean_data, rstd_data, M, N,
                                                      dgamma, dbeta, cuda_stream)
# --8<-- [end:LaunchGammaBetaBackwardCUDAKernel]


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
        if release.at_least(release.FALLBACK_FORWARD_TAKES_M):  # differs from 2.11: 2.14's leading M
            rt.launch(RowwiseMomentsCUDAKernel_2_14[T, T_ACC, rms_norm], M, kCUDABlockReduceNumThreads, 0,
                      cuda_stream, M, N, eps, X_data, mean_data, rstd_data)
            rt.launch(LayerNormForwardCUDAKernel_2_14[T, T_ACC, rms_norm], M, kCUDANumThreads, 0, cuda_stream,
                      M, N, X_data, mean_data, rstd_data, gamma_data, beta_data, Y_data)
        else:
            rt.launch(RowwiseMomentsCUDAKernel[T, T_ACC, rms_norm], M, kCUDABlockReduceNumThreads, 0, cuda_stream,
                      N, eps, X_data, mean_data, rstd_data)
            rt.launch(LayerNormForwardCUDAKernel[T, T_ACC, rms_norm], M, kCUDANumThreads, 0, cuda_stream,
                      N, X_data, mean_data, rstd_data, gamma_data, beta_data, Y_data)
# --8<-- [end:LayerNormKernelImplInternal]


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


# (upstream L1177-L1518 hold ROCm-only kernels, cuLoadWriteStridedInputs, cuComputePartGradGammaBeta,
# cuComputeGradGammaBeta and cuComputeGradInput; CUDA builds never launch them.)

# --8<-- [start:LayerNormBackwardKernelImplInternal]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L1520-L1661
# docs: upstream/layer_norm_kernel.md#LayerNormBackwardKernelImplInternal
# CUDA branch only (the ROCm branches are left out). dX, dgamma, dbeta are TensorRefs.
def LayerNormBackwardKernelImplInternal(T, T_ACC, rms_norm,
                                        dY, X, mean, rstd, gamma, M, N, dX, dgamma, dbeta) -> None:
    rt = runtime.get()
    TORCH_CHECK(dY.numel() == M * N, _expected_true("dY.numel() == M * N"))
    if not rms_norm:
        TORCH_CHECK(mean.numel() == M, _expected_true("mean.numel() == M"))
    TORCH_CHECK(rstd.numel() == M, _expected_true("rstd.numel() == M"))
    TORCH_CHECK(M <= rt.getCurrentDeviceProperties()["maxGridSize"][0],
                "M should be less than maximum CUDA grid size,   file a support request to support bigger batches")
    TORCH_CHECK(N <= INT_MAX, "Normalized shape should have less than INT_MAX elements,   "
                "file a support request to support bigger normalized shapes")
    dY_data = data_ptr(dY, T)
    X_data = data_ptr(X, T)
    mean_data = data_ptr(mean, T_ACC)
    rstd_data = data_ptr(rstd, T_ACC)
    gamma_data = data_ptr(gamma, T) if gamma is not None else 0
    dX_data = data_ptr(dX.t, T) if dX.defined() else 0
    cuda_stream = rt.getCurrentCUDAStream()
    warp_size = rt.warp_size()
    if dX_data != 0:
        blocks = (M, 1, 1)  # one block of num_threads() per row
        nshared = (num_threads() // warp_size) * sizeof(T_ACC)  # BlockReduceSum: one T_ACC per warp

        bVectorSizeMultiple = (N % vec_size == 0)
        bTargetDataTypes = T in (float_, Half, BFloat16)
        alignment = sizeof(T) * vec_size
        bAlignedBuffers = (can_vectorize(dY_data, alignment) and can_vectorize(X_data, alignment)
                           and can_vectorize(gamma_data, alignment) and can_vectorize(dX_data, alignment))
        if bAlignedBuffers and bTargetDataTypes and bVectorSizeMultiple:
            rt.launch(layer_norm_grad_input_kernel_vectorized[T, T_ACC, rms_norm], blocks, num_threads(), nshared,
                      cuda_stream, dY_data, X_data, mean_data, rstd_data, gamma_data, dX_data, N)
        else:
            rt.launch(layer_norm_grad_input_kernel[T, T_ACC, rms_norm], blocks, num_threads(), nshared,
                      cuda_stream, dY_data, X_data, mean_data, rstd_data, gamma_data, dX_data, N)

    if dgamma.defined() or dbeta.defined():
        # (these two pointers feed only upstream's ROCm branch; taken for the same dtype checks)
        dgamma_data = data_ptr(dgamma.t, T) if dgamma.defined() else 0  # noqa: F841
        dbeta_data = data_ptr(dbeta.t, T) if dbeta.defined() else 0  # noqa: F841

        LaunchGammaBetaBackwardCUDAKernel(T, T_ACC, rms_norm,
                                          dY_data, X_data, mean_data, rstd_data, M, N, dgamma, dbeta, cuda_stream)
# --8<-- [end:LayerNormBackwardKernelImplInternal]


# --8<-- [start:LayerNormBackwardKernelImpl]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L1663-L1683
# docs: upstream/layer_norm_kernel.md#LayerNormBackwardKernelImpl
def LayerNormBackwardKernelImpl(dY, X, mean, rstd, gamma, M, N, dX, dgamma, dbeta) -> None:
    scalar_t, acc_t = _dispatch(X, "LayerNormBackwardKernelImpl")
    # dY may arrive non-contiguous from autograd: torch's copy kernel makes it contiguous
    LayerNormBackwardKernelImplInternal(scalar_t, acc_t, False,
                                        dY.contiguous(), X, mean, rstd, gamma, M, N, dX, dgamma, dbeta)
# --8<-- [end:LayerNormBackwardKernelImpl]


# --8<-- [start:RMSNormBackwardKernelImpl]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L1685-L1703
# docs: upstream/layer_norm_kernel.md#RMSNormBackwardKernelImpl
def RMSNormBackwardKernelImpl(dY, X, rstd, gamma, M, N, dX, dgamma) -> None:
    scalar_t, acc_t = _dispatch(X, "LayerNormBackwardKernelImpl")  # upstream reuses LayerNorm's name
    # rstd stands in for mean and dgamma for dbeta: with rms_norm=true neither is read or written
    LayerNormBackwardKernelImplInternal(scalar_t, acc_t, True,
                                        dY.contiguous(), X, rstd, rstd, gamma, M, N, dX, dgamma, dgamma)
# --8<-- [end:RMSNormBackwardKernelImpl]


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

    Y = empty_like(X)
    acc_type = toAccumulateType(input.dtype)
    mean = empty((M,), dtype=acc_type, device=X.device)
    rstd = empty((M,), dtype=acc_type, device=X.device)
    # no launch for M == 0: a zero-block grid is a CUDA error
    if M > 0:
        LayerNormKernelImpl(X, gamma, beta, M, N, eps, Y, mean, rstd)
    stat_shape = _stat_shape(input, normalized_shape)
    mean = mean.view(stat_shape)
    rstd = rstd.view(stat_shape)
    return Y, mean, rstd
# --8<-- [end:layer_norm_cuda]


# --8<-- [start:layer_norm_backward_cuda]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L1761-L1834
# docs: upstream/layer_norm_kernel.md#layer_norm_backward_cuda
def layer_norm_backward_cuda(dY, input, normalized_shape, mean, rstd, weight_opt, bias_opt, grad_input_mask):
    weight = weight_opt
    bias = bias_opt

    M, N = _check_layer_norm_inputs(input, normalized_shape, weight, bias)
    X = expect_contiguous(input)
    gamma = expect_contiguous(weight)
    beta = expect_contiguous(bias)

    dX = TensorRef()
    dgamma = TensorRef()
    dbeta = TensorRef()
    if grad_input_mask[0]:
        dX.t = empty_like(X)
    # with no rows the sums are empty: zeros, written by torch's fill kernel
    if grad_input_mask[1]:
        dgamma.t = empty_like(gamma) if M > 0 else zeros_like(gamma)
    if grad_input_mask[2]:
        dbeta.t = empty_like(beta) if M > 0 else zeros_like(beta)
    if M > 0 and N > 0:
        LayerNormBackwardKernelImpl(dY, X, mean, rstd, gamma, M, N, dX, dgamma, dbeta)
    return dX.t, dgamma.t, dbeta.t
# --8<-- [end:layer_norm_backward_cuda]


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
    if scalar_type_name(acc_type) == "Float":  # by name: torch's dtypes and the emulator's stand-ins alike
        eps_val = eps if eps is not None else numeric_limits_epsilon(float_)
    else:
        eps_val = eps if eps is not None else numeric_limits_epsilon(double)

    Y = empty_like(X)
    rstd = empty((M,), dtype=acc_type, device=X.device)

    if M > 0:
        RmsNormKernelImpl(X, gamma, M, N, eps_val, Y, rstd)

    rstd = rstd.view(_stat_shape(input, normalized_shape))
    return Y, rstd
# --8<-- [end:_fused_rms_norm_cuda]


# --8<-- [start:_fused_rms_norm_backward_cuda]
# upstream: aten/src/ATen/native/cuda/layer_norm_kernel.cu#L1890-L1941
# docs: upstream/layer_norm_kernel.md#_fused_rms_norm_backward_cuda
def _fused_rms_norm_backward_cuda(dY, input, normalized_shape, rstd, weight_opt, grad_input_mask):
    weight = weight_opt

    M, N = _check_layer_norm_inputs(input, normalized_shape, weight, weight)
    X = expect_contiguous(input)
    gamma = expect_contiguous(weight)

    dX = TensorRef()
    dgamma = TensorRef()
    if grad_input_mask[0]:
        dX.t = empty_like(X)
    if grad_input_mask[1]:
        dgamma.t = empty_like(gamma) if M > 0 else zeros_like(gamma)

    if M > 0 and N > 0:
        RMSNormBackwardKernelImpl(dY, X, rstd, gamma, M, N, dX, dgamma)
    return dX.t, dgamma.t
# --8<-- [end:_fused_rms_norm_backward_cuda]
