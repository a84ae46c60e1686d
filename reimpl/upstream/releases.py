"""torch releases' own layer_norm_kernel.cu kernels, read off their wheels on a CPU.

Each torch CUDA wheel carries libtorch_cuda.so; inside it, one sm_90 cubin holds every kernel that
layer_norm_kernel.cu instantiates. From it we record, per release: the instantiation set (demangled
signatures, so parameter lists show), and per kernel a fingerprint of its SASS (addresses and
encodings dropped) and its floating-point instruction sequence. Comparing releases by these says
which kernels can be expected to give the same bits; tests/gpu/test_releases_gpu.py runs the
kernels themselves to prove it. Binaries stay in the ignored cache (.cache/torch-releases/).

Tools: `pip download` for the wheels and for PyPI's nvidia-cuda-cuobjdump (cuobjdump), whose
binary we run; c++filt (binutils) demangles.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ..device import cubin as cubin_mod
from .manifest import ROOT

RELEASES = ("2.11.0", "2.12.1", "2.13.0", "2.14.1")
PIN = "2.11.0"
# where wheels, tools and the extracted cubins go (REIMPL_RELEASES_CACHE moves it, e.g. to a folder of
# cubins alone carried to a GPU machine)
CACHE = Path(os.environ.get("REIMPL_RELEASES_CACHE") or ROOT / ".cache" / "torch-releases")
JSON = ROOT / "reference" / "torch_versions.json"
ARCH = "sm_90"
MARK = b"layer_norm_kernel_cu"  # torch's symbols carry the translation unit's name
# floating-point instructions: what decides bits (integer, memory and control instructions do not)
FP_OPCODE = re.compile(r"^(FADD|FMUL|FFMA|FMNMX|FSETP|FSEL|FCHK|MUFU|DADD|DMUL|DFMA|DSETP|DMNMX|"
                       r"HADD2|HMUL2|HFMA2|F2F|F2FP|I2F|I2FP|F2I|FRND)\b")


def _pip_download(spec: str, dest: Path, platform_args: bool) -> None:
    args = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(dest)]
    if platform_args:
        args += ["--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
                 "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64"]
    subprocess.run(args + [spec], check=True)


def wheel(version: str, cache: Path = CACHE) -> Path:
    """The Linux x86-64 CUDA wheel of torch `version` (===: never a local +cpu build)."""
    found = sorted(cache.glob(f"torch-{version}-*.whl"))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        _pip_download(f"torch==={version}", cache, platform_args=True)
        found = sorted(cache.glob(f"torch-{version}-*.whl"))
    return found[0]


def cuobjdump(cache: Path = CACHE) -> Path:
    """cuobjdump from PyPI's nvidia-cuda-cuobjdump, unpacked into the cache."""
    tools = cache / "tools"
    exe = next(tools.glob("x/**/bin/cuobjdump"), None)
    if exe is None:
        tools.mkdir(parents=True, exist_ok=True)
        _pip_download("nvidia-cuda-cuobjdump", tools, platform_args=False)
        for w in tools.glob("nvidia_cuda_cuobjdump-*.whl"):
            zipfile.ZipFile(w).extractall(tools / "x")
        exe = next(tools.glob("x/**/bin/cuobjdump"))
        exe.chmod(0o755)
    return exe


def resource_usage(cubin: bytes) -> list[tuple[str, str, str, str, str]]:
    """(function, registers, stack, shared, local) a thread, as text, for every function of a cubin,
    as `cuobjdump -res-usage` prints them."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        usage = subprocess.run([str(cuobjdump()), "-res-usage", f.name], capture_output=True, text=True,
                               check=True).stdout
    return re.findall(r"Function (\S+):\s+REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", usage)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def wheel_facts(whl: Path) -> dict:
    """torch/version.py's __version__, git_version and cuda, read from the wheel."""
    text = zipfile.ZipFile(whl).read("torch/version.py").decode()
    get = lambda key: re.search(rf"^{key}\s*(?::[^=]*)?=\s*'([^']*)'", text, re.M)  # noqa: E731
    return {k: (m.group(1) if (m := get(key)) else None)
            for k, key in (("version", "__version__"), ("git", "git_version"), ("cuda", "cuda"))}


def layer_norm_cubin(version: str, cache: Path = CACHE) -> Path:
    """The sm_90 cubin of `version` that holds layer_norm_kernel.cu (extracted once, then cached)."""
    out = cache / f"layer_norm_kernel-{version}.{ARCH}.cubin"
    if out.is_file():
        return out
    whl = wheel(version, cache)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        so = Path(tmp) / "libtorch_cuda.so"
        with zipfile.ZipFile(whl) as z, z.open("torch/lib/libtorch_cuda.so") as src, open(so, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 24)
        subprocess.run([str(cuobjdump(cache)), "-arch", ARCH, "-xelf", "all", str(so)], cwd=tmp, check=True,
                       capture_output=True)
        hits = [p for p in Path(tmp).glob(f"*.{ARCH}.cubin") if MARK in p.read_bytes()]
        if len(hits) != 1:
            raise RuntimeError(f"torch {version}: {len(hits)} {ARCH} cubins mention layer_norm_kernel.cu, expected 1")
        shutil.move(str(hits[0]), out)
    return out


def sass_by_function(path: Path, cache: Path = CACHE) -> dict[str, list[str]]:
    """Mangled kernel name -> its SASS instructions, without addresses or encodings."""
    text = subprocess.run([str(cuobjdump(cache)), "-sass", str(path)], check=True, capture_output=True,
                          text=True).stdout
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            current = out.setdefault(m.group(1), [])
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if m and current is not None:
            current.append(re.sub(r"\s+", " ", m.group(1)))
    return out


def fp_sequence(instructions: list[str]) -> list[str]:
    """The floating-point opcodes (with modifiers) in program order; predicates dropped."""
    ops = []
    for ins in instructions:
        op = re.sub(r"^@!?U?P\w+\s+", "", ins).split(" ")[0]
        if FP_OPCODE.match(op):
            ops.append(op)
    return ops


def _digest(items: list[str]) -> str:
    return hashlib.sha256("\n".join(items).encode()).hexdigest()[:16]


def describe(version: str, cache: Path = CACHE) -> dict:
    """One release's entry of reference/torch_versions.json."""
    whl = wheel(version, cache)
    cub = layer_norm_cubin(version, cache)
    sass = sass_by_function(cub, cache)
    names = sorted(sass)
    demangled = cubin_mod.demangle(names)
    kernels = {}
    for mangled, full in sorted(zip(names, demangled), key=lambda p: p[1]):
        fp = fp_sequence(sass[mangled])
        kernels[full] = {"mangled": mangled, "sass": _digest(sass[mangled]), "instructions": len(sass[mangled]),
                         "fp": _digest(fp), "fp_instructions": len(fp)}
    return {"wheel": whl.name, "wheel_sha256": sha256_file(whl), **wheel_facts(whl),
            "cubin_sha256": sha256_file(cub), "kernels": kernels}


def template_of(signature: str) -> str:
    """'void at::native::(anonymous namespace)::X<...>(...)' -> 'X'."""
    return re.search(r"::(\w+)<", signature).group(1)


def compare(pin: dict, other: dict) -> dict:
    """What changed from the pin's kernels to another release's, by template name and arguments."""
    def key(sig: str) -> str:  # template and template arguments: parameter lists may change
        return sig[sig.index("::(anonymous namespace)::") + 25:sig.index(">(") + 1]
    a = {key(s): (s, k) for s, k in pin["kernels"].items()}
    b = {key(s): (s, k) for s, k in other["kernels"].items()}
    common = sorted(set(a) & set(b))
    return {"kernels": len(b), "removed": sorted(set(a) - set(b)), "added": sorted(set(b) - set(a)),
            "signature_changed": sorted(f"{a[k][0]} -> {b[k][0]}" for k in common if a[k][0] != b[k][0]),
            "sass_identical": sum(a[k][1]["sass"] == b[k][1]["sass"] for k in common),
            "fp_identical": sum(a[k][1]["fp"] == b[k][1]["fp"] for k in common),
            "fp_differ": sorted(k for k in common if a[k][1]["fp"] != b[k][1]["fp"]),
            "common": len(common)}
