"""BatchNorm, LayerNorm's sibling that reduces over the batch: for each channel c of an (N, C, *)
input, the mean and variance of the N * prod(*) values x[:, c, ...], then every one of those values
is normalised with them. Three implementations, each checked against torch.nn.BatchNorm1d/2d
(tests/test_siblings_cpu.py on the CPU, tests/gpu/test_siblings_gpu.py on the GPU):

- `batch_norm(...)`: torch.nn.functional.batch_norm's contract in plain torch ops. Training:
  normalise with the batch mean and the biased variance; move the running mean and the running
  *unbiased* variance by `momentum`. Evaluation: normalise with the running statistics.
- `batch_norm_train_forward(...)`: the training forward as one CUDA kernel of ours
  (cuda/batchnorm.cu, one block per channel, Welford and Chan as in the LayerNorm ladder; its
  entry is `bn_kernel` in registry.py).
- batchnorm_split.py: the training forward and backward with each channel's reduction split over
  many blocks (entry `bn_split`).

`BatchNorm1d` / `BatchNorm2d` are modules with torch's parameters, buffers (num_batches_tracked
included), state_dict keys, input checks and messages; `kernel=True` trains through the split
kernels on CUDA input (forward and backward), `kernel="bn_kernel"` runs the training forward through
the one-block-per-channel kernel (no backward). Arithmetic is float32 whatever the storage type
(fp32, fp16, bf16), as torch's CUDA kernels do.
"""
from __future__ import annotations

import torch

from ..device.kernel_types import KernelTemplate, float_
from . import registry
from .launch import STORAGE, cuda_source, launch, storage_type

BLOCK = 512  # threads per channel: 16 warps, merged through block_merge's shared-memory tree
_PARAMS = ("ptr",) * 8 + ("int64",) * 3 + ("T_ACC", "T_ACC")


def _instantiations() -> list:
    # parameters and running statistics in the input's type, or float32 with 16-bit input (torch's
    # mixed case: a float32 module applied to half or bfloat16 activations)
    return [TEMPLATE[T, float_, P] for T in STORAGE.values() for P in dict.fromkeys((T, float_))]


SOURCE = cuda_source(registry.BY_NAME["bn_kernel"].source, lambda: _instantiations())
TEMPLATE = KernelTemplate("bn_train_forward", _PARAMS, SOURCE, "ladder")


def verify_batch_size(size) -> None:
    """torch's check (F.batch_norm's _verify_batch_size), with its message: training needs more than
    one value per channel, or the unbiased variance would divide by zero."""
    values = size[0]
    for d in size[2:]:
        values *= d
    if values == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")


def _kernel_entry(kernel):
    """batch_norm's `kernel`: False (torch ops), True (the split kernels, `bn_split`) or the name of
    a batchnorm entry of registry.py. Its launcher is imported through the registry, since
    batchnorm_split.py imports this module."""
    if not kernel:
        return None
    entry = registry.BY_NAME.get("bn_split" if kernel is True else kernel)
    if entry is None or entry.group != "batchnorm":
        raise ValueError(f"batch_norm: kernel must be True, False or a batchnorm entry's name, not {kernel!r}")
    return entry


# --8<-- [start:batch_norm]
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5, kernel: bool | str = False):
    """F.batch_norm in torch ops, or, on CUDA in training, our kernels: kernel=True the split ones
    (`bn_split`, with their backward), or a batchnorm entry of registry.py by name. Updates
    running_mean / running_var in place when training and they are given."""
    entry = _kernel_entry(kernel)
    if input.dim() < 2:
        raise ValueError(f"batch_norm: input must have at least 2 dims (N, C, ...), got {input.dim()}")
    if training:
        verify_batch_size(input.size())
    elif running_mean is None or running_var is None:
        raise ValueError("batch_norm: running_mean and running_var must be given in evaluation mode")
    if training and entry is not None and input.is_cuda:
        return entry.launch_fn()(input, weight, bias, running_mean, running_var, momentum, eps)[0]
    C = input.shape[1]
    shape = (1, C) + (1,) * (input.dim() - 2)
    x = input.float()  # float32 arithmetic for 16-bit storage, as torch's kernels
    if training:
        dims = [0] + list(range(2, input.dim()))
        mean = x.mean(dims)
        var = x.var(dims, correction=0)  # biased: the variance that normalises
        if running_mean is not None:
            with torch.no_grad():
                unbiased = x.var(dims, correction=1)  # what the running estimate tracks
                running_mean.copy_((1 - momentum) * running_mean.float() + momentum * mean)
                running_var.copy_((1 - momentum) * running_var.float() + momentum * unbiased)
    else:
        mean, var = running_mean.float(), running_var.float()
    y = (x - mean.view(shape)) * torch.rsqrt(var + eps).view(shape)
    if weight is not None:
        y = y * weight.float().view(shape)
    if bias is not None:
        y = y + bias.float().view(shape)
    return y.to(input.dtype)
# --8<-- [end:batch_norm]


def check_train_inputs(x, weight, bias, running_mean, running_var, who: str):
    """The training launchers' checks (this kernel's and the split kernels'), all before any launch:
    x's type and rank, more than one value per channel, running statistics both or neither, and
    parameters of one type (x's or float32), C long, contiguous, on x's device. Returns the storage
    types (of x, of the parameters) as the kernels spell them; messages start with `who`."""
    T = storage_type(x, who)
    if x.dim() < 2:
        raise ValueError(f"{who}: x must have at least 2 dims (N, C, ...), got {x.dim()}")
    verify_batch_size(x.size())
    C = x.shape[1]
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{who}: give both running_mean and running_var, or neither")
    given = {k: t for k, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                               ("running_var", running_var)) if t is not None}
    P = next(iter(given.values())).dtype if given else x.dtype
    if P not in (x.dtype, torch.float32):
        raise TypeError(f"{who}: parameters must be {x.dtype} or float32, not {P}")
    for name, t in given.items():
        if t.shape != (C,) or t.dtype != P or t.device != x.device or not t.is_contiguous():
            raise ValueError(f"{who}: {name} must be a contiguous {P} vector of {C} "
                             f"on {x.device}, like the other parameters")
    return T, STORAGE[str(P).removeprefix("torch.")]


def batch_norm_train_forward(x, weight=None, bias=None, running_mean=None, running_var=None,
                             momentum: float = 0.1, eps: float = 1e-5):
    """Our kernel's training forward on torch CUDA tensors: (y, save_mean, save_invstd), y like x
    (contiguous), the saved statistics C float32 values; running_mean / running_var (both or
    neither) are updated in place. Checks everything before any launch."""
    T, P = check_train_inputs(x, weight, bias, running_mean, running_var, "batch_norm_train_forward")
    C = x.shape[1]
    X = x.contiguous()
    N = X.shape[0]
    HW = X.numel() // (N * C) if N * C else 0
    Y = torch.empty_like(X)
    save_mean = torch.empty(C, dtype=torch.float32, device=x.device)
    save_invstd = torch.empty_like(save_mean)
    if N * HW and C:
        kernel = TEMPLATE[T, float_, P]
        ptrs = [t.data_ptr() if t is not None else 0 for t in (X, weight, bias)]
        launch(kernel, (C,), (BLOCK,), 0, *ptrs, Y.data_ptr(), save_mean.data_ptr(), save_invstd.data_ptr(),
               *(t.data_ptr() if t is not None else 0 for t in (running_mean, running_var)),
               N, C, HW, float(momentum), float(eps))
    return Y, save_mean, save_invstd


class _BatchNorm(torch.nn.Module):
    """torch.nn's _BatchNorm, in our words: the same parameters, buffers and state_dict keys, so a
    torch module's state loads into ours and back."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, kernel: bool | str = False):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats, self.kernel = affine, track_running_stats, kernel
        if affine:
            self.weight = torch.nn.Parameter(torch.ones(num_features, **kw))
            self.bias = torch.nn.Parameter(torch.zeros(num_features, **kw))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **kw))
            self.register_buffer("running_var", torch.ones(num_features, **kw))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def _check_input_dim(self, x) -> None:
        raise NotImplementedError

    def forward(self, x):
        self._check_input_dim(x)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            # counted before the batch-size check, as torch does: a refused batch still counts
            self.num_batches_tracked.add_(1)
            # momentum None: the cumulative average, each batch weighing 1 / (batches so far)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        # batch statistics in training, and in evaluation when there are no running ones
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return batch_norm(x, self.running_mean if keep else None, self.running_var if keep else None,
                          self.weight, self.bias, bn_training, factor, self.eps, kernel=self.kernel)


class BatchNorm1d(_BatchNorm):
    def _check_input_dim(self, x) -> None:
        if x.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {x.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    def _check_input_dim(self, x) -> None:
        if x.dim() != 4:
            raise ValueError(f"expected 4D input (got {x.dim()}D input)")
