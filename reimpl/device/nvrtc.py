"""A small ctypes binding to NVRTC: compile CUDA C++ to a cubin, no GPU needed.

We call NVRTC ourselves instead of going through ``cupy.RawModule(code=...)`` because CuPy's
compile path appends ``-ftz=true`` to every program, and torch builds its kernels without
flush-to-zero (see docs/numerics.md#flush-to-zero).
"""
from __future__ import annotations

import ctypes
import glob
import os
import sys
from dataclasses import dataclass
from functools import lru_cache


class NVRTCError(RuntimeError):
    pass


def _candidate_dirs() -> list[str]:
    dirs = []
    for env in ("REIMPL_NVRTC_DIR",):
        if os.environ.get(env):
            dirs.append(os.environ[env])
    # pip's nvidia-cuda-nvrtc wheel (CUDA 13 layout, then the CUDA 12 one)
    for base in sys.path:
        dirs += [os.path.join(base, "nvidia", "cu13", "lib"), os.path.join(base, "nvidia", "cuda_nvrtc", "lib")]
    for env in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(env):
            dirs.append(os.path.join(os.environ[env], "lib64"))
    dirs += ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"]
    return [d for d in dirs if os.path.isdir(d)]


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    tried = []
    for d in _candidate_dirs():
        libs = sorted(glob.glob(os.path.join(d, "libnvrtc.so.*")))
        libs = [p for p in libs if ".alt." not in p]
        if not libs:
            tried.append(d)
            continue
        # NVRTC dlopens its builtins library by soname: load it first so it is found here too.
        for b in sorted(glob.glob(os.path.join(d, "libnvrtc-builtins.so.*"))):
            if ".alt." not in b:
                ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
        return ctypes.CDLL(libs[0], mode=ctypes.RTLD_GLOBAL)
    raise NVRTCError(
        "libnvrtc not found (looked in: %s). Install it with `pip install nvidia-cuda-nvrtc==13.0.88` "
        "or set REIMPL_NVRTC_DIR." % (", ".join(tried) or "no candidate directories"))


def version() -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(_lib().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def _check(status: int, what: str, log: str = "") -> None:
    if status != 0:
        lib = _lib()
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        msg = lib.nvrtcGetErrorString(status).decode()
        raise NVRTCError(f"{what} failed: {msg}" + (f"\n{log}" if log else ""))


@dataclass
class CompileResult:
    cubin: bytes
    lowered_names: dict[str, str]  # name expression -> mangled symbol in the cubin
    log: str


def compile_program(source: str, name: str, options: list[str], name_expressions: list[str]) -> CompileResult:
    """Compile one translation unit; return the cubin, the mangled names and the compiler log."""
    lib = _lib()
    prog = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        for expr in name_expressions:
            _check(lib.nvrtcAddNameExpression(prog, expr.encode()), f"nvrtcAddNameExpression({expr})")
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        status = lib.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace").strip()
        _check(status, f"compiling {name}", log)
        lowered = {}
        for expr in name_expressions:
            out = ctypes.c_char_p()
            _check(lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(out)), f"nvrtcGetLoweredName({expr})")
            lowered[expr] = out.value.decode()
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return CompileResult(cubin.raw, lowered, log)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
