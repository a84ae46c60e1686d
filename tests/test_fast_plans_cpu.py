"""CPU-only: reimpl.fast's kernel choice is made once per signature. `swap` puts our forward and dX
kernels where torch's host code launches its vectorized ones; the launch-plan recorder writes down
the swapped launch, so a replayed call launches our kernels directly. Checked on every case of torch's recorded forward and
backward launch tables: a replayed call makes the launches of the full host path under the same
runtime, and they are ours exactly where the mirror launches torch's vectorized kernels."""
import json
from pathlib import Path

import pytest

from reimpl.checks.cases import Case
from reimpl.checks.cases_backward import BackwardCase
from reimpl.device import replay, runtime
from reimpl.fast import forward, grad_input
from reimpl.fast.runtime import FORWARD_TEMPLATES, swap
from reimpl.mirror import kernel_table as K

REF = Path(__file__).resolve().parents[1] / "reference"
FORWARD = json.loads((REF / "torch_launches_forward.json").read_text())["cases"]
BACKWARD = json.loads((REF / "torch_launches_backward.json").read_text())["cases"]
FORWARD_OURS = FORWARD_TEMPLATES
GRAD_OURS = (grad_input.TEMPLATE, grad_input.WARP_TEMPLATE)


class RecordingFast(runtime.RecordingRuntime):
    """FastRuntime's choice on the recording runtime: the H100's 132 SMs."""

    def resolve(self, kernel, grid, block, shared, args):
        return [swap(kernel, grid, block, shared, args, 132)]

    def launch(self, kernel, grid, block, shared, stream, *args):
        for kernel, grid, block, shared, args in self.resolve(kernel, grid, block, shared, args):
            super().launch(kernel, grid, block, shared, stream, *args)


def _named(calls, tensors):
    """Each launch with its pointers named by the tensor they point into (a buffer of the host
    code's own by the order it first appears in)."""
    where = {t.data_ptr(): ("t", i) for i, t in enumerate(tensors) if t is not None and t.data_ptr() != 0}
    return [(k.name, launch.grid, launch.block, launch.shared,
             tuple(where.setdefault(a, ("buffer", len(where)))
                   if kind == "ptr" and a != 0 else ("c", int(a))
                   for kind, a in zip(k.template.params, args)))
            for k, launch, args in calls]


def _expected_ours(mirror_calls):
    """Per mirror launch: which of our templates runs in its place (None: the mirror's own)."""
    out = []
    for k, _, args in mirror_calls:
        if k.template is K.layer_norm_grad_input_kernel_vectorized:
            out.append(GRAD_OURS)
        elif k.template is K.vectorized_layer_norm_kernel and forward.takes(args[3] != 0, args[4] != 0, k.targs[2]):
            out.append(FORWARD_OURS)
        else:
            out.append(None)
    return out


def _check(case, n_inputs):
    first, args = case.make_args("cpu", values=False), case.make_args("cpu", values=False)
    rt = RecordingFast()
    with runtime.use(rt):
        replay.call(rt, "sig", first[:n_inputs], lambda: case.run_host(*first))
        before = len(rt.calls)
        got = replay.call(rt, "sig", args[:n_inputs], lambda: case.run_host(*args))
    with runtime.use(RecordingFast()) as full:
        want = case.run_host(*args)
    with runtime.use(runtime.RecordingRuntime()) as mirror:
        case.run_host(*args)
    replayed = rt.calls[before:]
    assert _named(replayed, args + tuple(got)) == _named(full.calls, args + tuple(want))
    expected = _expected_ours(mirror.calls)
    assert len(replayed) == len(expected)
    for (k, _, _), ours in zip(replayed, expected):
        if ours is None:
            assert k.template not in FORWARD_OURS + GRAD_OURS
        else:
            assert k.template in ours
    plan = rt.plans["sig"]
    if plan is not None:  # the plan itself holds our kernels: a replay does not choose again
        assert [step[0] for step in plan.launches] == [k for k, _, _ in replayed]
    return plan, expected


@pytest.mark.parametrize("entry", FORWARD, ids=[c["id"] for c in FORWARD])
def test_forward_replays_our_kernels_where_torch_vectorizes(entry):
    case = Case.from_dict(entry["case"])
    plan, expected = _check(case, 3)
    x = case.make_args("cpu", values=False)[0]
    assert (plan is not None) == (not case.transpose and x.numel() > 0)


@pytest.mark.parametrize("entry", BACKWARD, ids=[c["id"] for c in BACKWARD])
def test_backward_replays_our_kernels_where_torch_vectorizes(entry):
    _check(BackwardCase.from_dict(entry["case"]), 6)


def test_the_swap_happens_on_many_cases():
    """The check above is not vacuous: our kernels replace torch's in most recorded forward cases."""
    swapped = 0
    for e in FORWARD[:300]:
        case = Case.from_dict(e["case"])
        with runtime.use(runtime.RecordingRuntime()) as mirror:
            case.run_host(*case.make_args("cpu", values=False))
        swapped += any(_expected_ours(mirror.calls))
    assert swapped > 100
