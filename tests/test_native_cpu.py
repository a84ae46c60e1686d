"""CPU: the C++ replay (reimpl/device/native.py, native/plans.cpp) builds from source without a CUDA
toolkit, and its key is at least as fine as the Python plan key (reimpl/api.py, `signature`): two
calls it files under one key are calls Python files under one key too, so an entry never serves a
call that Python's path would have planned differently. No GPU: the launches are tested in
tests/gpu/test_native_gpu.py."""
import itertools
import shutil

import pytest
import torch

from reimpl import api
from reimpl.device import native

pytestmark = pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                reason="no C++ compiler on this machine: the C++ replay is not built here")


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    import os
    old = os.environ.get("REIMPL_CACHE_DIR")
    os.environ["REIMPL_CACHE_DIR"] = str(tmp_path_factory.mktemp("native"))
    try:
        yield native.build()
    finally:
        if old is None:
            os.environ.pop("REIMPL_CACHE_DIR")
        else:
            os.environ["REIMPL_CACHE_DIR"] = old


def _variants():
    """Inputs that differ in one fact each: shape, dtype, contiguity, address bits, weight, eps."""
    base = torch.randn(4 * 16 + 8)
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        flat = base.to(dtype)
        x = flat[:64].view(4, 16)
        shifted = flat[2:66].view(4, 16)  # the same shape four (or eight) bytes further on
        wide = flat[:64].view(2, 32)
        tall = flat[:64].view(8, 8)
        for name, t, shape in (("x", x, (16,)), ("shifted", shifted, (16,)), ("transposed", x.view(16, 4).t(), (16,)),
                               ("wide", wide, (32,)), ("tall", tall, (8,)), ("3d", x.view(2, 2, 16), (16,)),
                               ("two dims", x.view(2, 2, 16), (2, 16))):
            n = shape[-1] if len(shape) == 1 else shape[0] * shape[1]
            w = torch.ones(n, dtype=dtype).view(shape)
            for weights in ("w", "none", "w32"):
                ww = {"w": w, "none": None, "w32": w.float()}[weights]
                for eps in (1e-5, 1e-6, 0.0, -0.0):
                    out.append((f"{dtype}-{name}-{weights}-{eps}", (t, ww, ww), shape, eps))
    return out


def _python_key(method, tensors, shape, eps, monkeypatch):
    # api.signature on CPU tensors, as if they were on the current device (it refuses others)
    with monkeypatch.context() as m:
        m.setattr(torch.Tensor, "get_device", lambda self: 0)
        m.setattr(api, "_get_device", lambda: 0)
        return api.signature(method, tensors, (shape, api._eps_key(eps)))[0]


def test_a_cpp_key_never_joins_calls_that_python_keys_apart(mod, monkeypatch):
    cases = _variants()
    for op, method, arity in ((native.LAYER_NORM, "native_layer_norm", 3), (native.RMS_NORM, "_fused_rms_norm", 2)):
        keys = []
        for name, tensors, shape, eps in cases:
            tensors = tensors[:arity]
            cpp = mod.key(op, 7, list(tensors), shape, eps)
            assert cpp is not None, name
            keys.append((name, cpp, _python_key(method, tensors, shape, eps, monkeypatch)))
        joined = [(a[0], b[0]) for a, b in itertools.combinations(keys, 2) if a[1] == b[1] and a[2] != b[2]]
        assert not joined
        # the variants do make Python's keys differ (the check above is not empty), and the C++ key
        # parts at least as many calls (it also holds the strides)
        assert len({k[2] for k in keys}) > len(keys) // 2
        assert len({k[1] for k in keys}) >= len({k[2] for k in keys})


def test_a_cpp_key_holds_the_runtime_and_the_op(mod):
    x, w = torch.randn(4, 16), torch.randn(16)
    keys = {mod.key(op, token, [x, w, None] if op == native.LAYER_NORM else [x, w], (16,), 1e-5)
            for op in (native.LAYER_NORM, native.RMS_NORM) for token in (1, 2)}
    assert len(keys) == 4


def test_what_no_entry_could_serve_has_no_key(mod):
    x, w = torch.randn(4, 16), torch.randn(16)
    assert mod.key(native.RMS_NORM, 1, [x, [1.0] * 16], (16,), 1e-5) is None      # not a tensor
    assert mod.key(native.RMS_NORM, 1, [x, w], [16], 1e-5) is None                # a list, not a tuple
    assert mod.key(native.RMS_NORM, 1, [x, w], (16,), 1) is None                   # eps not a float
    assert mod.key(native.RMS_NORM, 1, [x.to_sparse(), w], (16,), 1e-5) is None    # not strided
    assert mod.key(native.RMS_NORM, 1, [x, w], (16,), None) != mod.key(native.RMS_NORM, 1, [x, w], (16,), 1e-5)


def test_without_a_cuda_driver_the_module_serves_nothing(mod):
    # this machine's process has no libcuda loaded: `available` says so, and module() gives None
    if torch.cuda.is_available():
        pytest.skip("a CUDA driver is loaded here; tests/gpu/test_native_gpu.py covers this machine")
    assert mod.available() is False


def test_a_plans_spec_names_each_argument_and_an_indirect_launch_gets_none():
    from reimpl.device.replay import Plan

    class Kernel:
        class template:
            params = ("ptr", "int", "ptr", "T_ACC")
        T_ACC = torch.empty(0).numpy().dtype

    class Rt:
        def __init__(self, fn):
            self.fn = fn

        def direct_function(self, kernel):
            return self.fn

        def counter(self, kernel):
            return 3
    out = ((4,), torch.float32, torch.device("cpu"))
    plan = Plan((out, None), ((Kernel, (1, 1, 1), (32, 1, 1), 0,
                               ((True, 1), (False, 4), ("scratch", 64), (False, 0.5))),), 1)
    assert native.entry_spec(Rt(123), plan) == (
        [((4,), torch.float32, -1), None],
        [(123, (1, 1, 1), (32, 1, 1), 0, 3, [(native.PTR, 1, 0, 0.0), (native.I32, 0, 4, 0.0),
                                             (native.SCRATCH, 0, 64, 0.0), (native.F32, 0, 0, 0.5)])])
    assert native.entry_spec(Rt(None), plan) is None


def test_a_backward_that_builds_a_graph_refuses_a_second_derivative():
    """The C++ node's backward under create_graph runs the signature's run_backward_under_graph: its
    gradients, differentiated again, raise torch's once_differentiable error, as the Python node's."""
    from reimpl import autograd

    class Sig(autograd._Signature):
        __slots__ = ()

        def run_backward(self, tensors, mask):
            return tensors[1] * 2, None  # dX, and no weight gradient

    class Rt:
        getCurrentCUDAStream = None
    sig = Sig(None, (3,), 1e-5, Rt())
    g, x = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    with torch.enable_grad():
        dx, dw = sig.run_backward_under_graph((g, x), (True, False))
    assert dw is None
    assert torch.equal(dx.detach(), torch.full((3,), 2.0))
    with pytest.raises(RuntimeError, match="once_differentiable"):
        dx.sum().backward()
