"""Launch plans replayed in C++ (native/plans.cpp) behind a C++ autograd node, for differentiable
LayerNorm and RMSNorm calls whose signature has a plan.

The Python path of such a call (reimpl/autograd.py) costs the host several microseconds more than
torch's C++ node: the plan key read attribute by attribute, the signature's lookup, and
torch.autograd.Function's Python machinery. The C++ module does the same steps in C++ for calls it
has an entry for: the key's facts read and hashed, the entry found, the outputs allocated, the plan's
launches made with cuLaunchKernel, and a torch::autograd::Function node recorded whose backward calls
the signature's Python `run_backward`. Everything else, a first call, a call it has no entry for, an
argument that is not a tensor, goes through Python's path, which adds the entry once a signature has
a plan (`add`).

The module is built from source with torch.utils.cpp_extension on first use (a C++ compiler and
ninja; tens of seconds, once per torch and Python version, in the kernel cache directory) and needs
no CUDA toolkit: it finds cuLaunchKernel in the libcuda that torch has loaded. Where it cannot be
built or loaded, or with REIMPL_NATIVE=0, `module()` is None and every call takes Python's path.
"""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import torch

from .compile import cache_dir
from .kernel_types import param_codes

SOURCE = Path(__file__).parent / "native" / "plans.cpp"
NAME = "reimpl_native_plans"
PTR, I32, I64, F32, F64, SCRATCH = range(6)  # argument kinds (plans.cpp: ArgKind)
LAYER_NORM, RMS_NORM = 0, 1         # ops (plans.cpp: Entry::op)
_CONSTANT_KIND = {"Q": I64, "i": I32, "q": I64, "f": F32, "d": F64}  # by runtime.param_codes' code

_lock = threading.Lock()
_state: dict = {}  # "module": the loaded module, or None once loading failed; "error": why


def enabled() -> bool:
    return os.environ.get("REIMPL_NATIVE", "1") != "0"


def build_directory() -> Path:
    """Where the module is built: per torch and Python version, beside the kernel cache."""
    tag = f"torch-{torch.__version__}-py{sys.version_info[0]}{sys.version_info[1]}".replace("+", "_")
    return cache_dir() / "native" / tag


def build():
    """The compiled module (built here if the build directory has none yet); raises where it cannot."""
    from torch.utils.cpp_extension import load
    directory = build_directory()
    directory.mkdir(parents=True, exist_ok=True)
    return load(NAME, [str(SOURCE)], build_directory=str(directory), extra_cflags=["-O2"], verbose=False)


def _has_driver() -> bool:
    """Whether this machine has a CUDA driver (without one there is nothing to serve: no build)."""
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def module():
    """The module where it can serve calls (built, loaded, a CUDA driver in the process), else None."""
    state = _state
    if "module" not in state:
        with _lock:
            if "module" not in state:
                mod = None
                if enabled() and _has_driver():
                    try:
                        mod = build()
                    except Exception as e:  # no compiler, no ninja, no headers: Python's path serves
                        state["error"] = f"{type(e).__name__}: {e}"
                state["module"] = mod if mod is not None and mod.available() else None
    return state["module"]


def entry_spec(rt, plan):
    """A plan (reimpl/device/replay.py) as the C++ module takes it: ([(shape, dtype, like), or None
    for an output the call does not make], [(function, grid, block, shared, slot, [(kind, index,
    int, float)])]); None where the C++ replay cannot make its launches, any not made directly
    through the driver (the runtime's `direct_function`)."""
    outputs = []
    for spec, like in zip(plan.outputs, plan.likes):
        outputs.append(None if spec is None else (tuple(spec[0]), spec[1], -1 if like is None else like))
    direct = getattr(rt, "direct_function", None)  # a runtime that launches nothing has none
    launches = []
    for kernel, grid, block, shared, args in plan.launches:
        fn = None if direct is None else direct(kernel)
        if fn is None:
            return None
        spec = []
        for (is_ptr, v), code in zip(args, param_codes(kernel), strict=True):
            if is_ptr == "scratch":
                spec.append((SCRATCH, 0, int(v), 0.0))  # the stream's buffer of v bytes, asked for per replay
            elif is_ptr:
                spec.append((PTR, v, 0, 0.0))
            elif code in "fd":
                spec.append((_CONSTANT_KIND[code], 0, 0, float(v)))
            else:  # an integer, or a null pointer (an absent weight)
                spec.append((_CONSTANT_KIND[code], 0, int(v), 0.0))
        launches.append((fn, tuple(grid), tuple(block), int(shared), rt.counter(kernel), spec))
    return outputs, launches


def add(op: int, rt, tensors: tuple, shape: tuple, eps, sig, plan) -> bool:
    """Give the C++ module an entry for calls like this one (its tensors, shape and eps) on runtime
    rt, replaying the forward `plan` and backed by the Python signature `sig`; False where it takes none."""
    mod = module()
    if mod is None or plan is None:
        return False
    spec = entry_spec(rt, plan)
    if spec is None or None in spec[0]:
        return False
    outputs, launches = spec
    return mod.add(op, id(rt), list(tensors), shape, eps, plan.device, outputs, launches, rt, sig)


def backward_spec(sig, tensors: tuple, mask: tuple):
    """(outputs, launches, device) of the backward plan the signature `sig` keeps for these tensors
    and mask, as entry_spec gives them; None where it keeps none. Asked by the C++ node after a
    case's first backward (which made the plan)."""
    plan = sig.backward_plan(tensors, mask)
    spec = None if plan is None else entry_spec(sig.rt, plan)
    return None if spec is None else (*spec, plan.device)


def forget(token: int) -> None:
    """Drop the entries of the runtime whose id is `token` (its plans were dropped: the functions
    they launch may have been unloaded)."""
    mod = _state.get("module")
    if mod is not None:
        mod.clear(token)
