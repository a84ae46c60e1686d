"""A tiny driver for stepping through our kernel's source with cuda-gdb (docs/guide/cuda-gdb.md).

    python scripts/gpu/cuda_gdb_demo.py build              compile the debug cubin (-G -lineinfo) into the cache
    python scripts/gpu/cuda_gdb_demo.py run                the debuggee: one 1 x 256 float row through
                                                       vectorized_layer_norm_kernel<float, float, false>
    python scripts/gpu/cuda_gdb_demo.py commands FILE      write the cuda-gdb command file (line numbers are
                                                       looked up in the current source)
    python scripts/gpu/cuda_gdb_demo.py numerics [--json F] debug (-G) kernels against torch on forward cases,
                                                       and FFMA/FMUL/FADD counts of the debug and release SASS

`run` uses CuPy alone (no torch), so the process cuda-gdb starts stays small: it loads the debug cubin
with cuModuleLoadData at run time, which is why the breakpoints are set as pending ones. The launch
is the one the host mirror makes for this input (`python -m reimpl plan --dtype fp32 --shape 1,256`):
grid (1), block (32, 4), 24 bytes of dynamic shared memory.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from reimpl.device import compile as compile_mod  # noqa: E402
from reimpl.mirror import kernel_table as K  # noqa: E402

DEBUG_OPTIONS = ("-G", "-lineinfo")  # --device-debug: no optimization, locals kept, every line steppable
KERNEL = K.vectorized_layer_norm_kernel[K.float_, K.float_, False]
N, EPS = 256, 1e-5
SOURCE = K.SOURCE.directory / K.SOURCE.main


def arch() -> str:
    import cupy
    p = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    return f"sm_{p['major']}{p['minor']}"


def build(kernels=None, options=DEBUG_OPTIONS, target: str | None = None):
    return compile_mod.build(K.SOURCE, target or arch(), kernels or [KERNEL], extra_options=options)


def run() -> None:
    import cupy
    prog = build()
    module = cupy.cuda.function.Module()
    module.load(prog.cubin)
    fn = module.get_function(prog.lowered[KERNEL.expr])
    rng = np.random.default_rng(0)
    x = cupy.asarray(rng.standard_normal(N).astype(np.float32))
    gamma = cupy.asarray(rng.standard_normal(N).astype(np.float32))
    beta = cupy.asarray(rng.standard_normal(N).astype(np.float32))
    mean, rstd, y = cupy.empty(1, cupy.float32), cupy.empty(1, cupy.float32), cupy.empty(N, cupy.float32)
    fn((1,), (32, 4), (np.int32(N), np.float32(EPS), x, gamma, beta, mean, rstd, y), shared_mem=24)
    cupy.cuda.runtime.deviceSynchronize()
    print(f"mean {float(mean.get()[0])!r} rstd {float(rstd.get()[0])!r} y[:4] {y.get()[:4].tolist()}")


def _line(pattern: str, after: str | None = None) -> int:
    """1-based line of the first source line containing `pattern` (after the line containing `after`)."""
    lines = SOURCE.read_text().splitlines()
    start = 0
    if after:
        start = next(i for i, ln in enumerate(lines) if after in ln)
    return next(i for i, ln in enumerate(lines[start:], start) if pattern in ln) + 1


def commands(path: str) -> None:
    shfl = _line("WelfordDataLN wdB{WARP_SHFL_DOWN(wd.mean, offset)", after="compute_stats(")
    call = _line("wd = cuWelfordCombine<rms_norm>(wd, wdB);", after="compute_stats(")
    combine = _line("U delta = dataB.mean - dataA.mean;", after="cuWelfordCombine(")
    # every thread of the block stops at a plain breakpoint, and the focus goes to whichever warp
    # got there first; the condition keeps the focus on thread (0,0,0), whose warp read data
    only_t0 = "if threadIdx.x == 0 && threadIdx.y == 0"
    text = f"""\
set pagination off
set confirm off
set width 0
set breakpoint pending on
directory {K.SOURCE.directory}
echo \\n### 1. break in compute_stats at the warp's shuffle-down loop (pending: the cubin loads at run time)\\n
break {SOURCE.name}:{shfl} {only_t0}
run
info cuda kernels
cuda kernel block thread
backtrace
print N
print n_vec_to_read
print numx
print thrx
print offset
print wd
echo \\n### 2. run to the combine (the three shuffles done), then step over it\\n
until {call}
print wdB
next
print wd
echo \\n### 3. other threads: lane 5 of warp 0, then lane 0 of warp 2 (thrx 64 >= n_vec_to_read: read nothing)\\n
cuda thread (5,0,0)
print thrx
print wd
cuda thread (0,2,0)
print thrx
print wd
echo \\n### 4. back to thread (0,0,0); the next round halves the offset\\n
cuda thread (0,0,0)
continue
print offset
print wd
delete
echo \\n### 5. inside cuWelfordCombine (called as cuWelfordCombine(wd, wdB): dataB is this lane's state)\\n
break {SOURCE.name}:{combine} {only_t0}
continue
backtrace 2
print dataB
print dataA
next
next
next
next
next
next
info locals
finish
delete
echo \\n### 6. run to the end\\n
continue
"""
    Path(path).write_text(text)
    print(f"wrote {path}: compute_stats shuffle at line {shfl}, combine call {call}, cuWelfordCombine body {combine}")


# ---- what -G changes ------------------------------------------------------------------------------------

def numerics_cases():
    from reimpl.checks.cases import Case
    out = []
    for op in ("layer_norm", "rms_norm"):
        for dt in ("fp32", "fp16", "bf16"):
            for n in (1024, 1023):                  # vectorized path, fallback path (N % 4 != 0)
                for values in ("normal", "offset"):
                    out.append(Case(op, dt, (64, n), values=values, seed=11))
            out.append(Case(op, dt, (8, 4096), weight=False, bias=False, seed=12))
    out.append(Case("layer_norm", "fp32", (1, 256), seed=0))
    return out


def sass_counts(cubin: bytes, tool: str, workdir: Path, name: str) -> dict:
    path = workdir / f"{name}.cubin"
    path.write_bytes(cubin)
    sass = subprocess.run([tool, "-c", str(path)], check=True, capture_output=True, text=True).stdout
    ops = re.findall(r"/\*[0-9a-f]+\*/\s+(?:@!?P\d\s+)?([A-Z][A-Z0-9]*)[.\s]", sass)
    return {op: ops.count(op) for op in ("FFMA", "FMUL", "FADD", "DFMA", "DMUL", "DADD")}


def per_line(cubin: bytes, tool: str, workdir: Path, name: str) -> dict:
    """Source line -> folded FP instructions, over every function of the cubin (-G keeps calls)."""
    sys.path.insert(0, str(ROOT / "scripts" / "gpu"))
    import sass_fma_table as S
    path = workdir / f"{name}_lineinfo.cubin"
    path.write_bytes(cubin)
    merged: dict = {}
    for data in S.parse(S.disassemble(path, tool)).values():
        for w, toks in data["lines"].items():
            merged.setdefault(w, []).extend(toks)
    return {f"{f}:{n}": ", ".join(f"{t} x{c}" if c > 1 else t for t, c in S.summarize(S.fold(toks)))
            for (f, n), toks in sorted(merged.items()) if toks}


def numerics(json_out: str | None) -> None:
    import torch

    from reimpl.device import runtime
    from reimpl.checks.parity import bit_mismatches

    class DebugRuntime(runtime.TorchCupyRuntime):
        """TorchCupyRuntime on the -G build of the forward kernels (replaces its module loader)."""
        def _load_module(self, device):
            import cupy
            props = self.getCurrentDeviceProperties()
            prog = build(K.forward_instantiations(), target=f"sm_{props['major']}{props['minor']}")
            with cupy.cuda.Device(device):
                module = cupy.cuda.function.Module()
                module.load(prog.cubin)
            return prog, module

    rows = []
    release_rt, debug_rt = runtime.get(), DebugRuntime()
    for case in numerics_cases():
        args = case.make_args("cuda")
        theirs = case.run_torch(*args)
        row = {"case": case.id}
        for label, rt in (("release", release_rt), ("debug", debug_rt)):
            with runtime.use(rt):
                ours = case.run_ours(*args)
            row[label] = {n: bit_mismatches(o, t) for n, o, t in zip(case.output_names, ours, theirs)}
            if label == "debug":
                o, t = ours[0].double(), theirs[0].double()
                ok = torch.isfinite(o) & torch.isfinite(t)
                scale = t[ok].abs().max().item() if ok.any() else 1.0
                row["max_abs_diff_over_max_abs_out"] = (o[ok] - t[ok]).abs().max().item() / scale if ok.any() else 0.0
        row["elements"] = {n: t.numel() for n, t in zip(case.output_names, theirs)}
        rows.append(row)
        print(f"{case.id:56s} release differs {sum(row['release'].values()):5d}  debug differs "
              + " ".join(f"{n} {row['debug'][n]}/{row['elements'][n]}" for n in case.output_names)
              + f"  max|diff|/max|out| {row['max_abs_diff_over_max_abs_out']:.1e}", flush=True)
    torch.cuda.synchronize()
    tool = shutil.which("nvdisasm") or "/usr/local/cuda/bin/nvdisasm"
    work = Path("/tmp/cuda_gdb_demo")
    work.mkdir(exist_ok=True)
    fwd = K.forward_instantiations()
    sass = {"release (forward kernels)": sass_counts(build(fwd, options=()).cubin, tool, work, "release"),
            "debug -G (forward kernels)": sass_counts(build(fwd).cubin, tool, work, "debug"),
            "release (vectorized<float>)": sass_counts(build([KERNEL], options=()).cubin, tool, work, "release_vec"),
            "debug -G (vectorized<float>)": sass_counts(build([KERNEL]).cubin, tool, work, "debug_vec")}
    for k, v in sass.items():
        print(f"{k:30s} {v}")
    rel = per_line(build([KERNEL], options=("-lineinfo",)).cubin, tool, work, "release_vec")
    dbg = per_line(build([KERNEL]).cubin, tool, work, "debug_vec")
    lines = {w: {"release": rel.get(w, ""), "debug": dbg.get(w, "")} for w in sorted(set(rel) | set(dbg))}
    print(f"per line of {KERNEL.name}, release | debug:")
    for w, v in lines.items():
        print(f"  {w:26s} {v['release']:40s} | {v['debug']}")
    out_names = ("out", "mean", "rstd")
    summary = {"cases": len(rows),
               "elements": {n: sum(r["elements"].get(n, 0) for r in rows) for n in out_names},
               "release_differing": sum(sum(r["release"].values()) for r in rows),
               "debug_differing": {n: sum(r["debug"].get(n, 0) for r in rows) for n in out_names},
               "cases_debug_differs": sum(1 for r in rows if sum(r["debug"].values())),
               "max_abs_diff_over_max_abs_out": max(r["max_abs_diff_over_max_abs_out"] for r in rows)}
    print(json.dumps(summary))
    if json_out:
        Path(json_out).write_text(json.dumps({"summary": summary, "sass": sass, "per_line": lines, "rows": rows,
                                              "torch": torch.__version__, "device": torch.cuda.get_device_name()},
                                             indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("build", "run", "commands", "numerics"))
    ap.add_argument("path", nargs="?")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.mode == "build":
        prog = build()
        print(f"debug cubin: {len(prog.cubin)} bytes, {KERNEL.name} -> {prog.lowered[KERNEL.expr]}")
    elif args.mode == "run":
        run()
    elif args.mode == "commands":
        commands(args.path or "/tmp/cuda_gdb_demo.gdb")
    else:
        numerics(args.json)


if __name__ == "__main__":
    main()
