"""`FastRuntime`: the runtime that makes reimpl.fast a kernel provider. It runs the mirror's host
code unchanged and, where that code launches torch's `vectorized_layer_norm_kernel` or
`layer_norm_grad_input_kernel_vectorized`, launches ours (forward.py, grad_input.py) with the same
arguments instead. So "which inputs take a fast kernel" has one definition, the mirror's host
dispatch: exactly the inputs torch sends to its vectorized kernels. With the fused backward route on
(backward.py), the grad-input launch becomes the fused kernel and the GammaBeta launch that follows it
on the same tensors becomes the finish of the chains that kernel left in the stream's scratch buffer;
a GammaBeta launch after a dX kernel of its own becomes the chains kernel and the finish (backward.py).

The choice is `swap`, a function of the launch and the device's SM count and shared memory.
A call's first run records the swapped launches in its launch plan (reimpl/device/replay.py), so
later calls of the same signature replay our kernels directly, with no choice made again.
"""
from __future__ import annotations

import threading

from ..device import runtime
from ..device.replay import StreamScratch
from ..mirror import kernel_table as K
from . import backward, forward, grad_input


def swap(kernel, grid, block, shared: int, args: tuple, sms: int, chains=None,
         shared_per_sm: int = forward.SHARED_PER_SM):
    """(kernel, grid, block, shared, args) that reimpl.fast launches where the host code asked for
    `kernel`: ours in place of torch's vectorized forward and grad-input kernels, anything else
    unchanged. `chains(nbytes)`, where given, is the address of a scratch buffer for the fused
    backward's chains;
    `shared_per_sm` is the device's shared memory per SM (the forward stream kernel's stash)."""
    if kernel.template is K.layer_norm_grad_input_kernel_vectorized:
        T, _, rms = kernel.targs
        dY, X, mean, rstd, gamma, dX, N = args
        M = runtime.dim3(grid)[0]  # torch launches one block per row
        fused = backward.plan(T, rms, gamma != 0, M, N, sms) if chains is not None else None
        if fused is not None:
            return fused.kernel, fused.grid, fused.block, fused.shared, (*args, M, fused.Y,
                                                                         chains(fused.chains_bytes(N)))
        fast, fgrid, fblock, fshared = grad_input.plan(T, rms, gamma != 0, M, N)
        return fast, fgrid, fblock, fshared, (*args, M, int(grad_input.ROWS_FROM_LAST))
    if kernel.template is K.vectorized_layer_norm_kernel:
        T, _, rms = kernel.targs
        N, eps, X, gamma, beta, mean, rstd, Y = args
        if forward.takes(gamma != 0, beta != 0, rms):
            M = runtime.dim3(grid)[0]
            aligned16 = (X | gamma | beta | Y) & 15 == 0  # the lane kernel copies 16-byte chunks
            fast, fgrid, fblock, fshared = forward.plan(T, rms, gamma != 0, beta != 0, M, N, sms, shared_per_sm,
                                                        aligned16)
            return fast, fgrid, fblock, fshared, (*args, M)
    return kernel, grid, block, shared, args


FORWARD_TEMPLATES = (forward.TEMPLATE, forward.WARP_TEMPLATE, forward.GROUP_TEMPLATE, forward.STREAM_TEMPLATE,
                     forward.LANE_TEMPLATE)
GRAD_TEMPLATES = (grad_input.TEMPLATE, grad_input.WARP_TEMPLATE, backward.FUSED_TEMPLATE)


class FastRuntime(runtime.TorchCupyRuntime):
    """TorchCupyRuntime that swaps torch's vectorized forward and grad-input kernels for ours."""

    binds_directly = True  # launch() passes our own kernels on unchanged, so a plan's launcher may skip it

    def __init__(self):
        super().__init__()
        self._pending = threading.local()  # per host thread: the fused launch whose chains await their finish

    # launches of our kernels, replays included: launch_counts' slots (counter)
    fast_launches = property(lambda self: self.launch_counts[1])  # forward
    fast_grad_launches = property(lambda self: self.launch_counts[2] + self.launch_counts[3])  # dX, fused included
    fused_launches = property(lambda self: self.launch_counts[3])  # the fused backward kernel
    finish_launches = property(lambda self: self.launch_counts[4])  # the chains' finish (after either kernel)
    chains_launches = property(lambda self: self.launch_counts[5])  # the chains kernel, in place of GammaBeta

    def resolve(self, kernel, grid, block, shared: int, args: tuple) -> list:
        """The launches made in place of one the host code asked for, on the current device: `swap`'s
        one (the replay recorder calls this to write down what runs). A GammaBeta launch becomes
        the finish of the fused launch right before it, on the same tensors; else, where
        backward.gamma_beta_launches takes it, the chains kernel and the finish."""
        pending, self._pending.launch = getattr(self._pending, "launch", None), None
        device = self._get_device()
        properties = self.getCurrentDeviceProperties()
        sms = properties["multiProcessorCount"]

        def chains(nbytes):
            return StreamScratch(device, self.getCurrentCUDAStream(), nbytes)
        if kernel.template is K.GammaBetaBackwardCUDAKernelTemplate:
            launches = None
            if pending is not None:
                finish = backward.finish_launch(*pending, kernel, args)
                launches = None if finish is None else [finish]
            if launches is None:
                launches = backward.gamma_beta_launches(kernel, grid, args, sms, chains)
            if launches is not None:
                for launch in launches:
                    self._count(launch[0])
                return launches
        fast = swap(kernel, grid, block, shared, args, sms, chains,
                    properties.get("sharedMemPerMultiprocessor", forward.SHARED_PER_SM))
        if fast[0].template is backward.FUSED_TEMPLATE:
            self._pending.launch = (fast[0], fast[4])
        if fast[0] is not kernel:  # counted where the choice is made; a plan's launcher counts its replays
            self._count(fast[0])
            self.allow_shared(fast[0], fast[3])
        return [fast]

    def counter(self, kernel) -> int:
        """1 forward, 2 dX, 3 the fused backward kernel, 4 the finish, 5 the chains kernel; 0 torch's."""
        template = kernel.template
        if template in FORWARD_TEMPLATES:
            return 1
        if template in GRAD_TEMPLATES:
            return 3 if template is backward.FUSED_TEMPLATE else 2
        return 4 if template is backward.FINISH_TEMPLATE else 5 if template is backward.CHAINS_TEMPLATE else 0

    def _count(self, kernel) -> None:
        self.launch_counts[self.counter(kernel)] += 1

    def launch(self, kernel, grid, block, shared: int, stream: int, *args) -> None:
        for kernel, grid, block, shared, args in self.resolve(kernel, grid, block, shared, args):
            super().launch(kernel, grid, block, shared, stream, *args)


# The process-wide FastRuntime (its kernels are loaded once per device).
fast_runtime = runtime.Shared(FastRuntime)
