"""CPU-only: the bookkeeping of reimpl/autograd.py's `_Signature`, with a stand-in runtime, plans and
api.signature (the GPU tests in tests/gpu/test_autograd_signatures_gpu.py run it on real calls). A
signature's first call runs in full and its plan is adopted after it; later calls with the key
share the signature and replay; the backward replays per (mask, gradient contiguity, address
alignment), takes the full call once for each new case, and keeps taking it where that case has no
plan."""
import pytest
import torch

from reimpl import api, autograd


class FakePlan:
    def __init__(self, name):
        self.name, self.calls = name, []

    def replayer(self, rt, keep=None):
        assert keep is None

        def replay(inputs, ptrs, stream):
            self.calls.append((len(inputs), tuple(ptrs), stream))
            return (f"{self.name} out", "stat a", "stat b")
        return replay


class FakeRuntime:
    def __init__(self):
        self.plans = {}

    def getCurrentCUDAStream(self):
        return 7

    def stream_reader(self):
        return lambda: 7


def fake_op(method, forward_out=None, backward_calls=None):
    """An autograd._Op whose full calls answer `forward_out` (a function of nothing) and append their
    mask to `backward_calls`."""
    return autograd._Op(method, method + "_backward",
                        lambda sig, inputs: forward_out(),
                        lambda sig, tensors, mask: backward_calls.append(mask) or ("full dX", None, None))


class Ctx:
    pass


@pytest.fixture
def keyed(monkeypatch):
    """api.signature answers with a key made of the method and the extra arguments."""
    monkeypatch.setattr(api, "signature", lambda method, tensors, extra, device_of=0:
                        ((method, *extra), [0 if t is None else t.data_ptr() for t in tensors]))


def test_first_call_runs_in_full_and_later_calls_replay(keyed):
    rt, plan = FakeRuntime(), FakePlan("forward")
    x, w = torch.ones(4, 8), torch.ones(8)
    full = ["full out", "rstd"]
    op = fake_op("_fused_rms_norm", lambda: full)
    sig, ptrs = autograd._Signature.of(op, (x, w), (8,), 1e-6, rt)
    assert ptrs is None and sig.key == ("_fused_rms_norm", (8,), 1e-6)
    ctx = Ctx()
    assert sig.run_forward(ctx, (x, w), ptrs) == "full out"
    assert ctx.stats == ["rstd"] and ctx.sig is sig
    rt.plans[sig.key] = plan  # what the full call's recording leaves
    sig.adopt()
    again, ptrs = autograd._Signature.of(op, (x, w), (8,), 1e-6, rt)
    assert again is sig and sig.key is None and ptrs == [x.data_ptr(), w.data_ptr()]
    ctx = Ctx()
    full[0] = None  # the full path would now answer None
    assert sig.run_forward(ctx, (x, w), ptrs) == "forward out"
    assert ctx.stats == ["stat a", "stat b"] and plan.calls == [(2, tuple(ptrs), 7)]


def test_a_signature_without_a_plan_keeps_the_full_path(keyed):
    rt = FakeRuntime()
    x = torch.ones(2, 4)
    op = fake_op("native_layer_norm", lambda: ("full", "m", "r"))
    sig, _ = autograd._Signature.of(op, (x, None, None), (4,), 1e-5, rt)
    sig.adopt()  # the first call kept no plan
    sig, ptrs = autograd._Signature.of(op, (x, None, None), (4,), 1e-5, rt)
    assert sig.forward is None and ptrs is not None
    assert sig.run_forward(Ctx(), (x, None, None), ptrs) == "full"


def test_off_device_calls_get_a_fresh_signature_each_time(monkeypatch):
    monkeypatch.setattr(api, "signature", lambda *a, **k: None)
    rt = FakeRuntime()
    op = fake_op("native_layer_norm")
    a, pa = autograd._Signature.of(op, (torch.ones(2),), (2,), 1e-5, rt)
    b, pb = autograd._Signature.of(op, (torch.ones(2),), (2,), 1e-5, rt)
    assert a is not b and pa is pb is None and a.key is None and not rt.plans


def test_the_backward_replays_per_case_and_runs_in_full_once_for_each(keyed):
    rt, plan = FakeRuntime(), FakePlan("backward")
    full_calls = []
    sig = autograd._Signature(fake_op("native_layer_norm", backward_calls=full_calls), (8,), 1e-5, rt)
    sig.stream = rt.stream_reader()
    x, w, mean, rstd = torch.ones(4, 8), torch.ones(8), torch.ones(4, 1), torch.ones(4, 1)

    def run(grad, mask):
        return sig.run_backward((grad, x, mean, rstd, w, None), mask)
    rt.plans[("native_layer_norm_backward", (8,), (True, True, False))] = plan
    g = torch.ones(4, 8)
    assert run(g, (True, True, False))[0] == "full dX"       # a new case: full, then its plan is kept
    assert run(g, (True, True, False))[0] == "backward out"  # replayed
    assert run(torch.ones(8, 4).t(), (True, True, False))[0] == "full dX"  # not contiguous: a new case
    assert run(g, (True, False, False))[0] == "full dX"      # another mask, without a plan
    assert run(g, (True, False, False))[0] == "full dX"      # ... stays on the full path
    assert len(full_calls) == 4 and len(plan.calls) == 1
    (n, ptrs, stream), = plan.calls
    assert n == 6 and ptrs == (g.data_ptr(), x.data_ptr(), mean.data_ptr(), rstd.data_ptr(), w.data_ptr(), 0)
    assert stream == 7
    cases = {case[:2] for case in sig.backward}
    assert cases == {((True, True, False), True), ((True, True, False), False), ((True, False, False), True)}
