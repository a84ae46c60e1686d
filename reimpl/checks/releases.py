"""Each torch release's own layer_norm_kernel.cu kernels, run on the GPU under our host dispatch,
compared with the mirror bit for bit (and, for the pin, with torch itself: the method's control).

The release's sm_90 cubin comes from reimpl/upstream/releases.py's cache. Its kernels are matched to
ours by demangled name and template arguments; where a release's signature differs (2.14.1 gives
RowwiseMomentsCUDAKernel and LayerNormForwardCUDAKernel a leading int64 that their SASS never
reads), `adapt` passes the extra argument. A kernel our 2.11 dispatch asks for that the release
does not instantiate is counted as absent, not as a mismatch.
"""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from ..device import cubin as cubin_mod, runtime
from ..mirror import release as mirror_release
from ..mirror.kernel_table import all_instantiations
from ..upstream import releases
from .parity import bit_mismatches

# which kernel family a launch belongs to, by template name (vectorized vs fallback paths apart)
FAMILY = {"vectorized_layer_norm_kernel": "forward_vectorized", "RowwiseMomentsCUDAKernel": "forward_fallback",
          "LayerNormForwardCUDAKernel": "forward_fallback", "layer_norm_grad_input_kernel": "grad_input",
          "layer_norm_grad_input_kernel_vectorized": "grad_input_vectorized",
          "GammaBetaBackwardCUDAKernelTemplate": "gamma_beta"}
PREFIX = "void at::native::(anonymous namespace)::"


def _short(signature: str) -> str:
    """'void at::native::(anonymous namespace)::X<a, b>(params)' -> 'X<a, b>' (our Kernel.name)."""
    return signature[len(PREFIX):signature.index(">(") + 1]


def cubin_path(version: str, cache: Path = releases.CACHE) -> Path:
    return cache / f"layer_norm_kernel-{version}.{releases.ARCH}.cubin"


def release_functions(version: str, cache: Path = releases.CACHE) -> tuple[bytes, dict[str, str], set[str]]:
    """(the release's cubin, our name expression -> its symbol, the expressions whose signature has
    one more leading int64 than ours). Needs no GPU."""
    data = cubin_path(version, cache).read_bytes()
    mangled = [n[len(".text."):] for n, _ in cubin_mod._sections(data) if n.startswith(".text.")]
    by_name = {_short(full): (m, full) for m, full in zip(mangled, cubin_mod.demangle(mangled))
               if full.startswith(PREFIX)}
    functions, extra = {}, set()
    for k in all_instantiations():
        if k.name in by_name:
            m, full = by_name[k.name]
            functions[k.expr] = m
            params = full[full.index(">(") + 2:-1].split(", ")
            if len(params) == len(k.template.params) + 1 and params[0] == "long":
                extra.add(k.expr)
    return data, functions, extra


def release_runtime(version: str, cache: Path = releases.CACHE) -> runtime.CubinRuntime:
    data, functions, extra = release_functions(version, cache)

    def adapt(kernel, grid, args):
        # the leading int64 (unread by the kernel), where the host followed 2.11 and did not pass it
        # (under reimpl.mirror.release.use(>= 2.14) the host passes it, in the kernel's 2.14 signature)
        if kernel.expr in extra and kernel.template.release is None:
            return ("int64",) + kernel.template.params, (grid[0],) + tuple(args)
        return None, args
    return runtime.CubinRuntime(data, functions, adapt)


def compare(version: str, cases, against_torch: bool = False) -> dict:
    """Per kernel family: cases, mismatched cases, elements compared and differing, cases absent."""
    rt = release_runtime(version)
    out: dict = defaultdict(lambda: {"cases": 0, "mismatched_cases": 0, "elements_compared": 0,
                                     "mismatched_elements": 0, "absent": 0})
    for case in cases:
        args = case.make_args("cuda")
        want = case.run_torch(*args) if against_torch else case.run_ours(*args)
        rt.record = []
        try:
            with runtime.use(rt), mirror_release.use(version):  # the release's own host dispatch too
                got = case.run_ours(*args)
        except runtime.KernelMissing:
            out["absent"]["absent"] += 1
            continue
        families = sorted({FAMILY[re.match(r"\w+", l.kernel).group(0)] for l in rt.record}) or ["none"]
        n = elements = 0
        for o, t in zip(got, want):
            if o is None or t is None:
                n += int((o is None) != (t is None))
                continue
            n += bit_mismatches(o, t)
            elements += t.numel()
        for f in families:
            r = out[f]
            r["cases"] += 1
            r["elements_compared"] += elements
            r["mismatched_elements"] += n
            r["mismatched_cases"] += int(n > 0)
    return dict(out)


def fp_identical_families(version: str, matrix: dict) -> dict[str, bool]:
    """Per family: do all its kernels present in both builds have the pin's FP instruction sequence?"""
    def by_name(rel):
        return {_short(s): k["fp"] for s, k in matrix["releases"][rel]["kernels"].items()}
    pin, other = by_name(releases.PIN), by_name(version)
    same: dict[str, bool] = {}
    for name, fp in other.items():
        fam = FAMILY[re.match(r"\w+", name).group(0)]
        same[fam] = same.get(fam, True) and pin.get(name) == fp
    return same
