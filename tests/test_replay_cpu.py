"""CPU-only: launch plans (reimpl/device/replay.py). For every case of torch's recorded forward and
backward launch tables, a call replayed from the plan of an earlier call with the same signature
makes exactly the launches the full host mirror makes for it: same kernels, grids, blocks, shared
memory and constants, each pointer naming the same tensor, and outputs of the same shape, strides
and dtype. Calls whose host code makes buffers of its own, copies an input, or returns a tensor no
launch wrote keep no plan and run in full every time."""
import json
from pathlib import Path

import pytest
import torch

from reimpl.checks.cases import Case
from reimpl.checks.cases_backward import BackwardCase
from reimpl.device import replay, runtime

REF = Path(__file__).resolve().parents[1] / "reference"
FORWARD = json.loads((REF / "torch_launches_forward.json").read_text())["cases"]
BACKWARD = json.loads((REF / "torch_launches_backward.json").read_text())["cases"]


def _roles(calls, tensors):
    """The launches with each pointer argument replaced by the index of the tensor it points into
    (a buffer of the host code's own, by the order it first appears in)."""
    where = {t.data_ptr(): ("t", i) for i, t in enumerate(tensors) if t is not None and t.data_ptr() != 0}
    out = []
    for kernel, launch, args in calls:
        named = tuple(where.setdefault(a, ("buffer", len(where))) if kind == "ptr" and a != 0 else ("c", a)
                      for kind, a in zip(kernel.template.params, args))
        out.append((kernel.name, launch.grid, launch.block, launch.shared, named))
    return out


def _meta(outputs):
    return [None if t is None else (tuple(t.shape), t.stride(), t.dtype) for t in outputs]


def _check(case, n_inputs):
    first_args = case.make_args("cpu", values=False)
    args = case.make_args("cpu", values=False)  # same signature, other addresses
    rt = runtime.RecordingRuntime()
    with runtime.use(rt):
        replay.call(rt, "sig", first_args[:n_inputs], lambda: case.run_host(*first_args))
        before = len(rt.calls)
        got = replay.call(rt, "sig", args[:n_inputs], lambda: case.run_host(*args))
    with runtime.use(runtime.RecordingRuntime()) as full:
        want = case.run_host(*args)
    assert _meta(got) == _meta(want)
    assert _roles(rt.calls[before:], args + tuple(got)) == _roles(full.calls, args + tuple(want))
    return rt.plans["sig"]


@pytest.mark.parametrize("entry", FORWARD, ids=[c["id"] for c in FORWARD])
def test_forward_replay_equals_the_full_host_path(entry):
    case = Case.from_dict(entry["case"])
    plan = _check(case, 3)
    x = case.make_args("cpu", values=False)[0]
    # a contiguous input with elements keeps a plan; a non-contiguous one is copied first, so it cannot
    assert (plan is not None) == (not case.transpose and x.numel() > 0)


@pytest.mark.parametrize("entry", BACKWARD, ids=[c["id"] for c in BACKWARD])
def test_backward_replay_equals_the_full_host_path(entry):
    case = BackwardCase.from_dict(entry["case"])
    plan = _check(case, 6)
    torch_ops = [l for l in entry["launches"] if not any(k in l["kernel"] for k in OUR_KERNELS)]
    if plan is not None:  # a kept plan never stands for a call that also ran torch kernels (copy, fill, sum)
        assert torch_ops == [], entry["id"]


OUR_KERNELS = ("GammaBetaBackwardCUDAKernelTemplate", "layer_norm_grad_input_kernel")


def test_plans_are_kept_for_the_common_signatures():
    """The point of it: ordinary contiguous calls replay."""
    kept = sum(_check(Case.from_dict(e["case"]), 3) is not None for e in FORWARD[:200])
    assert kept > 100


def test_a_temporary_buffer_keeps_no_plan():
    """The tall-and-narrow GammaBeta path writes partial sums to a buffer of its own, then .sum(0)."""
    tall = [e for e in BACKWARD if any("reduce_kernel" in l["kernel"] for l in e["launches"])
            and not e["case"]["transpose"]]
    assert tall, "the record has partial-path cases"
    for e in tall[:3]:
        assert _check(BackwardCase.from_dict(e["case"]), 6) is None


def test_a_full_cache_is_emptied():
    rt = runtime.RecordingRuntime()
    x = torch.empty(2, 8)
    with runtime.use(rt):
        for i in range(replay.MAX_PLANS + 1):
            replay.call(rt, i, (x,), lambda: (torch.empty(1),))
    assert len(rt.plans) == 1


def test_dropped_outputs_go_to_a_scratch_buffer():
    """keep=1 (F.layer_norm drops mean and rstd): the same launches, the dropped outputs written to
    disjoint, aligned places in one scratch buffer that grows and is never freed."""
    case = Case.from_dict(FORWARD[0]["case"] | {"shape": [64, 1024], "dtype": "fp32"})
    first, args = case.make_args("cpu", values=False), case.make_args("cpu", values=False)
    rt = runtime.RecordingRuntime()
    with runtime.use(rt):
        replay.call(rt, "sig", first, lambda: case.run_host(*first))
        before = len(rt.calls)
        (y,) = replay.call(rt, "sig", args, lambda: case.run_host(*args), keep=1)
    with runtime.use(runtime.RecordingRuntime()) as full:
        want = case.run_host(*args)
    got_calls, want_calls = rt.calls[before:], full.calls
    assert [(k.name, l.grid, l.block, l.shared) for k, l, _ in got_calls] == \
           [(k.name, l.grid, l.block, l.shared) for k, l, _ in want_calls]
    assert _meta((y,)) == _meta(want[:1])
    (kernel, _, got_args), = got_calls
    params = kernel.template.params
    ptr_args = [a for kind, a in zip(params, got_args) if kind == "ptr"]
    (buf,) = replay._SCRATCH[(torch.device("cpu"), 0)][-1:]
    dropped = [a for a in ptr_args if buf.data_ptr() <= a < buf.data_ptr() + buf.numel()]
    assert len(dropped) == 2 and all((a - buf.data_ptr()) % 256 == 0 for a in dropped)  # (CUDA's blocks are 512-aligned)
    assert abs(dropped[0] - dropped[1]) >= 64 * 4  # mean and rstd: 64 floats each, not overlapping
    assert y.data_ptr() in ptr_args and args[0].data_ptr() in ptr_args


def test_a_zero_eps_keeps_its_sign_in_the_key():
    from reimpl.api import _eps_key
    assert _eps_key(0.0) != _eps_key(-0.0) and _eps_key(1e-5) == 1e-5 and _eps_key(None) is None
