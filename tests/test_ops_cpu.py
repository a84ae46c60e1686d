"""CPU-only: the torch.library ops (reimpl/ops.py) have aten's schemas, and their fake
implementations give aten's output shapes, strides and dtypes on fake CUDA tensors (no GPU needed),
raising torch's shape errors; aten::rms_norm's composite (reimpl/functional.py) gives torch's own
composite bits on CPU, where torch runs it for mixed dtypes and channels-last inputs; the
channels-last test agrees with torch's own Python twin of suggest_memory_format; the `kernels`
choice is checked before anything runs."""
import itertools
import warnings

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import reimpl  # noqa: F401  (registers torch.ops.reimpl.*)
from reimpl import functional
from reimpl.mirror.input_checks import TorchCheckError


def _schema_args(op):
    return [(a.name, str(a.type)) for a in op._schema.arguments]


@pytest.mark.parametrize("ours,aten", [("native_layer_norm", "native_layer_norm"),
                                       ("native_layer_norm_backward", "native_layer_norm_backward"),
                                       ("fused_rms_norm", "_fused_rms_norm"),
                                       ("fused_rms_norm_backward", "_fused_rms_norm_backward")])
def test_schemas_are_atens(ours, aten):
    o, a = getattr(torch.ops.reimpl, ours).default, getattr(torch.ops.aten, aten).default
    # aten's arguments, then ours alone: which kernels, defaulting to the mirror's
    assert [t for _, t in _schema_args(o)] == [t for _, t in _schema_args(a)] + ["str"]
    last = o._schema.arguments[-1]
    assert (last.name, last.default_value) == ("kernels", "mirror")
    # the backward ops return Tensor? where aten returns an undefined Tensor (None in Python either way)
    theirs = [str(r.type) for r in a._schema.returns]
    if "backward" in ours:
        theirs = [f"Optional[{t}]" for t in theirs]
    assert [str(r.type) for r in o._schema.returns] == theirs


def _meta(ts):
    return [None if t is None else (tuple(t.shape), t.stride(), t.dtype, str(t.device)) for t in ts]


CASES = [((3, 5, 8), (8,)), ((3, 5, 8), (5, 8)), ((0, 16), (16,)), ((7, 1), (1,))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("shape,ns", CASES)
def test_fake_outputs_are_atens(shape, ns, dtype):
    with FakeTensorMode():
        x = torch.empty(shape, device="cuda", dtype=dtype)
        w, b = torch.empty(ns, device="cuda", dtype=dtype), torch.empty(ns, device="cuda", dtype=dtype)
        xt = x.transpose(0, 1) if len(shape) == 3 and len(ns) == 1 else x  # a non-contiguous input too
        for args in ((x, list(ns), w, b, 1e-5), (xt, list(ns), None, None, 1e-5)):
            assert _meta(torch.ops.reimpl.native_layer_norm(*args)) == _meta(torch.ops.aten.native_layer_norm(*args))
        assert (_meta(torch.ops.reimpl.fused_rms_norm(x, list(ns), w, None))
                == _meta(torch.ops.aten._fused_rms_norm(x, list(ns), w, None)))
        out, mean, rstd = torch.ops.aten.native_layer_norm(x, list(ns), w, b, 1e-5)
        for mask in itertools.product((True, False), repeat=3):
            args = (out, x, list(ns), mean, rstd, w, b, list(mask))
            assert (_meta(torch.ops.reimpl.native_layer_norm_backward(*args))
                    == _meta(torch.ops.aten.native_layer_norm_backward(*args)))
        for mask in itertools.product((True, False), repeat=2):
            args = (out, x, list(ns), rstd, w, list(mask))
            assert (_meta(torch.ops.reimpl.fused_rms_norm_backward(*args))
                    == _meta(torch.ops.aten._fused_rms_norm_backward(*args)))


def test_fake_implementations_raise_the_real_paths_errors():
    """At trace time the same check, type and text as the real call (whose text is torch's CUDA
    kernel's, tests/gpu/test_bad_input_gpu.py; aten's own fake says it differently)."""
    from reimpl.mirror.input_checks import _check_layer_norm_inputs
    with pytest.raises(TorchCheckError) as real:
        _check_layer_norm_inputs(torch.empty(3, 8), (7,), None, None)
    with FakeTensorMode():
        x = torch.empty(3, 8, device="cuda")
        for call in (lambda: torch.ops.reimpl.native_layer_norm(x, [7], None, None, 1e-5),
                     lambda: torch.ops.reimpl.fused_rms_norm(x, [7], None, None)):
            with pytest.raises(TorchCheckError) as fake:
                call()
            assert str(fake.value) == str(real.value)


MIXED = list(itertools.permutations([torch.float32, torch.bfloat16, torch.float16, torch.float64], 2))


@pytest.mark.parametrize("eps", [None, 1e-5])
@pytest.mark.parametrize("x_dtype,w_dtype", MIXED, ids=str)
@pytest.mark.parametrize("shape,ns,layout", [((37, 768), (768,), None), ((3, 5, 16, 64), (16, 64), None),
                                             ((2, 8, 4, 64), (64,), torch.channels_last),
                                             ((2, 3, 4, 5, 6), (6,), torch.channels_last_3d)])
def test_rms_norm_composite_is_torchs_on_cpu(x_dtype, w_dtype, shape, ns, layout, eps):
    g = torch.Generator().manual_seed(len(shape) * 31 + int(eps is None))
    x = (torch.randn(shape, generator=g) * 3 + 0.5).to(x_dtype)
    if layout is not None:
        x = x.to(memory_format=layout)
    w = torch.randn(ns, generator=g).to(w_dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nn.functional.rms_norm(x, ns, w, eps)  # torch's composite (dtypes differ)
    ours, _rstd = functional._rms_norm_composite(x, ns, w, eps)
    assert ours.dtype == theirs.dtype and ours.stride() == theirs.stride()
    assert torch.equal(ours.view(-1).view(torch.int8), theirs.view(-1).view(torch.int8)) if ours.is_contiguous() \
        else torch.equal(ours, theirs)


def _layouts():
    base = torch.empty(2, 3, 4, 5)
    yield base
    yield base.to(memory_format=torch.channels_last)
    yield torch.empty(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d)
    yield torch.empty(2, 1, 1, 1)
    yield torch.empty(1, 3, 1, 4).permute(0, 3, 2, 1)
    yield torch.empty(2, 3, 4, 5).permute(0, 2, 3, 1)
    yield torch.empty(2, 3, 4, 5)[:, :, ::2]
    yield torch.empty(2, 3, 4, 5).to(memory_format=torch.channels_last)[:, :2]
    yield torch.empty(4, 5)
    yield torch.empty(2, 0, 4, 5).to(memory_format=torch.channels_last)


def test_channels_last_test_agrees_with_torch():
    prims = pytest.importorskip("torch._prims_common")
    if not hasattr(prims, "suggest_memory_format"):
        pytest.skip("this torch has no torch._prims_common.suggest_memory_format to compare with")
    for t in _layouts():
        assert functional._channels_last(t) == (prims.suggest_memory_format(t) != torch.contiguous_format), \
            (tuple(t.shape), t.stride())


def test_kernels_choice_is_checked_before_any_launch():
    x = torch.empty(2, 8)
    for call in (lambda: reimpl.layer_norm(x, (8,), kernels="fastest"),
                 lambda: reimpl.rms_norm(x, (8,), kernels="Fast"),
                 lambda: reimpl.native_layer_norm(x, (8,), kernels=None)):
        with pytest.raises(ValueError, match="kernels must be one of"):
            call()
