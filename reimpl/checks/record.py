"""Record which kernels torch launches, with grid, block and shared memory, via torch.profiler.

Used twice: on the GPU to write torch's launches into reference/ (`python -m reimpl record-launches`),
and by the live launch-parity test to profile torch and the mirror side by side.
"""
from __future__ import annotations

import datetime
import json
import os
import tempfile

import torch


def profile_launches(fn) -> list[dict]:
    """Kernels launched while running fn(): [{kernel, grid, block, smem}] in launch order."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    kernels = [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"]
    kernels.sort(key=lambda e: e["ts"])
    return [{"kernel": e["name"], "grid": list(e["args"]["grid"]), "block": list(e["args"]["block"]),
             "smem": int(e["args"]["shared memory"])} for e in kernels]


def host_cpu() -> str:
    """The host's CPU model (host timings depend on it as much as on the GPU)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def stamp() -> dict:
    props = torch.cuda.get_device_properties(0)
    return {"torch": torch.__version__, "git": torch.version.git_version, "cuda": torch.version.cuda,
            "device": props.name, "capability": f"{props.major}.{props.minor}",
            "gpus": torch.cuda.device_count(), "cpu": host_cpu(), "cpus": os.cpu_count(),
            "date": datetime.date.today().isoformat()}


def record_torch_launches(cases) -> dict:
    """Profile torch's own op for each case (inputs left unfilled: launches don't depend on values)."""
    out = []
    for case in cases:
        args = case.make_args("cuda", values=False)
        case.run_torch(*args)  # warm-up outside the profiler
        launches = profile_launches(lambda: case.run_torch(*args))
        out.append({"id": case.id, "case": case.as_dict(), "launches": launches})
        del args
    return {**stamp(), "cases": out}
