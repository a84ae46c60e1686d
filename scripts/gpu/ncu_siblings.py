"""Nsight Compute on the siblings' kernels, the ladder's top rungs, and torch's for the same calls:
what bounds each one.

  python scripts/gpu/ncu_siblings.py run OP        (under ncu) profile every case of OP, one call each
  python scripts/gpu/ncu_siblings.py summarize OUT.json CSV... [--stamp-from=JSON]

Run through ncu with --profile-from-start off: each case warms up, then profiles one call between
cudaProfilerStart and cudaProfilerStop, led by torch.cuda._sleep's spin kernel so the summary can
tell the cases apart. ncu's default cache control flushes the caches before every profiled kernel.
scripts/gpu/ncu_siblings.sh runs the ops and writes results/ncu_siblings.json (the op `ladder` alone:
the ladder's top rungs, summarized into results/ncu_ladder.json). Per kernel: time,
DRAM throughput and compute (SM) throughput as % of peak, the memory-system throughput % of peak
(ncu's "memory SOL", the busiest of DRAM, L2 and L1), issue-slot use, achieved occupancy, registers,
DRAM bytes. The bound a page names is the larger SOL where it passes 60%, else latency."""
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

METRICS = ("gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,"
           "sm__throughput.avg.pct_of_peak_sustained_elapsed,"
           "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,"
           "smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,"
           "launch__registers_per_thread,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct")
SOFTMAX = ((8192, 4096), (1024, 32768), (256, 131072))
CE = ((4096, 32000), (2048, 128256))
BN = ((32, 64, 112, 112), (32, 256, 14, 14))
LADDER = ((16384, 4096), (43691, 1536), (4096, 16384), (1024, 65536))


def cases(op):
    """(name, dtype, shape, fn) for every profiled call of `op`."""
    import torch
    import torch.nn.functional as F
    from reimpl.ladder import batchnorm, batchnorm_split, cross_entropy, rungs, softmax, triton_rungs
    for dname, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        if op == "softmax":
            for M, N in SOFTMAX:
                x = torch.randn(M, N, device="cuda", dtype=dtype)
                yield "torch_softmax", dname, (M, N), lambda x=x: torch.softmax(x, -1)
                for k in ("three_pass", "online_block", "one_read"):
                    yield k, dname, (M, N), lambda x=x, k=k: softmax.run(k, x)
        elif op == "ladder":
            for M, N in LADDER:
                x = torch.randn(M, N, device="cuda", dtype=dtype)
                w, b = torch.randn(N, device="cuda", dtype=dtype), torch.randn(N, device="cuda", dtype=dtype)
                yield "torch_layer_norm", dname, (M, N), lambda x=x, w=w, b=b: F.layer_norm(x, (N,), w, b)
                yield "torch_rms_norm", dname, (M, N), lambda x=x, w=w: F.rms_norm(x, (N,), w)
                yield "row_held", dname, (M, N), lambda x=x, w=w, b=b: rungs.run("row_held", x, w, b)
                yield "rms_row_held", dname, (M, N), lambda x=x, w=w: rungs.run("rms_row_held", x, w)
                yield "triton_ln", dname, (M, N), lambda x=x, w=w, b=b: triton_rungs.run("triton_ln", x, w, b)
        elif op == "cross_entropy":
            for M, N in CE:
                x = torch.randn(M, N, device="cuda", dtype=dtype, requires_grad=True)
                t = torch.randint(0, N, (M,), device="cuda")
                yield "torch_cross_entropy", dname, (M, N), lambda x=x, t=t: torch.autograd.grad(F.cross_entropy(x, t), x)
                yield "cross_entropy_fused", dname, (M, N), lambda x=x, t=t: cross_entropy.loss_and_grad(x.detach(), t)
        elif op == "batchnorm":
            for shape in BN:
                for layout in ("nchw", "channels_last"):
                    x = torch.randn(shape, device="cuda", dtype=dtype)
                    if layout == "channels_last":
                        x = x.to(memory_format=torch.channels_last)
                    C = shape[1]
                    w, b = torch.randn(C, device="cuda", dtype=dtype), torch.randn(C, device="cuda", dtype=dtype)
                    tag = f"{layout}"
                    yield f"torch_batch_norm[{tag}]", dname, shape, lambda x=x, w=w, b=b: F.batch_norm(x, None, None, w, b, True)
                    if layout == "nchw":
                        yield f"bn_kernel[{tag}]", dname, shape, lambda x=x, w=w, b=b: batchnorm.batch_norm_train_forward(x, w, b)
                    yield f"bn_split[{tag}]", dname, shape, lambda x=x, w=w, b=b: batchnorm_split.batch_norm_train_forward_split(x, w, b)


def run(op):
    import torch
    listing = []
    for name, dname, shape, fn in cases(op):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        torch.cuda._sleep(10)  # the marker: a spin kernel before each case's own
        fn()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        listing.append({"kernel": name, "dtype": dname, "shape": list(shape)})
    print("CASES " + json.dumps(listing))


def _metrics(path):
    lines = [l for l in Path(path).read_text().splitlines() if not l.startswith("==") and l.strip()]
    listing = json.loads(next(l for l in lines if l.startswith("CASES "))[6:])
    rows = list(csv.reader(l for l in lines if l.startswith('"')))
    head = rows[0]
    kernels = {}  # launch ID -> (name, {metric: value})
    for r in rows[1:]:
        k = kernels.setdefault(r[head.index("ID")], (r[head.index("Kernel Name")], {}))
        k[1][r[head.index("Metric Name")]] = float(r[head.index("Metric Value")].replace(",", "") or 0)
    groups = []
    for name, m in (kernels[i] for i in sorted(kernels, key=int)):
        if "spin_kernel" in name:
            groups.append([])
        else:
            groups[-1].append((name, m))
    assert len(groups) == len(listing), (len(groups), len(listing))
    return listing, groups


def short_name(name: str) -> str:
    """A launched kernel's name without return type, anonymous namespaces, template arguments and
    parameters: `native::cunn_SoftMaxForwardReg`, `ladder::softmax_online_regs`."""
    name = name.removeprefix("void ").replace("<unnamed>::", "").replace("(anonymous namespace)::", "")
    return name.split("<")[0].split("(")[0].strip()


def summarize(out, *paths):
    """`paths`: the CSVs; a `--stamp-from=JSON` among them takes the device stamp from that file (an
    earlier summary of the same run) instead of this machine, to summarize again off the GPU."""
    stamp_from = [p.split("=", 1)[1] for p in paths if p.startswith("--stamp-from=")]
    paths = [p for p in paths if not p.startswith("--stamp-from=")]
    if stamp_from:
        d = json.loads(Path(stamp_from[0]).read_text())
        run_stamp = {k: d[k] for k in ("torch", "git", "cuda", "device", "capability", "date")}
    else:
        from reimpl.checks.record import stamp
        run_stamp = stamp()
    cases_out = []
    for path in paths:
        listing, groups = _metrics(path)
        for case, kernels in zip(listing, groups):
            for name, m in kernels:
                mem, sm = m["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"], m["sm__throughput.avg.pct_of_peak_sustained_elapsed"]
                cases_out.append({**case, "launched": short_name(name), "us": m["gpu__time_duration.sum"] / 1e3,
                                  "dram_pct": m["dram__throughput.avg.pct_of_peak_sustained_elapsed"],
                                  "memory_sol_pct": mem, "sm_sol_pct": sm,
                                  "issue_active_pct": m["smsp__issue_active.avg.pct_of_peak_sustained_active"],
                                  "occupancy_pct": m["sm__warps_active.avg.pct_of_peak_sustained_active"],
                                  "registers": int(m["launch__registers_per_thread"]),
                                  "dram_read_mb": m["dram__bytes_read.sum"] / 1e6, "dram_write_mb": m["dram__bytes_write.sum"] / 1e6,
                                  "l2_hit_pct": m["lts__t_sector_hit_rate.pct"],
                                  "bound": ("memory" if mem >= sm else "compute") if max(mem, sm) >= 60 else "latency"})
    command = "OUT=dir bash scripts/gpu/ncu_siblings.sh" + (" ladder" if Path(out).stem == "ncu_ladder" else "")
    Path(out).write_text(json.dumps({"what": __doc__.split("\n")[0], "command": command,
                                     "cache_control": "ncu's default: caches flushed before each profiled kernel",
                                     **run_stamp, "cases": cases_out}, indent=0) + "\n")
    for c in cases_out:
        print(f"{c['kernel']:28} {c['dtype']} {c['shape']} {c['launched'][:40]:40} {c['us']:8.1f} us  DRAM {c['dram_pct']:3.0f}% "
              f"mem {c['memory_sol_pct']:3.0f}% SM {c['sm_sol_pct']:3.0f}% issue {c['issue_active_pct']:3.0f}% "
              f"occ {c['occupancy_pct']:3.0f}% {c['registers']} regs -> {c['bound']}")


if __name__ == "__main__":
    {"run": run, "summarize": summarize}[sys.argv[1]](*sys.argv[2:])
