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

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Plan:
    n_inputs: int
    outputs: tuple          # per returned value: None, or (shape, dtype, device)
    launches: tuple         # (kernel, grid, block, shared, args): arg = ("t", i) or ("c", value)

    def replay(self, rt, inputs: tuple):
        outs = tuple(None if spec is None else _empty(*spec) for spec in self.outputs)
        tensors = inputs + outs
        ptrs = [0 if t is None else t.data_ptr() for t in tensors]
        stream = rt.getCurrentCUDAStream()
        for kernel, grid, block, shared, args in self.launches:
            rt.launch(kernel, grid, block, shared, stream,
                      *[ptrs[v] if how == "t" else v for how, v in args])
        return outs


def _empty(shape, dtype, device):
    import torch
    return torch.empty(shape, dtype=dtype, device=device)


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
                spec.append(("t", i))
                written.add(i)
            else:
                spec.append(("c", a))
        steps.append((kernel, grid, block, shared, tuple(spec)))
    out_specs = []
    for j, t in enumerate(outputs):
        if t is None:
            out_specs.append(None)
            continue
        if not t.is_contiguous() or len(inputs) + j not in written:
            return None  # torch.empty would not give this tensor back, or no launch of ours wrote it
        out_specs.append((tuple(t.shape), t.dtype, t.device))
    return Plan(len(inputs), tuple(out_specs), tuple(steps))


_MISSING = object()


def call(rt, key, inputs: tuple, run):
    """run() -> tuple of tensors (or None), the host function applied to `inputs` (the tensors, or
    None, whose addresses its launches may take) and whatever else it needs; `rt` is the current
    runtime. Replayed from the plan kept under `key` where there is one; otherwise run for real,
    and its plan (or the fact that it has none) kept under `key`."""
    plans = rt.__dict__.setdefault("plans", {})
    plan = plans.get(key, _MISSING)
    if plan is None:
        return run()
    if plan is not _MISSING:
        return plan.replay(rt, inputs)
    from . import runtime
    recorder = _Recorder(rt)
    stream = rt.getCurrentCUDAStream()
    with runtime.use(recorder):
        outputs = run()
    if len(plans) >= MAX_PLANS:
        plans.clear()
    plans[key] = _make_plan(tuple(inputs), tuple(outputs), recorder.launches, stream)
    return outputs
