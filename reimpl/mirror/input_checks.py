"""Mirror of `_check_layer_norm_inputs` and `_check_rms_norm_inputs_symint` (aten/src/ATen/native/
layer_norm.h, torch 2.11.0): the shape checks every LayerNorm / RMSNorm entry point runs first, and
the M x N view of the input that the LayerNorm one returns.
Messages are torch's, word for word, so a caller sees the same error from us as from torch.
"""
from __future__ import annotations

import math


class TorchCheckError(RuntimeError):
    """What a failed TORCH_CHECK raises in Python (torch surfaces c10::Error as RuntimeError)."""


def TORCH_CHECK(cond: bool, *msg) -> None:
    if not cond:
        raise TorchCheckError("".join(str(m) for m in msg))


def fmt_shape(shape) -> str:
    """c10's printing of an IntArrayRef: [2, 3]."""
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"


# --8<-- [start:_check_layer_norm_inputs]
# upstream: aten/src/ATen/native/layer_norm.h#L52-L102
# docs: upstream/layer_norm.md#_check_layer_norm_inputs
def _check_layer_norm_inputs(input, normalized_shape, weight, bias) -> tuple[int, int]:
    """Validate shapes; return (M, N): M rows (leading dims) of N elements (normalized dims)."""
    normalized_shape = tuple(int(s) for s in normalized_shape)
    normalized_ndim = len(normalized_shape)
    if normalized_ndim < 1:
        TORCH_CHECK(False, "Expected normalized_shape to be at least 1-dimensional, i.e., ",
                    "containing at least one element, but got normalized_shape = ",
                    fmt_shape(normalized_shape))
    # (messages are built only on failure: these checks run on every call)
    if weight is not None and tuple(weight.shape) != normalized_shape:
        TORCH_CHECK(False, "Expected weight to be of same shape as normalized_shape, but got ",
                    "weight of shape ", fmt_shape(weight.shape),
                    " and normalized_shape = ", fmt_shape(normalized_shape))
    if bias is not None and tuple(bias.shape) != normalized_shape:
        TORCH_CHECK(False, "Expected bias to be of same shape as normalized_shape, but got ",
                    "bias of shape ", fmt_shape(bias.shape),
                    " and normalized_shape = ", fmt_shape(normalized_shape))

    input_shape = tuple(input.shape)
    input_ndim = input.dim()

    if input_ndim < normalized_ndim or input_shape[input_ndim - normalized_ndim:] != normalized_shape:
        msg = (f"Given normalized_shape={fmt_shape(normalized_shape)}, expected input with shape [*"
               + "".join(f", {s}" for s in normalized_shape)
               + f"], but got input of size{fmt_shape(input_shape)}")
        TORCH_CHECK(False, msg)

    axis = input_ndim - normalized_ndim
    M = math.prod(input_shape[:axis])
    N = math.prod(input_shape[axis:])
    return M, N
# --8<-- [end:_check_layer_norm_inputs]


# --8<-- [start:_check_rms_norm_inputs_symint]
# upstream: aten/src/ATen/native/layer_norm.h#L15-L50
# docs: upstream/layer_norm.md#_check_rms_norm_inputs_symint
def _check_rms_norm_inputs_symint(input, normalized_shape, weight) -> None:
    """aten::rms_norm's own shape checks, run before it calls _fused_rms_norm."""
    normalized_ndim = len(normalized_shape)
    if normalized_ndim < 1:
        TORCH_CHECK(False, "Expected normalized_shape to be at least 1-dimensional, i.e., ",
                    "containing at least one element, but got normalized_shape = ", fmt_shape(normalized_shape))
    if weight is not None and tuple(weight.shape) != tuple(normalized_shape):
        TORCH_CHECK(False, "Expected weight to be of same shape as normalized_shape, but got ",
                    "weight of shape ", fmt_shape(weight.shape), " and normalized_shape = ",
                    fmt_shape(normalized_shape))
    input_ndim = input.dim()
    if input_ndim < normalized_ndim:
        raise ValueError(f"Input tensor must have at least {normalized_ndim} dimensions, but got {input_ndim}")
    if tuple(input.shape[input_ndim - normalized_ndim:]) != tuple(normalized_shape):
        # c10::Join(", ", ...): no separator after the '*' here, unlike _check_layer_norm_inputs
        TORCH_CHECK(False, f"Given normalized_shape={fmt_shape(normalized_shape)}, expected input with shape [*"
                    + ", ".join(str(s) for s in normalized_shape)
                    + f"], but got input of size{fmt_shape(input.shape)}")
# --8<-- [end:_check_rms_norm_inputs_symint]
