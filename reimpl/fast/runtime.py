"""`FastRuntime`: the runtime that makes reimpl.fast a kernel provider. It runs the mirror's host
code unchanged and, where that code launches torch's `vectorized_layer_norm_kernel` or
`layer_norm_grad_input_kernel_vectorized`, launches ours (forward.py, grad_input.py) with the same
arguments instead. So "which inputs take a fast kernel" has one definition, the mirror's host
dispatch: exactly the inputs torch sends to its vectorized kernels.
"""
from __future__ import annotations

import threading

from ..device import runtime
from ..mirror import kernel_table as K
from . import forward, grad_input

class FastRuntime(runtime.TorchCupyRuntime):
    """TorchCupyRuntime that swaps torch's vectorized forward and grad-input kernels for ours."""

    def __init__(self):
        super().__init__()
        self._tables: dict[int, object] = {}
        self._lock = threading.Lock()
        self.fast_launches = 0  # forward
        self.fast_grad_launches = 0  # dX

    def reciprocals(self, device: int):
        """forward.reciprocal_table() on `device`, made once per device."""
        t = self._tables.get(device)
        if t is None:
            import torch
            with self._lock:
                t = self._tables.get(device)
                if t is None:
                    t = self._tables[device] = torch.from_numpy(forward.reciprocal_table()).to(f"cuda:{device}")
        return t

    def launch(self, kernel, grid, block, shared: int, stream: int, *args) -> None:
        if kernel.template is K.layer_norm_grad_input_kernel_vectorized:
            T, _, rms = kernel.targs
            dY, X, mean, rstd, gamma, dX, N = args
            M = runtime.dim3(grid)[0]  # torch launches one block per row
            fast, fgrid, fblock, fshared = grad_input.plan(T, rms, gamma != 0, M, N)
            self.fast_grad_launches += 1
            self.allow_shared(fast, fshared)
            return super().launch(fast, fgrid, fblock, fshared, stream, *args, M)
        if kernel.template is not K.vectorized_layer_norm_kernel:
            return super().launch(kernel, grid, block, shared, stream, *args)
        T, _, rms = kernel.targs
        N, eps, X, gamma, beta, mean, rstd, Y = args
        if not forward.takes(gamma != 0, beta != 0, rms):
            return super().launch(kernel, grid, block, shared, stream, *args)
        M = runtime.dim3(grid)[0]  # torch launches one block per row
        sms = self.getCurrentDeviceProperties()["multiProcessorCount"]
        fast, fgrid, fblock = forward.plan(T, rms, gamma != 0, beta != 0, M, N, sms)
        table = self.reciprocals(self._get_device())
        self.fast_launches += 1
        super().launch(fast, fgrid, fblock, 0, stream, N, eps, X, gamma, beta, mean, rstd, Y, table.data_ptr(), M)


# The process-wide FastRuntime (its kernels and reciprocal tables are loaded once per device).
fast_runtime = runtime.Shared(FastRuntime)
