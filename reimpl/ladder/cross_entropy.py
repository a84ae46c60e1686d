"""Cross-entropy over rows of logits, fused with its gradient: the finale of the softmax page. One
kernel (cross_entropy_regs in cuda/softmax.cu) reads each row once into registers, finds m and d
as softmax_online_regs does, writes the row's loss log(d) + m - x[target] and the gradient
(softmax - onehot(target)) * scale in place of the probabilities, which are never stored. Torch's
F.cross_entropy writes log_softmax, reads it back for the loss, and in the backward reads it again
to write the gradient; this reads the logits once and writes the gradient once.

    loss_and_grad(logits, target, ignore_index=-100, reduction="mean") -> (loss, grad)
    cross_entropy(logits, target, ignore_index=-100, reduction="mean") -> loss, with autograd

logits (M, N) float32, float16 or bfloat16; target (M,) int64. Arithmetic in float32; the loss is
float32 as the gradient's scale. Not torch's bits: bounded against a float64 reference
(reimpl/ladder/accuracy.py: cross_entropy_bound). Like Liger-Kernel's, the gradient is computed in
the forward; the backward multiplies it by the incoming gradient only when that is not 1, which
it must read to know (one small device-to-host copy).
"""
from __future__ import annotations

import torch

from .launch import launch, regs_plan, storage_type
from .softmax import aligned, row_kernel

REDUCTIONS = ("mean", "sum")


def _check(logits, target, reduction):
    T = storage_type(logits, "cross_entropy")
    if logits.dim() != 2:
        raise ValueError(f"cross_entropy: logits must be 2-D (rows, classes), got {logits.dim()}-D")
    if target.dim() != 1 or target.shape[0] != logits.shape[0]:
        raise ValueError(f"cross_entropy: target must be 1-D with {logits.shape[0]} entries, got shape "
                         f"{tuple(target.shape)}")
    if target.dtype != torch.int64:
        raise TypeError(f"cross_entropy: target must be int64, not {target.dtype}")
    if target.device != logits.device:
        raise ValueError(f"cross_entropy: target must be on {logits.device}, not {target.device}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"cross_entropy: reduction must be one of {', '.join(REDUCTIONS)}, not {reduction!r}")
    return T


def loss_and_grad(logits, target, ignore_index: int = -100, reduction: str = "mean", plan=None):
    """The loss (a float32 scalar) and its gradient with respect to `logits` (logits' shape and dtype)."""
    T = _check(logits, target, reduction)
    X, t = logits.contiguous(), target.contiguous()
    M, N = X.shape
    plan = plan or regs_plan(N, T.itemsize, aligned(X))
    if plan is None and not aligned(X):  # past what scalar loads hold: an aligned copy takes 16-byte words
        X = X.clone()
        plan = regs_plan(N, T.itemsize, True)
    if plan is None:  # before anything runs on the device
        raise ValueError(f"cross_entropy: logits' rows of {N} classes are longer than the kernel holds")
    counted = (t != ignore_index).sum()
    # 1 / counted rows for a mean (a device scalar: the kernel reads it, the host never waits)
    scale = (1.0 / counted.float() if reduction == "mean" else torch.ones((), device=X.device)).reshape(1)
    grad = torch.empty_like(X)
    rows = torch.empty(M, dtype=torch.float32, device=X.device)
    if M and N:
        grid, block, smem = plan.launch(M)
        kernel, extra = row_kernel(plan, T, "cross_entropy", N)
        launch(kernel, grid, block, smem, X.data_ptr(), t.data_ptr(), grad.data_ptr(), rows.data_ptr(),
               scale.data_ptr(), M, N, int(ignore_index), *extra, cluster=plan.cluster)
    loss = rows.sum() * scale[0] if reduction == "mean" else rows.sum()
    return loss, grad


class CrossEntropy(torch.autograd.Function):
    """loss_and_grad under autograd: the gradient made in the forward, scaled in the backward."""

    @staticmethod
    def forward(ctx, logits, target, ignore_index, reduction):
        loss, grad = loss_and_grad(logits, target, ignore_index, reduction)
        ctx.save_for_backward(grad)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        if not torch.equal(grad_output, torch.ones_like(grad_output)):
            grad = grad * grad_output.to(grad.dtype)
        return grad, None, None, None


def cross_entropy(logits, target, ignore_index: int = -100, reduction: str = "mean"):
    """F.cross_entropy's loss for (M, N) logits and (M,) class indices, differentiable in logits."""
    return CrossEntropy.apply(logits, target, ignore_index, reduction)
