"""Kernels with one change of torch's computation planted: the proof that the diagnosis names the
change. For each switch of reimpl/emulator/variants.py there is a GPU build of
cuda/planted_layer_norm.cu with that one change (a macro, or the compiler option it stands for; the
flush-to-zero build is compiled by CuPy's RawModule, whose default it is), and a CPU twin that runs
the variant model itself.

    fn = planted.on_gpu("two_pass")          # F.layer_norm's signature, returns (y, mean, rstd)
    assert "two_pass" in diagnosis_of(fn)    # what tests/gpu/test_judge_gpu.py checks for each key

`fallback` is not a build: torch's own fallback kernels on a copy of x placed off 16 bytes.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from ..emulator import variants as V

CUDA_DIR = Path(__file__).resolve().parent / "cuda"
LADDER_CUDA_DIR = Path(__file__).resolve().parents[1] / "ladder" / "cuda"  # common.cuh
SOURCE_NAME = "planted_layer_norm.cu"

# key -> (NVRTC numerics options, macros); the key is a name of variants.SINGLE, or "torch"
BUILDS = {
    "torch": ((), ()),
    "ftz": (("-ftz=true",), ()),
    "no_fma": (("-fmad=false",), ()),
    "div_sqrt": ((), ("PLANT_DIV_SQRT",)),
    "two_pass": ((), ("PLANT_TWO_PASS",)),
    "one_pass": ((), ("PLANT_ONE_PASS",)),
    "block_y1": ((), ("PLANT_BLOCK_Y=1",)),
    "block_y8": ((), ("PLANT_BLOCK_Y=8",)),
    "tree_ascending": ((), ("PLANT_TREE_ASCENDING",)),
    "tree_swapped": ((), ("PLANT_TREE_SWAPPED",)),
    "float64": ((), ("PLANT_FLOAT64",)),
    "eps_outside": ((), ("PLANT_EPS_OUTSIDE",)),
    "cast_per_op": ((), ("PLANT_CAST_PER_OP",)),
}
TYPES = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16"}


def block_y(key: str) -> int:
    for m in BUILDS[key][1]:
        if m.startswith("PLANT_BLOCK_Y="):
            return int(m.split("=")[1])
    return 4


def options(key: str, arch: str) -> list[str]:
    """torch's numerics (reimpl/device/compile.py), with a numerics build's one option in place of
    torch's. On the GPU the ftz build goes through CuPy's RawModule instead (see _function): on the
    H100 machine's NVRTC 13.0, NVRTC compiles of this kernel given -ftz=true came out without .FTZ
    instructions in some processes and with them in others, while CuPy's compile flushed every time."""
    from ..device.compile import DIAGNOSTIC_OPTIONS, NUMERICS_OPTIONS, cuda_include_dir
    planted, macros = BUILDS[key]
    numerics = [o for o in NUMERICS_OPTIONS if o.split("=")[0] not in {p.split("=")[0] for p in planted}]
    return [f"--gpu-architecture={arch}", "-std=c++17", *numerics, *planted, *DIAGNOSTIC_OPTIONS,
            f"-I{LADDER_CUDA_DIR}", f"-I{cuda_include_dir()}", *(f"-D{m}" if "=" in m else f"-D{m}=1" for m in macros)]


def name_expressions() -> list[str]:
    return [f"planted_layer_norm<{t}, {str(rms).lower()}>" for t in TYPES.values() for rms in (False, True)]


@functools.cache
def build(key: str, arch: str) -> dict[str, tuple[bytes, str]]:
    """The NVRTC compiles of one planted build: {name expression: (cubin, lowered name)}, one
    program per kernel, so that each kernel's code can be read and checked alone."""
    from ..device import nvrtc
    text = (CUDA_DIR / SOURCE_NAME).read_text()
    out = {}
    for expr in name_expressions():
        res = nvrtc.compile_program(text, SOURCE_NAME, options(key, arch), [expr])
        out[expr] = (res.cubin, res.lowered_names[expr])
    return out


def _check(x, weight, bias, op):
    if x.shape[-1] % 4:
        raise ValueError(f"planted kernels need N % 4 == 0 (N = {x.shape[-1]})")
    if op == "layer_norm" and (weight is None) != (bias is None):
        raise ValueError("planted LayerNorm kernels take weight and bias together, or neither")


@functools.cache
def _function(key: str, expr: str, device: int):
    import cupy
    import torch
    with cupy.cuda.Device(device):
        if key == "ftz":
            # exactly a CuPy user's compile: RawModule appends -ftz=true to the options it is given
            from ..device.compile import cuda_include_dir
            mod = cupy.RawModule(code=(CUDA_DIR / SOURCE_NAME).read_text(),
                                 options=("-std=c++17", f"-I{LADDER_CUDA_DIR}", f"-I{cuda_include_dir()}"),
                                 name_expressions=[expr])
            return mod, mod.get_function(expr)
        major, minor = torch.cuda.get_device_capability(device)
        cubin, lowered = build(key, f"sm_{major}{minor}")[expr]
        mod = cupy.cuda.function.Module()
        mod.load(cubin)
    return mod, mod.get_function(lowered)  # the module too: the function lives as long as it


def on_gpu(key: str, op: str = "layer_norm"):
    """F.layer_norm's (or F.rms_norm's) signature on CUDA tensors; returns (y, mean, rstd) or (y, rstd)."""
    if key == "fallback":
        return _torch_fallback(op)
    if key not in BUILDS:
        raise KeyError(f"no planted build {key!r}; builds: {', '.join(BUILDS)}")

    def run(x, normalized_shape, weight, bias, eps):
        import cupy
        import torch
        eps = torch.finfo(torch.float32).eps if eps is None else eps
        N = int(np.prod(normalized_shape))
        _check(x, weight, bias, op)
        x = x.contiguous()
        M = x.numel() // N
        y = torch.empty_like(x)
        stat = torch.empty(M, dtype=torch.float32, device=x.device)
        rstd = torch.empty(M, dtype=torch.float32, device=x.device)
        t = TYPES[str(x.dtype).replace("torch.", "")]
        _, fn = _function(key, f"planted_layer_norm<{t}, {str(op == 'rms_norm').lower()}>", x.device.index or 0)
        ptr = lambda a: np.uint64(0 if a is None else a.contiguous().data_ptr())  # noqa: E731
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream(x.device).cuda_stream)
        with cupy.cuda.Device(x.device.index or 0):
            fn((M,), (32, block_y(key)), (ptr(x), ptr(weight), ptr(bias), ptr(stat), ptr(rstd), ptr(y),
                                          np.int32(N), np.float32(eps)), stream=stream)
        shape = tuple(x.shape[:x.dim() - len(normalized_shape)]) + (1,) * len(normalized_shape)
        if op == "rms_norm":
            return y, rstd.view(shape)
        return y, stat.view(shape), rstd.view(shape)
    return _signature(run, op)


def _signature(run, op):
    """F.layer_norm's argument list, or F.rms_norm's (no bias)."""
    if op == "rms_norm":
        return lambda x, normalized_shape, weight=None, eps=None: run(x, normalized_shape, weight, None, eps)
    return lambda x, normalized_shape, weight=None, bias=None, eps=1e-5: run(x, normalized_shape, weight, bias, eps)


def _torch_fallback(op):
    def run(x, normalized_shape, weight, bias, eps):
        import torch
        buf = torch.empty(x.numel() + 1, dtype=x.dtype, device=x.device)
        xm = buf[1:].view(x.shape)
        xm.copy_(x)
        if op == "rms_norm":
            return torch.ops.aten._fused_rms_norm(xm, list(normalized_shape), weight, eps)
        return torch.ops.aten.native_layer_norm(xm, list(normalized_shape), weight, bias, eps)
    return _signature(run, op)


def on_cpu(key: str, op: str = "layer_norm"):
    """The same change run by the variant model on CPU tensors (torch's H100 bits with that change)."""
    variant = V.Variant() if key == "torch" else V.SINGLE[key][0]

    def run(x, normalized_shape, weight, bias, eps):
        import torch
        from ..emulator.fp import BY_NAME
        from .bits import storage
        dt = str(x.dtype).replace("torch.", "")
        N = int(np.prod(normalized_shape))
        T = BY_NAME[{"float32": "float", "float16": "c10::Half", "bfloat16": "c10::BFloat16"}[dt]]
        flat = lambda a: None if a is None else storage(a).reshape(-1)  # noqa: E731
        y, mean, rstd = V.forward_rows(variant, op, T, storage(x).reshape(-1, N), flat(weight), flat(bias), eps)
        y_t = torch.from_numpy(y.view(np.int16) if dt == "bfloat16" else y).view(x.dtype).view(x.shape)
        shape = tuple(x.shape[:x.dim() - len(normalized_shape)]) + (1,) * len(normalized_shape)
        rstd_t = torch.from_numpy(rstd).view(shape)
        if op == "rms_norm":
            return y_t, rstd_t
        return y_t, torch.from_numpy(mean).view(shape), rstd_t
    return _signature(run, op)
