"""Compile a CUDA source tree with NVRTC, with torch's numerics, and cache the cubin.

A `CudaSource` names the tree (a directory, its main file and the kernels it instantiates by
default); the mirror's is `reimpl.mirror.kernel_table.SOURCE` (reimpl/mirror/cuda/). Nothing here knows which kernels
a tree holds, so other trees (study kernels, the fast path) compile through the same path.

Numerics options, stated explicitly even where they are NVRTC's defaults, because they decide bits:
  -ftz=false        keep subnormals (torch builds without fast math; CuPy's own path adds -ftz=true)
  -prec-div=true    IEEE division and reciprocal (`1.f / x` is correctly rounded)
  -prec-sqrt=true   IEEE square root
  -fmad=true        let the compiler contract a*b+c into one FMA, as nvcc does for torch
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from typing import Callable

from . import nvrtc

NUMERICS_OPTIONS = ["-ftz=false", "-prec-div=true", "-prec-sqrt=true", "-fmad=true"]
# 177 "declared but never referenced": upstream defines entities some instantiations never use
# (WelfordDataLN's default constructor, kWarpSize in the forward-only program).
DIAGNOSTIC_OPTIONS = ["-diag-suppress=177"]


def cuda_include_dir() -> str:
    """A directory holding cuda_fp16.h / cuda_bf16.h (the CUDA toolkit's, or pip's nvidia-cuda-runtime)."""
    candidates = []
    if os.environ.get("REIMPL_CUDA_INCLUDE"):
        candidates.append(os.environ["REIMPL_CUDA_INCLUDE"])
    for env in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(env):
            candidates.append(os.path.join(os.environ[env], "include"))
    candidates += ["/usr/local/cuda/include", "/usr/local/cuda/targets/x86_64-linux/include"]
    candidates += [os.path.join(p, "nvidia", "cu13", "include") for p in sys.path]
    for c in candidates:
        if os.path.isfile(os.path.join(c, "cuda_fp16.h")) and os.path.isfile(os.path.join(c, "cuda_bf16.h")):
            return c
    raise nvrtc.NVRTCError("cuda_fp16.h not found: install the CUDA toolkit or `pip install nvidia-cuda-runtime`, "
                           "or set REIMPL_CUDA_INCLUDE")


@dataclass(frozen=True, eq=False)  # identity hashing: a runtime keys its loaded modules by source
class CudaSource:
    """One CUDA source tree: `directory` (also the include path), its `main` file, the kernels a
    build instantiates when the caller names none (objects with an `.expr`, a name expression), and
    other trees it includes from, and where a source is built as its project builds it, the NVRTC
    options that stand in for NUMERICS_OPTIONS (apex's rung: apex's --use_fast_math)."""
    directory: Path
    main: str
    default_kernels: Callable[[], list]
    include_dirs: tuple[Path, ...] = ()
    numerics: tuple[str, ...] | None = None

    def digest(self) -> str:
        h = hashlib.sha256()
        for d in (self.directory, *self.include_dirs):
            for p in sorted(d.iterdir()):
                if p.suffix in (".cu", ".cuh", ".h"):
                    h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
        return h.hexdigest()


def compile_options(source: CudaSource, arch: str, extra: tuple[str, ...] = ()) -> list[str]:
    numerics = NUMERICS_OPTIONS if source.numerics is None else source.numerics
    return [f"--gpu-architecture={arch}", "-std=c++17", *numerics, *DIAGNOSTIC_OPTIONS,
            f"-I{source.directory}", *(f"-I{d}" for d in source.include_dirs), f"-I{cuda_include_dir()}", *extra]


def cache_dir() -> Path:
    base = os.environ.get("REIMPL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "reimpl-layernorm")
    return Path(base)


@dataclass
class Program:
    arch: str
    cubin: bytes
    lowered: dict[str, str]  # kernel.expr -> mangled name
    log: str
    from_cache: bool


def cache_path(source: CudaSource, arch: str, kernels: list | None = None,
               extra_options: tuple[str, ...] = ()) -> Path:
    """Where `build` keeps (or would keep) this compilation: a key over the source text, the options,
    the kernels and the NVRTC version, so any change to one of them compiles afresh."""
    kernels = source.default_kernels() if kernels is None else kernels
    key_src = json.dumps({"src": source.digest(), "opts": compile_options(source, arch, extra_options),
                          "exprs": [k.expr for k in kernels], "nvrtc": nvrtc.version()}, sort_keys=True)
    return cache_dir() / f"{arch}-{hashlib.sha256(key_src.encode()).hexdigest()[:32]}"


def build(source: CudaSource, arch: str, kernels: list | None = None, extra_options: tuple[str, ...] = (),
          use_cache: bool = True) -> Program:
    """Compile `source` for `arch` (e.g. "sm_90") with every kernel in `kernels` instantiated
    (default: the source's own list)."""
    kernels = source.default_kernels() if kernels is None else kernels
    exprs = [k.expr for k in kernels]
    options = compile_options(source, arch, extra_options)
    path = cache_path(source, arch, kernels, extra_options)
    if use_cache and (path / "kernels.cubin").is_file():
        meta = json.loads((path / "meta.json").read_text())
        return Program(arch, (path / "kernels.cubin").read_bytes(), meta["lowered"], meta["log"], True)
    text = (source.directory / source.main).read_text()
    res = nvrtc.compile_program(text, source.main, options, exprs)
    if use_cache:
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "kernels.cubin").write_bytes(res.cubin)
        (tmp / "meta.json").write_text(json.dumps({"lowered": res.lowered_names, "log": res.log,
                                                   "options": options}, indent=1))
        try:
            os.replace(tmp, path)
        except OSError:  # another process won the race; its copy is identical
            pass
    return Program(arch, res.cubin, res.lowered_names, res.log, False)


def load_probe(source: str, name: str, include_dirs: tuple[Path, ...] = ()):
    """Compile a small GPU probe (the rsqrt table scripts, a test of one device function) with
    torch's numerics for the current device and load it into CuPy: (module, device properties,
    arch, the NVRTC options). With `include_dirs` it may include our CUDA trees."""
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    arch = f"sm_{props['major']}{props['minor']}"
    options = [f"--gpu-architecture={arch}", *NUMERICS_OPTIONS]
    if include_dirs:
        options += ["-std=c++17", *(f"-I{d}" for d in include_dirs), f"-I{cuda_include_dir()}"]
    module = cupy.cuda.function.Module()
    module.load(nvrtc.compile_program(source, name, options, []).cubin)
    return module, props, arch, options
