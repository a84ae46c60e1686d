"""Launch plans: run a host function once, remember the launches it made, and replay them for later
calls of the same signature without running its Python again.

The host mirror re-derives everything on every call: shape checks, dtype dispatch, the choice of
kernel, grid and block, typed data pointers. For a given signature (shapes, dtypes, devices,
contiguity, pointer alignment, the scalar arguments) all of that comes out the same, and only the
pointers differ. So the first call runs the host function for real, through a runtime that passes
each launch on and also writes it down; if every pointer argument it launched with is the address
of one of the call's tensors (inputs, or outputs it returns), the plan is kept:

    outputs: (shape, dtype, device) of each returned tensor, allocated fresh (torch.empty, or
             torch.empty_like of a contiguous input of the same shape and dtype)
    launches: (kernel, grid, block, shared, arguments), each pointer argument named by the tensor
              it pointed into, everything else a constant

A later call with the same key allocates the outputs and makes the same launches with its own
pointers, through the same runtime. A runtime that swaps kernels (reimpl.fast's) makes its choice
while the first call records, so the plan holds the kernels it chose and a replay does not choose
again: the key holds everything that choice reads. A first call that made a temporary buffer,
copied an input, or returned a tensor that no launch wrote (torch's own fill or .sum(0) kernels)
keeps no plan: its signature always takes the full path. The caller builds the key; it must hold
everything the host code's decisions depend on. Nothing here knows about LayerNorm.
"""
from __future__ import annotations

import math

import torch

from . import runtime
from .runtime import dim3

_CONTIGUOUS = torch.contiguous_format
MAX_PLANS = 4096  # per runtime; a full cache is emptied (signatures beyond this are unusual)


class _Recorder:
    """A runtime that forwards every call to `rt` and writes each launch down. A runtime with a
    `resolve` method (one that launches something else in place of what the host code asked for,
    such as reimpl.fast's; it returns the list of launches it makes) has those written down, so a
    replay goes straight to them."""

    def __init__(self, rt):
        self._rt = rt
        self._resolve = getattr(rt, "resolve", None)
        self.launches: list[tuple] = []

    def __getattr__(self, name):
        return getattr(self._rt, name)

    def launch(self, kernel, grid, block, shared, stream, *args) -> None:
        made = [(kernel, grid, block, shared, args)]
        if self._resolve is not None:
            made = self._resolve(kernel, grid, block, shared, args)
        for kernel, grid, block, shared, args in made:
            self._rt.launch(kernel, grid, block, shared, stream, *args)
            self.launches.append((kernel, grid, block, shared, stream, args))


class Plan:
    """One signature's outputs and launches. `launches` hold (kernel, grid, block, shared, args) with
    grid and block as 3-tuples and each arg (True, i): the address of tensor i (inputs, then
    outputs), or (False, value): a constant."""
    __slots__ = ("outputs", "launches", "_compiled", "_device", "_likes", "_n_inputs")

    def __init__(self, outputs: tuple, launches: tuple, n_inputs: int, likes: tuple | None = None):
        self.outputs = outputs    # per returned value: None, or (shape, dtype, device)
        self.launches = launches
        self._n_inputs = n_inputs
        # per returned value: the index of a contiguous input of its shape and dtype, or None
        self._likes = likes or (None,) * len(outputs)
        self._compiled: dict = {}  # keep -> the replay function, made on first use (see _compile)
        self._device = next((spec[2] for spec in outputs if spec is not None), None)

    likes = property(lambda self: self._likes)
    device = property(lambda self: self._device)  # the outputs' device

    def spare(self, keep: int) -> tuple[tuple, int]:
        """Where the outputs past the first `keep` sit in the scratch block a replay with `keep`
        writes them to: (offset of each, in order), and the block's size; 256-byte aligned, as the
        allocator's blocks are."""
        offsets, end = [], 0
        for spec in self.outputs[keep:]:
            offsets.append(end)
            if spec is not None:
                end += -(-math.prod(spec[0]) * spec[1].itemsize // 256) * 256
        return tuple(offsets), end

    def replay(self, rt, in_ptrs: list, keep: int | None, inputs: tuple):
        """The outputs of a call of `inputs` (tensors or None), which sit at `in_ptrs` (0 for None).
        With `keep`, only the first `keep` outputs are allocated and returned; the kernels write the
        others into a scratch buffer that no caller sees (a caller that drops them, such as
        F.layer_norm's mean and rstd)."""
        return self.replayer(rt, keep)(inputs, in_ptrs, rt.getCurrentCUDAStream())

    def replayer(self, rt, keep: int | None = None):
        """`replay` as a function of (inputs, in_ptrs, stream), for a caller that keeps it (and the
        stream's lookup) rather than ask the plan on every call."""
        fn = self._compiled.get(keep)
        if fn is None:
            fn = self._compiled[keep] = self._compile(rt, keep)
        return fn

    def _compile(self, rt, keep):
        """This plan as straight-line Python: allocate, take addresses, launch. A replay is the host
        cost of every repeated call, and a loop that reads the plan per argument costs several times
        more than the statements it stands for. An output shaped like a contiguous input is made
        with torch.empty_like of it (the key holds that input's contiguity), which costs the host
        less than torch.empty; any other with torch.empty_like of a kept one-element tensor expanded
        to its shape (stride 0, so empty_like makes it contiguous)."""
        env = {"empty_like": torch.empty_like, "CF": _CONTIGUOUS, "scratch": scratch,
               "DEVICE": self._device}
        lines = ["def replay(inputs, in_ptrs, stream):"]
        kept = self.outputs if keep is None else self.outputs[:keep]
        for j, spec in enumerate(kept):
            if spec is None:
                lines.append(f"    o{j} = None")
                continue
            like = self._likes[j]
            if like is not None:
                lines.append(f"    o{j} = empty_like(inputs[{like}], memory_format=CF)")
            else:  # empty_like of one element seen through the output's shape: a contiguous tensor of
                # that shape, for less host time than torch.empty's parsing of shape, dtype and device
                shape, dtype, device = spec
                env[f"T{j}"] = _one(dtype, device).view((1,) * len(shape)).expand(shape)
                lines.append(f"    o{j} = empty_like(T{j}, memory_format=CF)")
            lines.append(f"    p{j} = o{j}.data_ptr()")
        if len(kept) < len(self.outputs):
            offsets, size = self.spare(len(kept))
            lines.append(f"    base = scratch(DEVICE, stream, {size})")

        def address(i: int) -> str:
            if i < self._n_inputs:
                return f"in_ptrs[{i}]"
            j = i - self._n_inputs
            return f"p{j}" if j < len(kept) else f"base + {offsets[j - len(kept)]}"
        for k, (kernel, grid, block, shared, args) in enumerate(self.launches):
            env[f"L{k}"] = rt.bind(kernel, grid, block, int(shared))
            exprs = []
            for a, (is_ptr, v) in enumerate(args):
                if is_ptr == "scratch":  # a temporary of v bytes on the replay's stream
                    exprs.append(f"scratch(DEVICE, stream, {int(v)})")
                elif is_ptr:
                    exprs.append(address(v))
                else:
                    env[f"C{k}_{a}"] = v
                    exprs.append(f"C{k}_{a}")
            lines.append(f"    L{k}(stream, {', '.join(exprs)})")
        lines.append(f"    return ({''.join(f'o{j}, ' for j in range(len(kept)))})")
        namespace: dict = {}
        exec(compile("\n".join(lines), f"<launch plan of {len(self.launches)} launch{'' if len(self.launches) == 1 else 'es'}>", "exec"), env, namespace)
        return namespace["replay"]


_ONES: dict = {}  # (dtype, device) -> a tensor of one element, made once


def _one(dtype, device):
    one = _ONES.get((dtype, device))
    if one is None:
        one = _ONES[(dtype, device)] = torch.empty(1, dtype=dtype, device=device)
    return one


_SCRATCH: dict = {}  # (device, stream) -> the buffers made for it, the largest last


class StreamScratch(int):
    """An address from `scratch` that a launch uses as a temporary of `nbytes` (a kernel writes it and a
    later launch of the same call reads it): a plan asks `scratch` for it again on each replay, on the
    replay's stream, rather than keep the address."""

    def __new__(cls, device, stream: int, nbytes: int):
        obj = super().__new__(cls, scratch(device, stream, nbytes))
        obj.nbytes = nbytes
        return obj


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
            if type(a) is StreamScratch:
                spec.append(("scratch", a.nbytes))
            elif kind == "ptr" and a != 0:
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
    likes = tuple(None if spec is None else next(
        (i for i, x in enumerate(inputs) if x is not None and x.is_contiguous() and x.dtype == spec[1]
         and tuple(x.shape) == spec[0] and x.device == spec[2]), None) for spec in out_specs)
    return Plan(tuple(out_specs), tuple(steps), len(inputs), likes)


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
        return plan.replay(rt, in_ptrs, keep, tuple(inputs))
    recorder = _Recorder(rt)
    stream = rt.getCurrentCUDAStream()
    with runtime.use(recorder):
        outputs = run()
    if len(plans) >= MAX_PLANS:
        plans.clear()
    plans[key] = _make_plan(tuple(inputs), tuple(outputs), recorder.launches, stream)
    return outputs
