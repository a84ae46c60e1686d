"""python -m reimpl: compile, show launch plans, check parity with torch, benchmark, record launches,
fetch the pinned upstream files."""
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
    from .cases_backward import BackwardCase
    shape = tuple(int(s) for s in args.shape.split(","))
    common = dict(norm_ndim=args.norm_ndim, weight=not args.no_weight, bias=not args.no_bias,
                  x_offset=args.x_offset, w_offset=args.w_offset, b_offset=args.b_offset)
    if args.backward:
        mask = tuple(m == "1" for m in args.mask.split(","))
        return BackwardCase(args.op, args.dtype, shape, mask=mask, dy_offset=args.dy_offset, **common)
    return Case(args.op, args.dtype, shape, **common)


def _cmd_plan(args) -> int:
    """Run the host dispatch with a recording runtime: which kernels, grid, block, shared memory."""
    from .plan import host_launches
    case = _case_from_args(args)
    launches = host_launches(case)
    print(case.id)
    if not launches:
        print("  (no launch from layer_norm_kernel.cu)")
    for l in launches:
        print(f"  {l.kernel}  grid {list(l.grid)}  block {list(l.block)}  dynamic smem {l.shared}")
    return 0


def _cmd_parity(args) -> int:
    import torch
    if not torch.cuda.is_available():
        print("parity needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    from . import cases, cases_backward as bwd
    from .parity import check_cases
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
    from .bench import run, run_backward
    text = run_backward() if args.backward else run()
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


def _cmd_record(args) -> int:
    from .record import record_torch_launches
    if args.backward:
        from .cases_backward import launch_cases
    else:
        from .cases import launch_cases
    data = record_torch_launches(launch_cases())
    with open(args.out, "w") as f:
        json.dump(data, f, indent=0)
        f.write("\n")
    print(f"recorded {len(data['cases'])} cases to {args.out}")
    return 0


def _cmd_fetch(args) -> int:
    from .fetch import main as fetch_main
    return fetch_main(args.base, args.write_hash)


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
    pl.add_argument("--backward", action="store_true", help="plan the backward instead of the forward")
    pl.add_argument("--mask", default="1,1,1", help="backward output_mask, e.g. 1,0,1")
    pl.add_argument("--dy-offset", type=int, default=0)
    pl.set_defaults(fn=_cmd_plan)
    pa = sub.add_parser("parity", help="compare the mirror's bits with torch's on the GPU")
    pa.add_argument("--quick", action="store_true", help="skip the large shape grid")
    pa.add_argument("--random", type=int, default=2000, help="random sweep size (the backward's is half)")
    pa.add_argument("--which", choices=("forward", "backward", "both"), default="both")
    pa.set_defaults(fn=_cmd_parity)
    b = sub.add_parser("bench", help="GPU time and host overhead, ours vs torch")
    b.add_argument("--out")
    b.add_argument("--backward", action="store_true", help="forward+backward and backward-only instead of forward")
    b.set_defaults(fn=_cmd_bench)
    r = sub.add_parser("record-launches", help="record torch's launches (GPU) for the case matrix into a JSON file")
    r.add_argument("--out", required=True)
    r.add_argument("--backward", action="store_true", help="the backward's case matrix instead of the forward's")
    r.set_defaults(fn=_cmd_record)
    f = sub.add_parser("fetch-upstream", help="download the pinned upstream files into .cache/upstream and verify "
                       "their sha256 (and the installed wheel's headers when it is torch 2.11.0)")
    f.add_argument("--base", help="fetch from this base URL instead of raw.githubusercontent.com at the pin")
    f.add_argument("--write-hash", action="store_true", help="record the sha256 of files the manifest has none for")
    f.set_defaults(fn=_cmd_fetch)
    args = p.parse_args(argv)
    return args.fn(args)
