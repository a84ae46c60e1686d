"""Why a compiled model with torch's exact norms steps slower than one with Inductor's own: GPT-2
small and the Llama-style model of scripts/gpu/training_step.py, each compiled twice (torch's norms,
which Inductor replaces with kernels of its own; reimpl.fast's, opaque custom ops), one training step
profiled after compilation. Records per compiled model: Dynamo's graph count and graph-break
reasons, the number of kernels launched per step, GPU time per step by kernel family (ours, Inductor's
Triton kernels, cuBLAS/attention, the rest), and the step's host (CPU) time.
Usage (a CUDA machine): python scripts/gpu/compiled_norms_profile.py OUT.json"""
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

from reimpl.checks.record import stamp  # noqa: E402
from training_step import batches, build, step  # noqa: E402


def family(name: str) -> str:
    if "LayerNorm" in name or "RmsNorm" in name or "rms_norm" in name or "layer_norm" in name:
        return "norm kernels (ours or torch's)"
    if name.startswith("triton_"):
        return "Inductor's Triton kernels"
    if "gemm" in name or "sm90" in name or "cutlass" in name or "nvjet" in name or "cublas" in name.lower():
        return "matrix multiplies"
    return "other"


def profile(kind: str, norms: str) -> dict:
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    model = torch.compile(build(kind, norms))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = batches(kind, 2)
    explain = torch._dynamo.explain(build(kind, norms))(input_ids=data[0], labels=data[0])
    for i in range(3):
        step(model, opt, data[i % 2])
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        step(model, opt, data[0])
        torch.cuda.synchronize()
    gpu = collections.Counter()
    launches = collections.Counter()
    for e in prof.key_averages():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time_total > 0:
            gpu[family(e.key)] += e.device_time_total / 1e3
            launches[family(e.key)] += e.count
    del model, opt
    torch.cuda.empty_cache()
    return {"model": kind, "norms": norms, "graphs": explain.graph_count, "graph_breaks": explain.graph_break_count,
            "break_reasons": sorted({str(r.reason)[:200] for r in explain.break_reasons}),
            "gpu_ms_by_family": {k: round(v, 3) for k, v in sorted(gpu.items())},
            "launches_by_family": dict(sorted(launches.items())),
            "gpu_ms": round(sum(gpu.values()), 3)}


def main(out: str) -> None:
    torch.use_deterministic_algorithms(True, warn_only=True)
    rows = []
    for kind in ("gpt2", "llama"):
        for norms in ("torch", "fast"):
            rows.append(profile(kind, norms))
            print(rows[-1], flush=True)
            Path(out).write_text(json.dumps({**stamp(), "method": "torch.profiler over one training step after "
                                             "three compiled warm-up steps (bf16 autocast, AdamW); graphs and "
                                             "breaks from torch._dynamo.explain of the forward with its loss",
                                             "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
