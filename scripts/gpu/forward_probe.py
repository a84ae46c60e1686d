"""The fast forward's stream kernel (rows past 16384 elements), group kernel (rows of at most 128) and
lane kernel (rows of 8 to 64 chunks of 16 bytes) under their tuning knobs, beside torch's kernel and a copy in one run. Each variant launches our
kernel directly with the plan's grid and block; the knobs are the stream kernel's chunk U and the
blocks per SM its shared-memory stash is sized for (which sets the stash S and caps the rows in
flight; `0` is no stash), the group kernel's sets of rows K, and the lane kernel's warps per
block W and sets of 32 rows a warp S beside the kernel those rows took before it (`before`: the plan for a pointer that is not
16-byte aligned, the group or warp kernel). Before it is timed, each variant's
out, mean and rstd are compared with torch's, bit for bit (NaN by position). Times are medians of
CUDA-event times (reimpl.checks.bench.gpu_time), both methods.
Writes OUT.json: per part (stream, wide, route, group) its rows (method, dtype, op, M, N, kernel, ms,
pct_copy, and the variants' knobs) and a note; the bit checks counted; and, given an Nsight Compute
report of scripts/gpu/ncu_fast_call.py as text (--ncu FILE, with the shape it ran), its headline
figures (several --ncu: a list, in order; `--attach` adds them to OUT.json without running anything).
The page's knob tables are rendered from it (reimpl/docsite/forward_probe_tables.py).
Usage: python scripts/gpu/forward_probe.py OUT.json [PART ...] [--ncu FILE DTYPE M N ...]
       python scripts/gpu/forward_probe.py OUT.json --attach --ncu FILE DTYPE M N [--ncu ...]"""
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl import fast  # noqa: E402
from reimpl.checks import ncu_report  # noqa: E402
from reimpl.checks.bench import METHODS, gpu_time  # noqa: E402
from reimpl.checks.parity import bit_mismatches  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.fast import forward as F  # noqa: E402
from reimpl.mirror import kernel_table as K  # noqa: E402

CHUNKS = (4, 8, 16)
SETS = (1, 2, 4, 8)
LANE_WARPS = (1, 2, 4)
LANE_SETS = (1, 2)
STASH_BLOCKS = (0, 1, 2, 4)
DTYPES = {"fp32": (torch.float32, K.float_), "bf16": (torch.bfloat16, K.BFloat16), "fp16": (torch.float16, K.Half)}
CELLS = {
    "stream": [("fp32", 1024, 32768), ("fp32", 512, 65536), ("bf16", 2048, 32768), ("bf16", 1024, 65536),
               ("fp16", 1024, 65536), ("fp32", 3355, 20000), ("bf16", 4096, 16388), ("bf16", 128, 131072)],
    "wide": [("bf16", 512, 16384), ("bf16", 1024, 12288), ("bf16", 2048, 16384), ("fp32", 256, 16384),
             ("fp32", 1024, 16384), ("bf16", 4096, 12288), ("bf16", 4096, 4096), ("bf16", 4096, 5120),
             ("fp32", 8192, 16384), ("bf16", 32768, 8192)],
    "route": [("bf16", 4096, 16384), ("bf16", 8192, 16384), ("bf16", 3072, 16384), ("bf16", 2048, 12288),
              ("bf16", 4096, 12288), ("bf16", 5461, 12288), ("fp16", 1024, 16384), ("fp32", 2731, 12288),
              ("fp32", 8192, 12288), ("fp32", 2048, 16384), ("fp32", 4096, 16384), ("bf16", 2048, 10240),
              ("fp32", 4096, 10240)],
    "group": [("bf16", 1048576, 64), ("bf16", 524288, 128), ("fp32", 524288, 64), ("fp32", 262144, 128),
              ("bf16", 2097152, 32), ("fp16", 1000003, 60)],
    "lane": [("bf16", 1048576, 64), ("bf16", 524288, 128), ("bf16", 262144, 256), ("bf16", 131072, 512),
             ("fp16", 262144, 256), ("fp32", 1048576, 32), ("fp32", 262144, 128), ("fp32", 131072, 256),
             ("bf16", 1000003, 64), ("fp16", 4097, 256), ("fp32", 8191, 128)],
    "lane_rows": [("bf16", 8448, 256), ("bf16", 16896, 256), ("bf16", 33792, 256), ("bf16", 67584, 256),
                  ("bf16", 16896, 64), ("bf16", 33792, 64), ("fp32", 16896, 128), ("fp32", 33792, 128)],
}
NOTES = {"stream": "rows past 16384 elements, and 16388",
         "wide": "rows of 4096 to 16384 elements",
         "route": "rows of 10240 to 16384 elements: what the plan ran against the stream kernel",
         "group": "rows of at most 128 elements: K sets of rows a warp of the group kernel",
         "lane": "rows of 8 to 64 chunks of 16 bytes: the lane kernel with W warps a block, and the kernel "
                 "those rows took before it",
         "lane_rows": "the lane kernel against the kernel those rows took before it, on 64 to 512 rows per SM"}
_base = F._instantiations


def _extra():
    out = []
    for T, rms, g, b in F._affine():
        if (g, b) != ((True, not rms)):
            continue
        out += [F.STREAM_TEMPLATE[(T, K.float_, rms, g, b, U)] for U in CHUNKS if U != F.STREAM_CHUNK]
        for G in F.GROUP_LANES:
            for full in ((True,) if G == 1 else (False, True)):
                out += [F.GROUP_TEMPLATE[(T, K.float_, rms, g, b, G, F.WARPS_PER_BLOCK, full, k)]
                        for k in SETS if k != F.GROUP_SETS]
        out += [F.LANE_TEMPLATE[(T, K.float_, rms, g, b, 4 * c // K.sizeof(T), w, sets)]
                for c in (*F.LANE_CHUNKS, 64) for w in LANE_WARPS for sets in LANE_SETS
                if (w, sets) != (F.LANE_WARPS, F.LANE_SETS) or c == 64]
    return out


F._instantiations = lambda: _base() + _extra()


def variants(kind: str, T, rms: bool, M: int, N: int) -> dict:
    """name -> (kernel, grid, block, shared, knobs)"""
    g, b = True, not rms
    out = {}
    if kind in ("stream", "wide", "route"):
        knobs = ([(16, 1), (16, 2), (16, 4), (8, 2)] if kind == "route" else
                 [(U, B) for U in CHUNKS for B in STASH_BLOCKS])
        for U, B in knobs:
            shared = 0
            if B:
                F.STREAM_BLOCKS, keep = B, F.STREAM_BLOCKS
                shared = F.stash_bytes(T, N)
                F.STREAM_BLOCKS = keep
            out[f"stream_U{U}_B{B}"] = (F.STREAM_TEMPLATE[(T, K.float_, rms, g, b, U)], (M,), (32, 4), shared,
                                        {"U": U, "stash_blocks": B, "stash_bytes": shared})
    if kind == "group":
        G = F.group_lanes(N)
        full = G == N // 4
        for k in SETS:
            rows = F.WARPS_PER_BLOCK * (32 // G) * k
            out[f"group_K{k}"] = (F.GROUP_TEMPLATE[(T, K.float_, rms, g, b, G, F.WARPS_PER_BLOCK, full, k)],
                                  (-(-M // rows),), (32, F.WARPS_PER_BLOCK), 0, {"K": k})
    if kind in ("lane", "lane_rows"):
        kernel, grid, block, shared = F.plan(T, rms, g, b, M, N, 132, aligned16=False)
        out["before"] = (kernel, grid, block, shared, {"template": kernel.template.name})
        NV = N // 4  # rows of 64 chunks too, which the plan leaves to the warp kernel
        for w in LANE_WARPS:
            for sets in LANE_SETS:
                name = f"lane_W{w}" + (f"_S{sets}" if sets > 1 else "")
                out[name] = (F.LANE_TEMPLATE[(T, K.float_, rms, g, b, NV, w, sets)], (-(-M // (32 * w * sets)),),
                             (32, w), F.lane_shared(T, N, w, sets), {"W": w, "S": sets})
    return out


def main(out: str, kinds: list[str], ncu: list[list[str]]) -> None:
    rt = fast.fast_runtime()
    rows, bits = [], []
    stream = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731
    for kind in kinds:
        for dname, M, N in CELLS[kind]:
            dt, T = DTYPES[dname]
            x = torch.randn(M, N, device="cuda", dtype=dt)
            x[0, 0] = float("nan") if M > 1 else x[0, 0]
            w, b = torch.randn(N, device="cuda", dtype=dt), torch.randn(N, device="cuda", dtype=dt)
            for op in ("layer_norm", "rms_norm"):
                rms = op == "rms_norm"
                if rms:
                    want = torch.ops.aten._fused_rms_norm(x, [N], w, 1e-5)
                    want = (want[0], want[1].view(M))
                    torch_fn = lambda: torch.ops.aten._fused_rms_norm(x, [N], w, 1e-5)  # noqa: E731
                else:
                    want = torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)
                    want = (want[0], want[1].view(M), want[2].view(M))
                    torch_fn = lambda: torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)  # noqa: E731
                y = torch.empty_like(x)
                mean = torch.empty(M, device="cuda")
                rstd = torch.empty(M, device="cuda")
                fns = {"copy": lambda: x.clone(), "torch": torch_fn,
                       "fast_plan": (lambda: fast.rms_norm(x, (N,), w, 1e-5)) if rms
                       else (lambda: fast.layer_norm(x, (N,), w, b, 1e-5))}
                for name, (kernel, grid, block, shared, knobs) in variants(kind, T, rms, M, N).items():
                    rt.allow_shared(kernel, shared)
                    args = (N, 1e-5, x.data_ptr(), w.data_ptr(), 0 if rms else b.data_ptr(),
                            mean.data_ptr(), rstd.data_ptr(), y.data_ptr(), M)
                    fn = (lambda k=kernel, g=grid, bl=block, s=shared, a=args: rt.launch(k, g, bl, s, stream(), *a))
                    y.fill_(0)
                    fn()
                    got = (y, rstd) if rms else (y, mean, rstd)
                    bad = sum(bit_mismatches(p, q) for p, q in zip(got, want))
                    bits.append({"dtype": dname, "op": op, "M": M, "N": N, "variant": name, "mismatches": bad})
                    if bad:
                        print("MISMATCH", dname, op, M, N, name, bad, flush=True)
                        continue
                    fns[name] = fn
                for method in METHODS:
                    ms = gpu_time(fns, reps=20, rounds=3, flush_l2=method == "flushed")
                    knobs_of = {n: v[4] for n, v in variants(kind, T, rms, M, N).items()}
                    for k, t in ms.items():
                        rows.append({"method": method, "dtype": dname, "op": op, "M": M, "N": N, "kernel": k,
                                     "ms": t, "pct_copy": 100 * ms["copy"] / t, **knobs_of.get(k, {})})
                    best = sorted(((100 * ms["copy"] / t, k) for k, t in ms.items() if k != "copy"), reverse=True)
                    print(method, dname, op, M, N, [f"{k} {p:.0f}%" for p, k in best[:6]],
                          "torch", f"{100 * ms['copy'] / ms['torch']:.0f}%", flush=True)
            del x, w, b
    parts = {kind: {"rows": [r for r in rows if (r["dtype"], r["M"], r["N"]) in set(CELLS[kind])],
                    "note": NOTES[kind]} for kind in kinds}
    record = {**stamp(), "what": __doc__.split("\n\n")[0].replace("\n", " "), "methods": METHODS, "parts": parts,
              "bits": {"variants_compared": len(bits), "mismatched_elements": sum(b["mismatches"] for b in bits)}}
    if ncu:
        attach(record, ncu)
    Path(out).write_text(json.dumps(record, indent=1) + "\n")


def attach(record: dict, ncu: list[list[str]]) -> None:
    """The headline figures of one report (record["ncu"]), or of several, in order (a list)."""
    figures = [ncu_figures(*group) for group in ncu]
    record["ncu"] = figures[0] if len(figures) == 1 else figures


def ncu_figures(path: str, dtype: str, M: str, N: str) -> dict:
    """The headline figures of an ncu text report of one fast kernel (a report whose file name holds
    `before` profiled ncu_fast_call.py's `before` route)."""
    text = Path(path).read_text()
    launch = ncu_report.launches(text)[0]
    executed = re.search(r"^\s*Executed Instructions\s+inst\s+([\d,]+)\s*$", text, re.M)
    sections = "SpeedOfLight Occupancy WarpStateStats LaunchStats" + (
        " InstructionStats MemoryWorkloadAnalysis" if executed else "")
    before = " before" if "before" in Path(path).stem else ""
    out = {"kernel": launch["kernel"], "shape": f"{dtype} {M} x {N} LayerNorm, weight and bias",
           "command": "ncu --launch-skip 2 --launch-count 1 -k regex:fast_layer_norm "
                      + " ".join(f"--section {x}" for x in sections.split())
                      + f" python scripts/gpu/ncu_fast_call.py {dtype} {M} {N}{before}"}
    out.update({k: launch[k] for k in ncu_report.FIGURES})
    if executed:  # the InstructionStats section
        out["executed_instructions"] = int(executed[1].replace(",", ""))
    return out


if __name__ == "__main__":
    args, ncu, group = sys.argv[1:], [], []
    while group is not None:  # each `--ncu FILE DTYPE M N`, in order
        args, group = ncu_report.split_args(args)
        ncu += [group] if group else []
    if args[1:2] == ["--attach"]:  # the reports only, into a record already written
        record = json.loads(Path(args[0]).read_text())
        attach(record, ncu)
        Path(args[0]).write_text(json.dumps(record, indent=1) + "\n")
    else:
        main(args[0], args[1:] or list(CELLS), ncu)
