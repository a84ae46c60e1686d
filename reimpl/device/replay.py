"""Launch plans: run a host function once, remember the launches it made, and replay them for later
calls of the same signature without running its Python again.

The host mirror re-derives everything on every call: shape checks, dtype dispatch, the choice of
kernel, grid and block, typed data pointers. For a given signature (shapes, dtypes, devices,
contiguity, pointer alignment, the scalar arguments) all of that comes out the same, and only the
pointers differ. So the first call runs the host function for real, through a runtime that passes
each launch on and also writes it down; if every pointer argument it launched with is the address
of one of the call's tensors (inputs, or outputs it returns), the plan is kept:

    outputs: (shape, dtype, device) of each returned tensor, allocated fresh (torch.empty)
    launches: (kernel, grid, block, shared, arguments), each pointer argument named by the tensor
              it pointed into, everything else a constant

A later call with the same key allocates the outputs and makes the same launches with its own
pointers, through the same runtime (so a runtime that swaps kernels, such as reimpl.fast's, still
decides per launch). A first call that made a temporary buffer, copied an input, or returned a
tensor that no launch wrote (torch's own fill or .sum(0) kernels) keeps no plan: its signature
always takes the full path. The caller builds the key; it must hold everything the host code's
decisions depend on. Nothing here knows about LayerNorm.
"""
from __future__ import annotations

import math

import torch

from . import runtime
from .runtime import dim3

MAX_PLANS = 4096  # per runtime; a full cache is emptied (signatures beyond this are unusual)


class _Recorder:
    """A runtime that forwards every call to `rt` and writes each launch down."""

    def __init__(self, rt):
        self._rt = rt
        self.launches: list[tuple] = []

    def __getattr__(self, name):
        return getattr(self._rt, name)

    def launch(self, kernel, grid, block, shared, stream, *args) -> None:
        self._rt.launch(kernel, grid, block, shared, stream, *args)
        self.launches.append((kernel, grid, block, shared, stream, args))


class Plan:
    """One signature's outputs and launches. `launches` hold (kernel, grid, block, shared, args) with
    grid and block as 3-tuples and each arg (True, i): the address of tensor i (inputs, then
    outputs), or (False, value): a constant."""
    __slots__ = ("outputs", "launches", "_bound", "_scratch_offsets", "_device")

    def __init__(self, outputs: tuple, launches: tuple):
        self.outputs = outputs    # per returned value: None, or (shape, dtype, device)
        self.launches = launches
        self._bound = None        # the runtime's launchers, bound on first replay
        # where each output would sit in a scratch buffer (256-byte aligned, as the allocator's blocks)
        offsets, end = [], 0
        for spec in outputs:
            offsets.append(end)
            if spec is not None:
                end += -(-math.prod(spec[0]) * spec[1].itemsize // 256) * 256
        self._scratch_offsets = (tuple(offsets), end)
        self._device = next((spec[2] for spec in outputs if spec is not None), None)

    def replay(self, rt, in_ptrs: list, keep: int | None = None):
        """The outputs of a call whose inputs sit at `in_ptrs` (0 for None). With `keep`, only the
        first `keep` outputs are allocated and returned; the kernels write the others into a scratch
        buffer that no caller sees (a caller that drops them, such as F.layer_norm's mean and rstd)."""
        specs = self.outputs if keep is None else self.outputs[:keep]
        outs = [None if spec is None else torch.empty(spec[0], dtype=spec[1], device=spec[2]) for spec in specs]
        ptrs = in_ptrs + [0 if t is None else t.data_ptr() for t in outs]
        stream = rt.getCurrentCUDAStream()
        if keep is not None:
            offsets, size = self._scratch_offsets
            base = scratch(self._device, stream, size)
            ptrs += [0 if spec is None else base + offsets[keep + j] for j, spec in enumerate(self.outputs[keep:])]
        bound = self._bound
        if bound is None:
            bound = self._bound = [rt.bind(launch[0]) for launch in self.launches]
        for fn, (_kernel, grid, block, shared, args) in zip(bound, self.launches):
            fn(grid, block, shared, stream, *[ptrs[v] if is_ptr else v for is_ptr, v in args])
        return tuple(outs)


_SCRATCH: dict = {}  # (device, stream) -> the buffers made for it, the largest last


def scratch(device, stream: int, nbytes: int) -> int:
    """The address of at least `nbytes` of device memory that only kernels on `stream` write, in
    stream order. Buffers grow by doubling and are never freed, so an address a captured CUDA graph
    holds stays valid."""
    bufs = _SCRATCH.get((device, stream))
    if bufs is None or bufs[-1].numel() < nbytes:
        size = max(nbytes, 2 * bufs[-1].numel() if bufs else 4096)
        bufs = _SCRATCH.setdefault((device, stream), [])
        bufs.append(torch.empty(size, dtype=torch.uint8, device=device))
    return bufs[-1].data_ptr()


def _make_plan(inputs: tuple, outputs: tuple, launches: list, stream: int) -> Plan | None:
    """The plan of one recorded call, or None where replaying it would not repeat the call."""
    tensors = inputs + outputs
    where: dict[int, int] = {}
    for i, t in enumerate(tensors):
        if t is None:
            continue
        p = t.data_ptr()
        if p == 0 or p in where:
            return None  # an empty tensor, or two tensors at one address: a pointer's owner is ambiguous
        where[p] = i
    written = set()
    steps = []
    for kernel, grid, block, shared, s, args in launches:
        if s != stream:
            return None
        spec = []
        for kind, a in zip(kernel.template.params, args, strict=True):
            if kind == "ptr" and a != 0:
                i = where.get(int(a))
                if i is None:
                    return None  # a buffer of the host code's own (a copy, a partial-sum buffer)
                spec.append((True, i))
                written.add(i)
            else:
                spec.append((False, a))
        steps.append((kernel, dim3(grid), dim3(block), shared, tuple(spec)))
    out_specs = []
    for j, t in enumerate(outputs):
        if t is None:
            out_specs.append(None)
            continue
        if not t.is_contiguous() or len(inputs) + j not in written:
            return None  # torch.empty would not give this tensor back, or no launch of ours wrote it
        out_specs.append((tuple(t.shape), t.dtype, t.device))
    return Plan(tuple(out_specs), tuple(steps))


_MISSING = object()


def call(rt, key, inputs: tuple, run, in_ptrs: list | None = None, keep: int | None = None):
    """run() -> tuple of tensors (or None), the host function applied to `inputs` (the tensors, or
    None, whose addresses its launches may take; `in_ptrs` their addresses, if the caller has them)
    and whatever else it needs; `rt` is the current runtime. Replayed from the plan kept under `key`
    where there is one (with `keep`, see Plan.replay); otherwise run for real, and its plan (or the
    fact that it has none) kept under `key`."""
    plans = rt.plans
    plan = plans.get(key, _MISSING)
    if plan is None:
        return run()
    if plan is not _MISSING:
        if in_ptrs is None:
            in_ptrs = [0 if t is None else t.data_ptr() for t in inputs]
        return plan.replay(rt, in_ptrs, keep)
    recorder = _Recorder(rt)
    stream = rt.getCurrentCUDAStream()
    with runtime.use(recorder):
        outputs = run()
    if len(plans) >= MAX_PLANS:
        plans.clear()
    plans[key] = _make_plan(tuple(inputs), tuple(outputs), recorder.launches, stream)
    return outputs
