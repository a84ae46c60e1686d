"""python -m reimpl: compile, show launch plans, check parity with torch, benchmark, record launches,
trace the emulated kernels step by step, fetch the pinned upstream files."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import sys


def _cmd_compile(args) -> int:
    from .device import compile as compile_mod, cubin
    from .mirror.kernel_table import SOURCE
    prog = compile_mod.build(SOURCE, args.arch, use_cache=not args.no_cache)
    smem = cubin.static_shared_bytes(prog.cubin)
    names = cubin.demangle(list(prog.lowered.values()))
    if args.quiet:
        print(f"compiled {len(prog.lowered)} kernels for {args.arch} with NVRTC"
              f"{' (from the cache)' if prog.from_cache else ''}")
        return 0
    print(f"{len(prog.lowered)} kernels for {args.arch}, {len(prog.cubin)} bytes of cubin"
          f"{' (from cache)' if prog.from_cache else ''}; options: {' '.join(compile_mod.compile_options(SOURCE, args.arch))}")
    for mangled, name in zip(prog.lowered.values(), names):
        print(f"  static smem {smem.get(mangled, 0):5d} B  {name}")
    if prog.log:
        print(prog.log)
    return 0


def _case_from_args(args):
    from .checks.cases import Case
    from .checks.cases_backward import BackwardCase
    shape = tuple(int(s) for s in args.shape.split(","))
    common = dict(norm_ndim=args.norm_ndim, weight=not args.no_weight, bias=not args.no_bias,
                  x_offset=args.x_offset, w_offset=args.w_offset, b_offset=args.b_offset)
    if args.backward:
        mask = tuple(m == "1" for m in args.mask.split(","))
        return BackwardCase(args.op, args.dtype, shape, mask=mask, dy_offset=args.dy_offset, **common)
    return Case(args.op, args.dtype, shape, **common)


def _cmd_plan(args) -> int:
    """Run the host dispatch with a recording runtime: which kernels, grid, block, shared memory."""
    from .checks.plan import host_launches
    case = _case_from_args(args)
    launches = host_launches(case)
    print(case.id)
    if not launches:
        print("  (no launch from layer_norm_kernel.cu)")
    for l in launches:
        print(f"  {l.kernel}  grid {list(l.grid)}  block {list(l.block)}  dynamic smem {l.shared}")
    return 0


def _cmd_doctor(args) -> int:
    from .checks.doctor import report
    print(report())
    return 0


def _cmd_parity(args) -> int:
    import torch
    from .checks.doctor import report
    print(report(), end="\n\n")
    if not torch.cuda.is_available():
        print("parity needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    from .checks import cases, cases_backward as bwd
    from .checks.parity import check_cases
    groups = {}
    if args.which in ("forward", "both"):
        groups.update({"paths": cases.path_cases(), "values": cases.value_cases(), "eps": cases.eps_cases(),
                       "layouts": cases.layout_cases(), "random": cases.random_cases(args.random)})
        if not args.quick:
            groups = {"shape_grid": cases.shape_grid(), **groups}
    if args.which in ("backward", "both"):
        groups.update({"bwd_paths": bwd.path_cases(), "bwd_masks": bwd.mask_cases(),
                       "bwd_values": bwd.value_cases(), "bwd_layouts": bwd.layout_cases(),
                       "bwd_random": bwd.random_cases(max(args.random // 2, 1))})
        if not args.quick:
            groups.update({"bwd_shape_grid": bwd.shape_grid(), "bwd_partial": bwd.partial_cases()})
    failed, total, done = 0, sum(len(cs) for cs in groups.values()), 0
    rows = []
    for name, cs in groups.items():
        bad = []
        step = max(1, len(cs) // 50)
        for i in range(0, len(cs), step):
            bad += check_cases(cs[i:i + step])
            done += len(cs[i:i + step])
            _progress(done, total, name)
        failed += len(bad)
        rows.append((name, len(cs), bad))
    _progress(total, total, "", end=True)
    print(f"{'group':14s} {'cases':>6s} {'differ':>7s}")
    for name, n, bad in rows:
        print(f"{name:14s} {n:6d} {len(bad):7d}")
        for line in bad[:10]:
            print("   ", line)
    print(f"{total} cases: every output bit-identical to torch's" if failed == 0 else f"{failed} cases differ")
    return 1 if failed else 0


def _progress(done: int, total: int, what: str, end: bool = False) -> None:
    """A one-line progress bar on stderr, redrawn in place (only on a terminal)."""
    if not sys.stderr.isatty():
        return
    width = 40
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {what:14s}")
    if end:
        sys.stderr.write("\r" + " " * (width + 40) + "\r")
    sys.stderr.flush()


def _cmd_bench(args) -> int:
    from .checks.bench import run, run_backward
    from .checks.doctor import report
    print(report(), end="\n\n")
    if args.host:
        from .checks.host import table
        text = table()
    else:
        text = run_backward() if args.backward else run()
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


def _cmd_record(args) -> int:
    from .checks.record import record_torch_launches
    if args.backward:
        from .checks.cases_backward import launch_cases
    else:
        from .checks.cases import launch_cases
    data = record_torch_launches(launch_cases())
    with open(args.out, "w") as f:
        json.dump(data, f, indent=0)
        f.write("\n")
    print(f"recorded {len(data['cases'])} cases to {args.out}")
    return 0


def _trace_inputs(case):
    """None where torch is installed: the case makes its inputs with torch's CPU generator. Without
    torch, their twins from reimpl/emulator/case_inputs.py (the same bits; (grad_out, x, weight, bias)
    for a backward case, (x, weight, bias) for a forward one)."""
    import importlib.util
    if importlib.util.find_spec("torch") is not None:
        return None
    from .checks.cases_backward import DY_SEED_SALT, BackwardCase
    from .emulator import case_inputs
    x, w, b = case_inputs.make_inputs(case)
    if isinstance(case, BackwardCase):
        return case_inputs.make_grad_out(case, case.seed + DY_SEED_SALT), x, w, b
    return x, w, b


def _cmd_trace(args) -> int:
    """Emulate a small case on the CPU and print its step trace (reimpl/emulator/trace.py)."""
    from . import emulator
    from .emulator import trace, trace_view
    if args.list_functions:
        print("\n".join(trace_view.device_functions()))
        return 0
    case = dataclasses.replace(_case_from_args(args), values=args.values, seed=args.seed, eps=args.eps)
    if args.backward:
        case = dataclasses.replace(case, dy_values=args.dy_values)
    if args.backward:  # grad_out from the case; mean and rstd from the emulated forward (not traced)
        run = functools.partial(emulator.run_backward_case, case, *emulator.backward_args(case, _trace_inputs(case)))
    else:
        run = functools.partial(emulator.run_case, case, *(_trace_inputs(case) or case.make_inputs("cpu")))
    stop = contextlib.nullcontext()
    if args.break_at:
        name, _, nth = args.break_at.partition(":")
        stop = trace_view.break_in(name, int(nth or 1))
    with trace.recording(meta={"case": case.as_dict()}) as tr, stop:
        run()
    if args.out:
        with open(args.out, "w") as f:
            f.write(tr.to_json())
    kinds = set(args.kind.split(",")) if args.kind else None
    warp = None if args.thread is not None or args.warp == "all" else int(args.warp)
    print(case.id)
    print(trace_view.format_trace(tr, args.block, warp, args.thread, kinds))
    if args.out:
        print(f"{len(tr.steps)} steps of {len({s.block for s in tr.steps})} blocks written to {args.out}")
    return 0


def _cmd_fetch(args) -> int:
    from .upstream.fetch import main as fetch_main
    return fetch_main(args.base, args.write_hash)


def _load_function(spec: str):
    """MODULE:FUNCTION (MODULE importable from the current directory, or a path to a .py file)."""
    import importlib
    import importlib.util
    import os
    mod_name, _, fn_name = spec.partition(":")
    if not fn_name:
        raise SystemExit(f"judge: expected MODULE:FUNCTION, got {spec!r}")
    if mod_name.endswith(".py"):
        spec_ = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(mod_name))[0], mod_name)
        module = importlib.util.module_from_spec(spec_)
        spec_.loader.exec_module(module)
    else:
        sys.path.insert(0, os.getcwd())
        module = importlib.import_module(mod_name)
    return getattr(module, fn_name)


def _cmd_judge(args) -> int:
    """Judge a user's kernel against torch's bits (GPU), or diagnose saved rows (CPU, NumPy only)."""
    if args.from_file:
        from .testing.diagnosis import Rows, diagnose
        rows = Rows.load(args.from_file)
        print(f"{args.from_file}: {rows.op} {rows.dtype}, {len(rows.x)} rows of {rows.x.shape[1]}")
        print(diagnose(rows))
        return 0
    if not args.function:
        raise SystemExit("judge: give MODULE:FUNCTION, or --from FILE")
    from .testing.verdict import judge
    fn = _load_function(args.function)
    verdict = judge(fn, args.op, dtypes=tuple(args.dtypes.split(",")), device=args.device,
                    backward=args.backward)
    print(verdict)
    saved = next((r for r in verdict.failed if r.rows is not None), None) if args.save else None
    if saved is not None:
        saved.rows.save(args.save)
        print(f"the failing rows of {saved.case.id} saved to {args.save}: "
              f"`python -m reimpl judge --from {args.save}` diagnoses them on any machine")
    return 0 if verdict.ok else 1


def _cmd_exercise(args) -> int:
    """The ladder's exercises (reimpl/testing/exercises.py): list them, write a starter, check a file."""
    from .testing import exercises
    words = args.words
    if args.list or not words:
        print("\n".join(exercises.list_lines()))
        return 0
    if words[0] == "check":
        if len(words) != 3:
            raise SystemExit("exercise check: give NAME FILE, e.g. `python -m reimpl exercise check warp_sums "
                             "exercise_warp_sums.cu`")
        if words[1] not in exercises.BY_NAME:
            raise SystemExit(f"exercise check: no exercise {words[1]!r}; `python -m reimpl exercise --list`")
        return 0 if exercises.check(words[1], words[2], quick=args.quick) else 1
    if len(words) != 1 or words[0] not in exercises.BY_NAME:
        raise SystemExit(f"exercise: no exercise {' '.join(words)!r}; `python -m reimpl exercise --list` lists them")
    try:
        path = exercises.write_starter(words[0], args.out, force=args.force)
    except FileExistsError as e:
        raise SystemExit(f"exercise: {e}") from None
    print(f"wrote {path}: the {exercises.BY_NAME[words[0]].start} rung's kernel, with a TODO saying what to "
          f"write.\ncheck it with: python -m reimpl exercise check {words[0]} {path}")
    return 0


def _case_arguments(p, shape: str) -> None:
    p.add_argument("--op", choices=("layer_norm", "rms_norm"), default="layer_norm")
    p.add_argument("--dtype", choices=("fp32", "fp16", "bf16", "fp64"), default="fp32")
    p.add_argument("--shape", default=shape, help="comma-separated, e.g. 8,128,768")
    p.add_argument("--norm-ndim", type=int, default=1)
    p.add_argument("--no-weight", action="store_true")
    p.add_argument("--no-bias", action="store_true")
    p.add_argument("--x-offset", type=int, default=0)
    p.add_argument("--w-offset", type=int, default=0)
    p.add_argument("--b-offset", type=int, default=0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m reimpl", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="compile the CUDA mirror with NVRTC (no GPU needed)")
    c.add_argument("--arch", default="sm_90")
    c.add_argument("--no-cache", action="store_true")
    c.add_argument("--quiet", action="store_true", help="one line instead of every kernel's signature")
    c.set_defaults(fn=_cmd_compile)
    pl = sub.add_parser("plan", help="show the launches the host dispatch makes for a case (no GPU needed)")
    _case_arguments(pl, shape="64,1024")
    pl.add_argument("--backward", action="store_true", help="plan the backward instead of the forward")
    pl.add_argument("--mask", default="1,1,1", help="backward output_mask, e.g. 1,0,1")
    pl.add_argument("--dy-offset", type=int, default=0)
    pl.set_defaults(fn=_cmd_plan)
    d = sub.add_parser("doctor", help="your torch, CUDA, GPU, CuPy and NVRTC against the pin, with a verdict")
    d.set_defaults(fn=_cmd_doctor)
    pa = sub.add_parser("parity", help="compare the mirror's bits with torch's on the GPU")
    pa.add_argument("--quick", action="store_true", help="skip the large shape grid")
    pa.add_argument("--random", type=int, default=2000, help="random sweep size (the backward's is half)")
    pa.add_argument("--which", choices=("forward", "backward", "both"), default="both")
    pa.set_defaults(fn=_cmd_parity)
    b = sub.add_parser("bench", help="GPU time and host overhead, ours vs torch")
    b.add_argument("--out")
    b.add_argument("--backward", action="store_true", help="forward+backward and backward-only instead of forward")
    b.add_argument("--host", action="store_true", help="host time per call of torch, the mirror and reimpl.fast, "
                   "called through reimpl and installed in torch (reimpl.in_torch): aten ops, functional calls and "
                   "modules; forward, with grad, backward, forward+backward")
    b.set_defaults(fn=_cmd_bench)
    r = sub.add_parser("record-launches", help="record torch's launches (GPU) for the case matrix into a JSON file")
    r.add_argument("--out", required=True)
    r.add_argument("--backward", action="store_true", help="the backward's case matrix instead of the forward's")
    r.set_defaults(fn=_cmd_record)
    t = sub.add_parser("trace", help="emulate a small case on the CPU and print every step (no GPU needed)")
    _case_arguments(t, shape="1,64")
    t.add_argument("--values", default="normal", help="value kind: normal, subnormal, inf, nan, ...")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--eps", type=float, default=1e-5)
    t.add_argument("--block", type=int, default=0, help="which block (row) to print")
    t.add_argument("--warp", default="0", help="which warp to print, or 'all' (default 0)")
    t.add_argument("--thread", type=int, help="print only this thread (linear index x + y*blockDim.x)")
    t.add_argument("--kind", help="only these step kinds, comma-separated (e.g. shfl_down,smem_combine)")
    t.add_argument("--break", dest="break_at", metavar="FUNC[:N]",
                   help="stop in pdb at the Nth call of this emulated device function (e.g. cuWelfordCombine:6)")
    t.add_argument("--list-functions", action="store_true", help="list the names --break accepts")
    t.add_argument("--out", help="also write the whole trace (every block and thread) as JSON")
    t.add_argument("--backward", action="store_true", help="trace the backward kernels (mean and rstd from "
                   "the emulated forward)")
    t.add_argument("--mask", default="1,1,1", help="backward output_mask, e.g. 1,0,1")
    t.add_argument("--dy-offset", type=int, default=0)
    t.add_argument("--dy-values", default="normal", help="value kind of grad_out (backward)")
    t.set_defaults(fn=_cmd_trace)
    f = sub.add_parser("fetch-upstream", help="download the pinned upstream files into .cache/upstream and verify "
                       "their sha256 (and the installed wheel's headers when it is torch 2.11.0)")
    f.add_argument("--base", help="fetch from this base URL instead of raw.githubusercontent.com at the pin")
    f.add_argument("--write-hash", action="store_true", help="record the sha256 of files the manifest has none for")
    f.set_defaults(fn=_cmd_fetch)
    j = sub.add_parser("judge", help="judge your own LayerNorm/RMSNorm against torch's bits and diagnose "
                       "why it differs (GPU; the diagnosis of saved rows needs only NumPy)")
    j.add_argument("function", nargs="?", help="MODULE:FUNCTION or path/to/file.py:FUNCTION, with "
                   "F.layer_norm's (or F.rms_norm's) arguments")
    j.add_argument("--op", choices=("layer_norm", "rms_norm"), default="layer_norm")
    j.add_argument("--dtypes", default="fp32,fp16,bf16", help="comma-separated: fp32, fp16, bf16, fp64")
    j.add_argument("--backward", action="store_true", help="compare dX, dweight, dbias through autograd")
    j.add_argument("--device", help="cuda (default when a GPU is present) or cpu (reference: the emulator)")
    j.add_argument("--save", metavar="FILE", help="save the first failing case's rows (.npz) for --from")
    j.add_argument("--from", dest="from_file", metavar="FILE", help="diagnose rows saved by --save (CPU)")
    j.set_defaults(fn=_cmd_judge)
    ex = sub.add_parser("exercise", help="the ladder's exercises: write a starter kernel for the next rung, or "
                        "check yours (compiles anywhere; accuracy and GB/s on a GPU)")
    ex.add_argument("words", nargs="*", metavar="NAME | check NAME FILE",
                    help="NAME writes the starter of exercise NAME; check NAME FILE checks FILE")
    ex.add_argument("--list", action="store_true", help="list the exercises, one line each")
    ex.add_argument("--out", metavar="FILE", help="where to write the starter (default: exercise_NAME.cu here)")
    ex.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    ex.add_argument("--quick", action="store_true", help="check: skip the accuracy shapes of the largest row count")
    ex.set_defaults(fn=_cmd_exercise)
    args = p.parse_args(argv)
    return args.fn(args)
