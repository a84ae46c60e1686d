"""A persistent Triton LayerNorm forward for few-row wide inputs, beside the ladder's Triton rung and a
copy: a grid of one or two programs an SM, each walking rows pid, pid + grid, ...; variants by warps,
programs an SM, the loop's num_stages (Triton's software pipelining), PREFETCH (the next row's load
issued before this row's arithmetic, so it is in flight meanwhile) and WB_ONCE (weight and bias loaded
once a program rather than once a row). Every variant's output is checked against an fp32 LayerNorm
before it is timed. Writes OUT.json: the stamp, the method, and per shape the % of copy of each
variant (and the rung). Usage (a CUDA machine): python scripts/gpu/triton_wide_probe.py OUT.json"""
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from reimpl.checks.bench import METHODS, gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.ladder import triton_rungs  # noqa: E402

@triton.jit
def ln_persist(X, Y, W, B, Mean, Rstd, stride, M, N, eps, BLOCK: tl.constexpr, RMS: tl.constexpr,
               STAGES: tl.constexpr, PREFETCH: tl.constexpr, WB_ONCE: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    in_row = cols < N
    if WB_ONCE:
        w = tl.load(W + cols, mask=in_row).to(tl.float32)
        b = tl.load(B + cols, mask=in_row).to(tl.float32)
    if PREFETCH:
        nxt = tl.load(X + pid.to(tl.int64) * stride + cols, mask=in_row & (pid < M), other=0.0)
    for row in tl.range(pid, M, nprog, num_stages=STAGES):
        if PREFETCH:
            x = nxt.to(tl.float32)
            r2 = row + nprog
            nxt = tl.load(X + r2.to(tl.int64) * stride + cols, mask=in_row & (r2 < M), other=0.0)
        else:
            x = tl.load(X + row.to(tl.int64) * stride + cols, mask=in_row, other=0.0).to(tl.float32)
        if RMS:
            mean = 0.0
        else:
            mean = tl.sum(x, axis=0) / N
        d = tl.where(in_row, x - mean, 0.0)
        rstd = 1 / tl.sqrt(tl.sum(d * d, axis=0) / N + eps)
        if not RMS:
            tl.store(Mean + row, mean)
        tl.store(Rstd + row, rstd)
        if not WB_ONCE:
            w = tl.load(W + cols, mask=in_row).to(tl.float32)
            b = tl.load(B + cols, mask=in_row).to(tl.float32)
        y = d * rstd * w + b
        tl.store(Y + row.to(tl.int64) * stride + cols, y.to(Y.dtype.element_ty), mask=in_row)

SMS = torch.cuda.get_device_properties(0).multi_processor_count
shapes = [("bf16", 1024, 12288), ("bf16", 2048, 12288), ("bf16", 1024, 16384), ("bf16", 2048, 16384),
          ("bf16", 4096, 5120), ("bf16", 4096, 4096), ("bf16", 2048, 8192), ("bf16", 1024, 65536),
          ("fp32", 1024, 12288), ("fp32", 2048, 8192), ("fp32", 1024, 16384), ("fp32", 4096, 5120), ("fp32", 1024, 32768),
          ("bf16", 16384, 4096)]
DT = {"bf16": torch.bfloat16, "fp32": torch.float32}
res = []
for dn, M, N in shapes:
    dt = DT[dn]
    x = torch.randn(M, N, device="cuda", dtype=dt); w = torch.randn(N, device="cuda", dtype=dt); b = torch.randn(N, device="cuda", dtype=dt)
    y = torch.empty_like(x); mean = torch.empty(M, device="cuda"); rstd = torch.empty(M, device="cuda")
    fns = {"copy": lambda: y.copy_(x), "rung": lambda: triton_rungs.forward(x, w, b, 1e-5, False)}
    ref = torch.nn.functional.layer_norm(x.float(), (N,), w.float(), b.float(), 1e-5)
    row = {"dtype": dn, "M": M, "N": N}
    BLOCK = triton.next_power_of_2(N)
    for warps in ((8, 16, 32) if BLOCK >= 32768 else (4, 8, 16)):
        for per_sm in (1, 2):
            for stages, pre, once in ((1, 0, 0), (2, 0, 0), (1, 1, 0), (2, 0, 1), (1, 1, 1)):
                if BLOCK // (warps * 32) > 128 or BLOCK // (warps * 32) < 8 or (warps == 32 and per_sm == 2):
                    continue
                grid = (min(M, SMS * per_sm),)
                name = f"w{warps} p{per_sm} s{stages} pre{pre} once{once}"
                try:
                    f = lambda grid=grid, stages=stages, pre=pre, once=once, warps=warps: ln_persist[grid](x, y, w, b, mean, rstd, N, M, N, 1e-5, BLOCK=BLOCK, RMS=False,
                                                 STAGES=stages, PREFETCH=pre, WB_ONCE=once, num_warps=warps)
                    f(); torch.cuda.synchronize()
                    err = (y.float() - ref).abs().max().item()
                    if err > (0.07 if dn == "bf16" else 1e-3):
                        row[name] = f"err {err:.3g}"; continue
                    fns[name] = f
                except Exception as e:
                    row[name] = "fail " + type(e).__name__
    t = gpu_time(fns, reps=30, rounds=3)
    row["copy_ms"] = round(t["copy"], 4)
    row.update({k: round(100 * t["copy"] / v, 1) for k, v in t.items() if k != "copy"})
    best = max(((v, k) for k, v in row.items() if isinstance(v, float) and k != "copy_ms"), default=None)
    row["best"] = best
    print(dn, M, N, "rung", row["rung"], "best", best, flush=True)
    res.append(row)
Path(sys.argv[1]).write_text(json.dumps({**stamp(), "triton": triton.__version__,
                                         "method": "% of copy: " + METHODS["pipelined"] + "; 30 calls x 3 rounds",
                                         "rows": res}, indent=1) + "\n")
