"""GPU: bad input gets torch's error (same type, same message), nothing is launched, nothing returned."""
import pytest
import torch

import reimpl
from reimpl.device import runtime

pytestmark = pytest.mark.gpu


def _errors_alike(ours_fn, torch_fn):
    rt = runtime.get()
    rt.record = []
    try:
        with pytest.raises(Exception) as ours:
            ours_fn()
        launched = list(rt.record)
    finally:
        rt.record = None
    with pytest.raises(Exception) as theirs:
        torch_fn()
    assert launched == [], "a kernel was launched before the error"
    return ours.value, theirs.value


def assert_same_error(ours_fn, torch_fn):
    """Both raise; ours is torch's exception type (or a subclass) with torch's exact message."""
    ours, theirs = _errors_alike(ours_fn, torch_fn)
    assert isinstance(ours, type(theirs)), (type(ours), type(theirs))
    assert str(ours) == str(theirs), (str(ours), str(theirs))


# Each aten-level entry point two ways: reimpl's function, and the torch.library op (reimpl/ops.py)
ROUTES = {"reimpl": {"native_layer_norm": reimpl.native_layer_norm, "fused_rms_norm": reimpl.fused_rms_norm,
                     "native_layer_norm_backward": reimpl.native_layer_norm_backward,
                     "fused_rms_norm_backward": reimpl.fused_rms_norm_backward},
          "torch.ops.reimpl": {name: getattr(torch.ops.reimpl, name) for name in
                               ("native_layer_norm", "fused_rms_norm", "native_layer_norm_backward",
                                "fused_rms_norm_backward")}}
route = pytest.mark.parametrize("route", sorted(ROUTES))


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape, device="cuda").to(dtype)


BAD = {
    "normalized_shape_mismatch": lambda: (_x(8, 512), (1024,), None, None),
    "normalized_shape_empty": lambda: (_x(8, 512), (), None, None),
    "input_fewer_dims": lambda: (_x(512), (2, 512), None, None),
    "weight_shape": lambda: (_x(8, 512), (512,), _x(256), None),
    "bias_shape": lambda: (_x(8, 512), (512,), _x(512), _x(511)),
    "weight_dtype": lambda: (_x(8, 512, dtype=torch.float16), (512,), _x(512), None),
    "bias_dtype": lambda: (_x(8, 512), (512,), _x(512), _x(512, dtype=torch.float64)),
    "integer_input": lambda: (torch.ones(8, 512, dtype=torch.int64, device="cuda"), (512,), None, None),
    "weight_on_cpu": lambda: (_x(8, 512), (512,), torch.randn(512), None),
    "bias_on_cpu": lambda: (_x(8, 512), (512,), _x(512), torch.randn(512)),
}


@route
@pytest.mark.parametrize("name", sorted(BAD))
def test_layer_norm_bad_input(name, route):
    x, ns, w, b = BAD[name]()
    assert_same_error(lambda: ROUTES[route]["native_layer_norm"](x, list(ns), w, b, 1e-5),
                      lambda: torch.ops.aten.native_layer_norm(x, list(ns), w, b, 1e-5))


@route
@pytest.mark.parametrize("name", ["normalized_shape_mismatch", "weight_shape", "weight_dtype", "integer_input",
                                  "weight_on_cpu", "input_fewer_dims"])
def test_fused_rms_norm_bad_input(name, route):
    x, ns, w, _b = BAD[name]()
    assert_same_error(lambda: ROUTES[route]["fused_rms_norm"](x, list(ns), w, 1e-5),
                      lambda: torch.ops.aten._fused_rms_norm(x, list(ns), w, 1e-5))


@pytest.mark.parametrize("name", ["normalized_shape_mismatch", "weight_shape", "integer_input",
                                  "weight_on_cpu", "input_fewer_dims"])
def test_functional_rms_norm_bad_input(name):
    x, ns, w, _b = BAD[name]()
    assert_same_error(lambda: reimpl.rms_norm(x, ns, w, 1e-5),
                      lambda: torch.nn.functional.rms_norm(x, list(ns), w, 1e-5))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_mixed_dtypes_under_autocast_fail_as_torchs(dtype):
    """Under autocast: a float64 input is never cast, so an fp32 weight mismatches it (LayerNorm);
    _fused_rms_norm has no autocast rule, so a low-precision input with an fp32 weight mismatches."""
    x64, w = _x(8, 512, dtype=torch.float64), _x(512)
    x = _x(8, 512, dtype=dtype)
    with torch.autocast("cuda", dtype=dtype):
        assert_same_error(lambda: reimpl.layer_norm(x64, (512,), w),
                          lambda: torch.nn.functional.layer_norm(x64, [512], w))
        assert_same_error(lambda: torch.ops.reimpl.native_layer_norm(x64, [512], w, None, 1e-5),
                          lambda: torch.ops.aten.native_layer_norm(x64, [512], w, None, 1e-5))
        assert_same_error(lambda: reimpl.fused_rms_norm(x, (512,), w, 1e-5),
                          lambda: torch.ops.aten._fused_rms_norm(x, [512], w, 1e-5))
        assert_same_error(lambda: torch.ops.reimpl.fused_rms_norm(x, [512], w, 1e-5),
                          lambda: torch.ops.aten._fused_rms_norm(x, [512], w, 1e-5))


def test_layer_norm_mixed_dtypes_out_of_autocast_fail_as_torchs():
    x, w = _x(8, 512, dtype=torch.bfloat16), _x(512)
    assert_same_error(lambda: reimpl.layer_norm(x, (512,), w), lambda: torch.nn.functional.layer_norm(x, [512], w))


def test_cpu_input_is_refused_by_name():
    with pytest.raises(RuntimeError, match="input.*cpu"):
        reimpl.native_layer_norm(torch.randn(4, 8), (8,))
    with pytest.raises(RuntimeError, match="input.*cpu"):
        reimpl.fused_rms_norm(torch.randn(4, 8), (8,))


def test_rows_above_the_grid_limit():
    # M = 2^31 rows of one element: above maxGridSize[0] = 2^31 - 1. Uninitialised, 4 GiB in fp16.
    x = torch.empty(2**31, 1, dtype=torch.float16, device="cuda")
    ours, theirs = _errors_alike(lambda: reimpl.native_layer_norm(x, (1,)),
                                 lambda: torch.ops.aten.native_layer_norm(x, [1], None, None, 1e-5))
    assert str(ours) == str(theirs), (str(ours), str(theirs))
    del x
    torch.cuda.empty_cache()


def _bwd_args(M=8, N=512, dtype=torch.float32):
    x = _x(M, N, dtype=dtype)
    w, b = _x(N, dtype=dtype), _x(N, dtype=dtype)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)
    return {"dy": _x(M, N, dtype=dtype), "x": x, "mean": mean, "rstd": rstd, "w": w, "b": b, "ns": (N,),
            "mask": [True, True, True]}


BAD_BACKWARD = {
    "normalized_shape_mismatch": {"ns": (256,)},
    "weight_shape": {"w_shape": 256},
    "grad_numel": {"dy_rows": 7},
    "mean_numel": {"mean_rows": 4},
    "rstd_numel": {"rstd_rows": 4},
    "grad_dtype": {"dy_dtype": torch.float16},
    "mean_dtype": {"mean_dtype": torch.float16},
    "weight_grad_without_weight": {"w": None},
    "bias_grad_without_bias": {"b": None},
    "mean_on_cpu": {"mean_cpu": True},
    "grad_on_cpu": {"dy_cpu": True},
}


def _apply(name):
    a = _bwd_args()
    spec = dict(BAD_BACKWARD[name])
    if "w_shape" in spec:
        a["w"] = _x(spec.pop("w_shape"))
    if "dy_rows" in spec:
        a["dy"] = a["dy"][:spec.pop("dy_rows")]
    if "mean_rows" in spec:
        a["mean"] = a["mean"][:spec.pop("mean_rows")]
    if "rstd_rows" in spec:
        a["rstd"] = a["rstd"][:spec.pop("rstd_rows")]
    if "dy_dtype" in spec:
        a["dy"] = a["dy"].to(spec.pop("dy_dtype"))
    if "mean_dtype" in spec:
        a["mean"] = a["mean"].to(spec.pop("mean_dtype"))
    if spec.pop("mean_cpu", False):
        a["mean"] = a["mean"].cpu()
    if spec.pop("dy_cpu", False):
        a["dy"] = a["dy"].cpu()
    a.update(spec)
    return a


@route
@pytest.mark.parametrize("name", sorted(BAD_BACKWARD))
def test_layer_norm_backward_bad_input(name, route):
    a = _apply(name)
    assert_same_error(
        lambda: ROUTES[route]["native_layer_norm_backward"](a["dy"], a["x"], list(a["ns"]), a["mean"], a["rstd"],
                                                            a["w"], a["b"], a["mask"]),
        lambda: torch.ops.aten.native_layer_norm_backward(a["dy"], a["x"], list(a["ns"]), a["mean"], a["rstd"],
                                                          a["w"], a["b"], a["mask"]))


@route
@pytest.mark.parametrize("name", ["normalized_shape_mismatch", "weight_shape", "grad_numel", "rstd_numel",
                                  "grad_dtype", "weight_grad_without_weight", "grad_on_cpu"])
def test_fused_rms_norm_backward_bad_input(name, route):
    a = _apply(name)
    assert_same_error(
        lambda: ROUTES[route]["fused_rms_norm_backward"](a["dy"], a["x"], list(a["ns"]), a["rstd"], a["w"],
                                                         a["mask"][:2]),
        lambda: torch.ops.aten._fused_rms_norm_backward(a["dy"], a["x"], list(a["ns"]), a["rstd"], a["w"],
                                                        a["mask"][:2]))


