"""`python -m reimpl doctor`: the user's versions against the pin, and what they mean for parity.

Bits are checked against the torch that is installed, so the question a user needs answered first
is whether that torch's kernels are the pinned ones. The answer comes from two committed files:
reference/torch_versions.json (each release's layer_norm_kernel.cu instantiations and SASS
fingerprints, read off its wheel on a CPU) and results/torch_versions_gpu.json (each release's own
kernels run on the GPU under our host dispatch, compared with the mirror bit for bit).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "reference" / "torch_versions.json"
GPU_MATRIX = ROOT / "results" / "torch_versions_gpu.json"

EXACT = "exact pin"
PROVEN = "kernels proven identical"
DIFFER = "kernels differ"
UNTESTED = "untested"


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def release_of(version: str) -> str:
    """'2.13.0+cu130' -> '2.13.0'."""
    return re.split(r"[+a-z]", version, maxsplit=1)[0]


def verdict(torch_version: str, git_version: str | None, matrix: dict | None = None,
            gpu: dict | None = None) -> tuple[str, str]:
    """(verdict, one-line explanation) for an installed torch."""
    from .. import TORCH_GIT_VERSION, TORCH_VERSION
    matrix = _load(MATRIX) if matrix is None else matrix
    gpu = _load(GPU_MATRIX) if gpu is None else gpu
    release = release_of(torch_version)
    if release == TORCH_VERSION and git_version == TORCH_GIT_VERSION:
        return EXACT, f"torch {torch_version} is the release and commit this repository mirrors"
    if release == TORCH_VERSION:
        return UNTESTED, (f"torch {torch_version} has git {git_version}, not the pinned {TORCH_GIT_VERSION[:12]}: "
                          "a source build of another commit; nothing is known about its kernels")
    runs = gpu.get("releases", {}).get(release)
    static = matrix.get("releases", {}).get(release)
    dispatch = (static or {}).get("dispatch_differences") or []
    host = ("; known host-side differences: " + "; ".join(dispatch)) if dispatch else ""
    if not runs or "forward" not in runs:
        known = " (its kernel binaries are listed, but were not run on a GPU)" if static else ""
        return UNTESTED, f"torch {release} is not in the version matrix{known}{host}"
    families = {**runs["forward"], **{f"bwd_{k}": v for k, v in runs["backward"].items()}}
    differ = sorted(f for f, r in families.items() if r["mismatched_cases"] or r.get("absent"))
    total = sum(r["cases"] for r in runs["forward"].values()) + sum(r["cases"] for r in runs["backward"].values())
    if not differ:
        return PROVEN, (f"torch {release}'s own kernels gave the mirror's bits in every kernel family "
                        f"({total} family-case checks on {gpu.get('device', 'the GPU')}){host}")
    return DIFFER, f"torch {release}'s kernels differ: expect these groups to differ: {', '.join(differ)}{host}"


def release_facts(torch_version: str) -> list[str]:
    """What is known of the user's release beyond its kernels, and how: the host dispatch (read from
    the copy that stands for it) and inputs past 2^32 elements (measured or inferred)."""
    from ..upstream.dispatch import RELEASES
    facts = RELEASES.get(release_of(torch_version))
    if facts is None:
        return ["host dispatch  unknown for this release (no copy of its layer_norm_kernel.cu was read)"]
    (host, host_how), (large, large_how) = facts
    return [f"host dispatch  {host_how}: {host}", f"past 2^32 el.  {large_how}: {large}"]


def environment() -> dict:
    """What is installed here, each item or None where it cannot be found."""
    env: dict = {}
    try:
        import torch
        env["torch"] = torch.__version__
        env["torch_git"] = torch.version.git_version
        env["cuda_runtime"] = torch.version.cuda
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(torch.cuda.current_device())
            env["gpu"] = p.name
            env["capability"] = f"{p.major}.{p.minor}"
    except ImportError:
        env["torch"] = None
    try:
        import cupy
        env["cupy"] = cupy.__version__
        v = cupy.cuda.runtime.driverGetVersion()
        env["driver_cuda"] = f"{v // 1000}.{v % 1000 // 10}"
    except Exception:  # CuPy missing, or no driver on this machine
        env.setdefault("cupy", None)
    try:
        from ..device import compile as compile_mod, nvrtc
        from ..mirror.kernel_table import SOURCE
        env["nvrtc"] = ".".join(map(str, nvrtc.version()))
        arch = "sm_" + env["capability"].replace(".", "") if env.get("capability") else "sm_90"
        env["cubin_cache"] = {"arch": arch,
                              "warm": (compile_mod.cache_path(SOURCE, arch) / "kernels.cubin").is_file()}
    except Exception as e:  # NVRTC or the CUDA headers missing
        env["nvrtc"] = None
        env["cubin_cache"] = {"error": str(e)}
    return env


def report(env: dict | None = None) -> str:
    """The header `doctor`, `parity` and `bench` print."""
    from .. import TORCH_GIT_VERSION, TORCH_VERSION
    env = environment() if env is None else env
    cache = env.get("cubin_cache", {})
    lines = [f"pin            torch {TORCH_VERSION} (git {TORCH_GIT_VERSION[:12]}), CUDA 13.0 build",
             f"torch          {env.get('torch')} (git {(env.get('torch_git') or '?')[:12]})",
             f"CUDA runtime   {env.get('cuda_runtime') or 'none (a CPU build of torch)'}"
             + (f"; driver supports CUDA {env['driver_cuda']}" if env.get("driver_cuda") else ""),
             f"GPU            {env.get('gpu', 'none')}" + (f" (compute capability {env['capability']})"
                                                            if env.get("capability") else ""),
             f"CuPy           {env.get('cupy') or 'not installed (needed to launch on a GPU)'}",
             f"NVRTC          {env.get('nvrtc') or 'not found'}",
             "cubin cache    " + (f"{'warm' if cache['warm'] else 'cold (the first launch compiles)'} for {cache['arch']}"
                                  if "warm" in cache else cache.get("error", "?"))]
    if env.get("torch"):
        v, why = verdict(env["torch"], env.get("torch_git"))
        if not env.get("cuda_runtime"):
            why = f"this is a CPU build, so parity cannot run here; for the CUDA wheel of the same release: {why}"
        lines.append(f"verdict        {v}: {why}")
        lines += release_facts(env["torch"])
    else:
        lines.append("verdict        no torch installed: scripts/main.sh installs the pin")
    return "\n".join(lines)
