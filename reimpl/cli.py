"""python -m reimpl: compile, show launch plans, check parity with torch, benchmark, record launches."""
from __future__ import annotations

import argparse
import json
import sys


def _cmd_compile(args) -> int:
    from . import compile as compile_mod, cubin
    prog = compile_mod.build(args.arch, use_cache=not args.no_cache)
    smem = cubin.static_shared_bytes(prog.cubin)
    names = cubin.demangle(list(prog.lowered.values()))
    print(f"{len(prog.lowered)} kernels for {args.arch}, {len(prog.cubin)} bytes of cubin"
          f"{' (from cache)' if prog.from_cache else ''}; options: {' '.join(compile_mod.compile_options(args.arch))}")
    for mangled, name in zip(prog.lowered.values(), names):
        print(f"  static smem {smem.get(mangled, 0):5d} B  {name}")
    if prog.log:
        print(prog.log)
    return 0


def _case_from_args(args):
    from .cases import Case
    shape = tuple(int(s) for s in args.shape.split(","))
    return Case(args.op, args.dtype, shape, norm_ndim=args.norm_ndim, weight=not args.no_weight,
                bias=not args.no_bias, x_offset=args.x_offset, w_offset=args.w_offset, b_offset=args.b_offset)


def _cmd_plan(args) -> int:
    """Run the host dispatch with a recording runtime: which kernels, grid, block, shared memory."""
    from . import runtime
    from .layer_norm_kernel import _fused_rms_norm_cuda, layer_norm_cuda
    case = _case_from_args(args)
    x, w, b = case.make_inputs("cpu", values=False)
    with runtime.use(runtime.RecordingRuntime()) as rt:
        if case.op == "layer_norm":
            layer_norm_cuda(x, case.normalized_shape, w, b, 1e-5)
        else:
            _fused_rms_norm_cuda(x, case.normalized_shape, w, None)
    print(case.id)
    if not rt.launches:
        print("  (no launch)")
    for l in rt.launches:
        print(f"  {l.kernel}  grid {list(l.grid)}  block {list(l.block)}  dynamic smem {l.shared}")
    return 0


def _cmd_parity(args) -> int:
    import torch
    if not torch.cuda.is_available():
        print("parity needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    from . import cases
    from .parity import check_cases
    groups = {"paths": cases.path_cases(), "values": cases.value_cases(), "eps": cases.eps_cases(),
              "layouts": cases.layout_cases(), "random": cases.random_cases(args.random)}
    if not args.quick:
        groups = {"shape_grid": cases.shape_grid(), **groups}
    failed = 0
    print(f"{'group':12s} {'cases':>6s} {'mismatched':>10s}")
    for name, cs in groups.items():
        bad = check_cases(cs)
        failed += len(bad)
        print(f"{name:12s} {len(cs):6d} {len(bad):10d}")
        for line in bad[:10]:
            print("   ", line)
    print("bit-identical to torch" if failed == 0 else f"{failed} cases differ")
    return 1 if failed else 0


def _cmd_bench(args) -> int:
    from .bench import run
    text = run()
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


def _cmd_record(args) -> int:
    from .cases import launch_cases
    from .record import record_torch_launches
    data = record_torch_launches(launch_cases())
    with open(args.out, "w") as f:
        json.dump(data, f, indent=0)
        f.write("\n")
    print(f"recorded {len(data['cases'])} cases to {args.out}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m reimpl", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="compile the CUDA mirror with NVRTC (no GPU needed)")
    c.add_argument("--arch", default="sm_90")
    c.add_argument("--no-cache", action="store_true")
    c.set_defaults(fn=_cmd_compile)
    pl = sub.add_parser("plan", help="show the launches the host dispatch makes for a case (no GPU needed)")
    pl.add_argument("--op", choices=("layer_norm", "rms_norm"), default="layer_norm")
    pl.add_argument("--dtype", choices=("fp32", "fp16", "bf16", "fp64"), default="fp32")
    pl.add_argument("--shape", default="64,1024", help="comma-separated, e.g. 8,128,768")
    pl.add_argument("--norm-ndim", type=int, default=1)
    pl.add_argument("--no-weight", action="store_true")
    pl.add_argument("--no-bias", action="store_true")
    pl.add_argument("--x-offset", type=int, default=0)
    pl.add_argument("--w-offset", type=int, default=0)
    pl.add_argument("--b-offset", type=int, default=0)
    pl.set_defaults(fn=_cmd_plan)
    pa = sub.add_parser("parity", help="compare the mirror's bits with torch's on the GPU")
    pa.add_argument("--quick", action="store_true", help="skip the large shape grid")
    pa.add_argument("--random", type=int, default=2000, help="random sweep size")
    pa.set_defaults(fn=_cmd_parity)
    b = sub.add_parser("bench", help="GPU time and host overhead, ours vs torch")
    b.add_argument("--out")
    b.set_defaults(fn=_cmd_bench)
    r = sub.add_parser("record-launches", help="record torch's forward launches (GPU) into a JSON file")
    r.add_argument("--out", required=True)
    r.set_defaults(fn=_cmd_record)
    args = p.parse_args(argv)
    return args.fn(args)
