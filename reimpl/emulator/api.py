"""native_layer_norm / fused_rms_norm on NumPy arrays, through the emulator.

The path is not chosen here: the host mirror (reimpl/mirror/layer_norm_kernel.py) runs on stand-in
tensors (reimpl/mirror/aten_shim.py: shape, dtype, address, no data) of the same shapes, dtypes and
storage offsets under a recording runtime, and each launch it makes (kernel, grid, block, shared
memory, arguments) is replayed on the emulator, pointers mapped back to the NumPy arrays. Stand-ins
rather than CPU torch tensors, with torch installed or not: the emulator needs only NumPy, and its
addresses are the same on every machine. Arrays count as 16-byte aligned (as a fresh CUDA allocation is);
`offsets=(x, weight, bias)` in elements shifts each one as a storage offset would, e.g. (1, 0, 0)
misaligns the input and sends fp32 to the fallback kernels.

dtypes: np.float32, np.float64, np.float16, and bfloat16 as np.uint16 bit patterns (NumPy has
no bfloat16; pass `bf16=True` for clarity or rely on the uint16 dtype). Outputs come back in the
input's storage dtype; mean and rstd in the accumulate type (float32, float64 for double).
"""
from __future__ import annotations

import numpy as np

from . import block, trace
from .fp import BY_NAME, ElementType
from . import layer_norm_kernel as K
from . import layer_norm_backward as BW
from ..mirror.aten_shim import STANDIN_DTYPES, StandInDevice

_DTYPE_NAME = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
               np.dtype(np.float16): "float16", np.dtype(np.uint16): "bfloat16"}
_NP_DTYPE = {v: k for k, v in _DTYPE_NAME.items()}   # a stand-in's dtype name -> the NumPy storage dtype


def _stand_in(device: StandInDevice, a: np.ndarray | None, offset: int):
    """A stand-in tensor with a's shape and dtype at storage offset `offset`: the host mirror reads
    only shapes, dtypes and pointers."""
    if a is None:
        return None
    return device.tensor(a.shape, STANDIN_DTYPES[_DTYPE_NAME[a.dtype]], offset)


def _plan(op: str, x, normalized_shape, weight, bias, eps, offsets):
    from ..device import runtime
    from ..mirror.layer_norm_kernel import _fused_rms_norm_cuda, layer_norm_cuda
    ox, ow, ob = offsets
    dev = StandInDevice()
    tx, tw, tb = _stand_in(dev, x, ox), _stand_in(dev, weight, ow), _stand_in(dev, bias, ob)
    with runtime.use(runtime.RecordingRuntime()) as rt:
        if op == "layer_norm":
            Y, mean, rstd = layer_norm_cuda(tx, list(normalized_shape), tw, tb, eps)
        else:
            Y, rstd = _fused_rms_norm_cuda(tx, list(normalized_shape), tw, eps)
            mean = None
    return rt.calls, (tx, tw, tb), (Y, mean, rstd)


def _replay(calls, arrays: dict, T_by_name) -> None:
    for kernel, launch, args in calls:
        name = kernel.template.name
        T: ElementType = T_by_name(str(kernel.targs[0]))
        trace.set_kernel(str(kernel), launch.block)
        rms_norm = bool(kernel.targs[2])
        ptr = lambda p: None if p == 0 else arrays[p]  # noqa: E731
        if kernel.template.release is not None:
            args = args[1:]  # a later release's leading row count, which its CUDA kernels never read
        if name == "vectorized_layer_norm_kernel":
            N, eps, X, g, b, mean, rstd, Y = args
            fn = lambda blk, *a: K.vectorized_layer_norm_kernel_impl(blk, T, rms_norm, *a)  # noqa: E731
            block.launch(fn, launch.grid, launch.block, launch.shared,
                         N, eps, ptr(X), ptr(g), ptr(b), ptr(mean), ptr(rstd), ptr(Y))
        elif name == "RowwiseMomentsCUDAKernel":
            N, eps, X, mean, rstd = args
            fn = lambda blk, *a: K.RowwiseMomentsCUDAKernel(blk, T, rms_norm, *a)  # noqa: E731
            block.launch(fn, launch.grid, launch.block, launch.shared, N, eps, ptr(X), ptr(mean), ptr(rstd))
        elif name == "LayerNormForwardCUDAKernel":
            N, X, mean, rstd, g, b, Y = args
            fn = lambda blk, *a: K.LayerNormForwardCUDAKernel(blk, T, rms_norm, *a)  # noqa: E731
            block.launch(fn, launch.grid, launch.block, launch.shared,
                         N, ptr(X), ptr(mean), ptr(rstd), ptr(g), ptr(b), ptr(Y))
        elif name in ("layer_norm_grad_input_kernel", "layer_norm_grad_input_kernel_vectorized"):
            BW.replay_grad_input(kernel, launch, args, ptr, T)
        elif name == "GammaBetaBackwardCUDAKernelTemplate":
            BW.replay_gamma_beta(kernel, launch, args, ptr, T)
        else:
            raise NotImplementedError(f"the emulator has no {name} yet")


def _run(op, x, normalized_shape, weight, bias, eps, offsets, bf16):
    x = np.ascontiguousarray(x)  # expect_contiguous
    if bf16 and x.dtype != np.uint16:
        raise TypeError("bf16=True expects np.uint16 bit patterns")
    weight = None if weight is None else np.ascontiguousarray(weight)
    bias = None if bias is None else np.ascontiguousarray(bias)
    calls, (tx, tw, tb), (Y, mean, rstd) = _plan(op, x, normalized_shape, weight, bias, eps, offsets)
    acc = np.float64 if x.dtype == np.float64 else np.float32
    out = np.zeros(x.size, x.dtype)
    mean_np = np.zeros(mean.numel(), acc) if mean is not None else None
    rstd_np = np.zeros(rstd.numel(), acc)
    arrays = {tx.data_ptr(): x.reshape(-1), Y.data_ptr(): out, rstd.data_ptr(): rstd_np}
    if tw is not None:
        arrays[tw.data_ptr()] = weight.reshape(-1)
    if tb is not None:
        arrays[tb.data_ptr()] = bias.reshape(-1)
    if mean is not None:
        arrays[mean.data_ptr()] = mean_np
    _replay(calls, arrays, BY_NAME.__getitem__)
    out = out.reshape(x.shape)
    rstd_np = rstd_np.reshape(tuple(rstd.shape))
    if op == "layer_norm":
        return out, mean_np.reshape(tuple(mean.shape)), rstd_np
    return out, rstd_np


def native_layer_norm(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5,
                      offsets=(0, 0, 0), bf16: bool = False):
    """aten::native_layer_norm -> (out, mean, rstd), as torch computes it on the H100."""
    return _run("layer_norm", x, tuple(normalized_shape), weight, bias, eps, offsets, bf16)


def fused_rms_norm(x, normalized_shape, weight=None, eps: float | None = None,
                   offsets=(0, 0, 0), bf16: bool = False):
    """aten::_fused_rms_norm -> (out, rstd); eps=None is the accumulate type's machine epsilon."""
    return _run("rms_norm", x, tuple(normalized_shape), weight, None, eps, offsets, bf16)


_STORAGE = {"fp32": np.float32, "fp64": np.float64, "fp16": np.float16, "bf16": np.uint16}


def as_storage(a, dtype: str) -> np.ndarray | None:
    """A torch CPU tensor (or raw-bit NumPy array) as the NumPy storage dtype the emulator takes."""
    if a is None:
        return None
    if hasattr(a, "numpy"):
        import torch
        a = a.detach().contiguous()
        a = a.view(torch.int16).numpy() if a.dtype == torch.bfloat16 else a.numpy()
    return np.ascontiguousarray(a).view(_STORAGE[dtype])


def run_case(case, x, w, b):
    """Emulate a reimpl.checks.cases.Case on its inputs (CPU tensors or storage-dtype arrays): the outputs
    in case.output_names order."""
    x = as_storage(x, case.dtype).reshape(case.shape)
    ns = case.normalized_shape
    w = None if w is None else as_storage(w, case.dtype).reshape(ns)
    b = None if b is None else as_storage(b, case.dtype).reshape(ns)
    offsets = (case.x_offset, case.w_offset, case.b_offset)
    if case.op == "layer_norm":
        return native_layer_norm(x, ns, w, b, case.eps, offsets=offsets)
    return fused_rms_norm(x, ns, w, case.eps, offsets=offsets)


# ---- backward ------------------------------------------------------------------------------------
# The same replay: the host mirror's layer_norm_backward_cuda / _fused_rms_norm_backward_cuda run on
# stand-ins; besides the launches, the stand-in device logs every tensor the mirror makes, so that
# those whose results the launches do not write are emulated too: zeros_like (the fill for M == 0)
# and, on the partial GammaBeta path, `dgamma_blocks.sum(0)` (layer_norm_backward.torch_sum0).
def _run_backward(op, dy, x, normalized_shape, mean, rstd, weight, bias, output_mask, offsets, bf16):
    from ..device import runtime
    from ..mirror.layer_norm_kernel import _fused_rms_norm_backward_cuda, layer_norm_backward_cuda
    dy, x = np.ascontiguousarray(dy), np.ascontiguousarray(x)
    if bf16 and x.dtype != np.uint16:
        raise TypeError("bf16=True expects np.uint16 bit patterns")
    weight = None if weight is None else np.ascontiguousarray(weight)
    bias = None if bias is None else np.ascontiguousarray(bias)
    mean = None if mean is None else np.ascontiguousarray(mean)
    rstd = np.ascontiguousarray(rstd)
    o_dy, o_x, o_w, o_b = offsets
    dev = StandInDevice()
    t = dict(dy=_stand_in(dev, dy, o_dy), x=_stand_in(dev, x, o_x), mean=_stand_in(dev, mean, 0),
             rstd=_stand_in(dev, rstd, 0), w=_stand_in(dev, weight, o_w), b=_stand_in(dev, bias, o_b))
    with runtime.use(runtime.RecordingRuntime()) as rt:
        if op == "layer_norm":
            outs = layer_norm_backward_cuda(t["dy"], t["x"], list(normalized_shape), t["mean"], t["rstd"], t["w"],
                                            t["b"], list(output_mask))
        else:
            outs = _fused_rms_norm_backward_cuda(t["dy"], t["x"], list(normalized_shape), t["rstd"], t["w"],
                                                 list(output_mask))
    arrays = {}
    for k, a in dict(dy=dy, x=x, mean=mean, rstd=rstd, w=weight, b=bias).items():
        if a is not None and t[k].numel():
            arrays[t[k].data_ptr()] = a.reshape(-1)
    for _, out, _ in dev.made:    # every tensor the host mirror made starts as zeros (zeros_like: a fill)
        if out.numel():
            arrays[out.data_ptr()] = np.zeros(out.numel(), _NP_DTYPE[out.dtype.name])
    _replay(rt.calls, arrays, BY_NAME.__getitem__)
    for name, out, src in dev.made:     # after the launches, as on the stream
        if name == "sum" and out.numel():
            T = BY_NAME[{"float32": "float", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                         "float64": "double"}[src.dtype.name]]
            arrays[out.data_ptr()][:] = BW.torch_sum0(arrays[src.data_ptr()].reshape(src.shape), T)
    result = []
    for o in outs:
        if o is None:
            result.append(None)
            continue
        dt = _NP_DTYPE[o.dtype.name]
        result.append(arrays[o.data_ptr()].reshape(o.shape) if o.numel() else np.zeros(o.shape, dt))
    return tuple(result)


def native_layer_norm_backward(grad_out, x, normalized_shape, mean, rstd, weight=None, bias=None,
                               output_mask=(True, True, True), offsets=(0, 0, 0, 0), bf16: bool = False):
    """aten::native_layer_norm_backward -> (grad_input, grad_weight, grad_bias), None where output_mask
    is False, as torch computes them on the H100. `offsets=(grad_out, x, weight, bias)` in elements
    (grad_out's and x's alignment choose the grad-input kernel); mean and rstd in the accumulate type.

    Every path is emulated, the partial GammaBeta path (M > 65536, N < 2112) included: its final
    `dgamma_blocks.sum(0)` is torch's reduction kernel, whose order layer_norm_backward.torch_sum0
    reproduces (established bit for bit on the H100, tests/golden/emulator_golden_backward.npz). That path
    with a normalized_shape of more than one dim raises NotImplementedError: torch 2.11's kernel
    writes past its buffer there. Bad input raises torch's exception and message (the host mirror's)."""
    return _run_backward("layer_norm", grad_out, x, tuple(normalized_shape), mean, rstd, weight, bias,
                         tuple(bool(m) for m in output_mask), offsets, bf16)


def fused_rms_norm_backward(grad_out, x, normalized_shape, rstd, weight=None, output_mask=(True, True),
                            offsets=(0, 0, 0), bf16: bool = False):
    """aten::_fused_rms_norm_backward -> (grad_input, grad_weight), None where output_mask is False.
    `offsets=(grad_out, x, weight)` in elements."""
    o_dy, o_x, o_w = offsets
    return _run_backward("rms_norm", grad_out, x, tuple(normalized_shape), None, rstd, weight, None,
                         tuple(bool(m) for m in output_mask), (o_dy, o_x, o_w, 0), bf16)


def backward_args(case, inputs=None):
    """(grad_out, x, mean, rstd, weight, bias) of a BackwardCase on the CPU: its own grad_out, input
    and weights, with mean and rstd from the emulated forward on them, i.e. the bits the GPU's
    forward hands to the backward, the same on every machine (torch's CPU forward may differ).
    `inputs`: (grad_out, x, weight, bias) to take instead of case.make_args("cpu")'s, e.g. their
    torch-free twins from case_inputs.py."""
    if inputs is None:
        dy, x, _, _, w, b = case.make_args("cpu")
    else:
        dy, x, w, b = inputs
    fwd = run_case(case, x, w, b)
    mean, rstd = (fwd[1], fwd[2]) if case.op == "layer_norm" else (None, fwd[1])
    return dy, x, mean, rstd, w, b


def run_backward_case(case, dy, x, mean, rstd, w, b):
    """Emulate a reimpl.checks.cases_backward.BackwardCase on its arguments (case.make_args's order; CPU
    tensors or storage-dtype arrays; mean and rstd in the accumulate type): the outputs in
    case.output_names order, None where the output mask leaves one out."""
    dy = as_storage(dy, case.dtype).reshape(case.shape)
    x = as_storage(x, case.dtype).reshape(case.shape)
    ns = case.normalized_shape
    w = None if w is None else as_storage(w, case.dtype).reshape(ns)
    b = None if b is None else as_storage(b, case.dtype).reshape(ns)

    acc = np.float64 if case.dtype == "fp64" else np.float32

    def stat(a):  # the accumulate type (torch's CPU forward returns Half/BFloat16 statistics)
        if a is None:
            return None
        if hasattr(a, "numpy"):
            a = a.detach().cpu().float().numpy() if acc is np.float32 else a.detach().cpu().double().numpy()
        return np.ascontiguousarray(a, acc)
    mean, rstd = stat(mean), stat(rstd)
    if case.op == "layer_norm":
        return native_layer_norm_backward(dy, x, ns, mean, rstd, w, b, case.output_mask,
                                          offsets=(case.dy_offset, case.x_offset, case.w_offset, case.b_offset))
    return fused_rms_norm_backward(dy, x, ns, rstd, w, case.output_mask,
                                   offsets=(case.dy_offset, case.x_offset, case.w_offset))
