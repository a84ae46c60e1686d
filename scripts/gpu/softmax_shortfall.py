"""Where `one_read` falls short of 90% of the copy, and why, from Nsight Compute: rows of 262144 (a
cluster of 16 blocks a row) and rows of an odd width (50257: one row in eight starts on a 16-byte
word), each beside a cell that reaches the copy's pace: rows of 4096 (one block a row) and
rows one element shorter, 50256, which take the same plan with every word whole.

For each cell: one_read's share of the copy (median CUDA-event times, pipelined, `x.clone()` in
the same run), then one profiled call (ncu, its default cache control: caches flushed before it):
duration, DRAM throughput, instructions executed and branch instructions, registers, the blocks an
SM holds by its registers, achieved occupancy, and the clusters the device keeps resident at once.

Usage (a CUDA machine with ncu on the PATH): python scripts/gpu/softmax_shortfall.py OUT.json"""
import csv
import io
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl.checks.bench import METHODS, gpu_time, profiled_once  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.ladder import softmax  # noqa: E402
from reimpl.ladder.launch import regs_plan  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from siblings_bench import DTYPES  # noqa: E402
# (dtype, M, N, what the cell stands for)
CASES = (("fp32", 8192, 4096, "reference"), ("fp32", 128, 262144, "cluster of 16"),
         ("bf16", 256, 262144, "cluster of 16"), ("bf16", 1335, 50256, "reference"), ("bf16", 1335, 50257, "odd width"))
SECTIONS = ("SpeedOfLight", "InstructionStats", "SourceCounters", "Occupancy", "LaunchStats")
# ncu's metric names -> the record's keys
METRICS = {"Duration": "us", "DRAM Throughput": "dram_pct", "Executed Instructions": "instructions",
           "Branch Instructions": "branch_instructions", "Registers Per Thread": "registers",
           "Block Limit Registers": "blocks_per_sm_by_registers", "Achieved Occupancy": "achieved_occupancy_pct",
           "Max Active Clusters": "max_active_clusters", "Cluster Size": "cluster", "Block Size": "block",
           "Grid Size": "grid"}
TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def inputs():
    g = torch.Generator(device="cuda").manual_seed(0)
    return [torch.randn(M, N, device="cuda", generator=g).to(DTYPES[dt]) for dt, M, N, _ in CASES]


def run() -> None:
    """What ncu profiles: each cell's one_read once, after a warm-up call (the compile)."""
    xs = inputs()

    def every_cell():
        for x in xs:
            softmax.run("one_read", x)
    profiled_once(every_cell, warmups=1)


def profile() -> list[dict]:
    """ncu over run(): one dict of METRICS per profiled kernel, in launch order."""
    cmd = ["ncu", "--profile-from-start", "off", "--csv", "--page", "details"]
    for s in SECTIONS:
        cmd += ["--section", s]
    cmd += [sys.executable, __file__, "run"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = list(csv.DictReader(io.StringIO("\n".join(line for line in out.splitlines() if line.startswith('"')))))
    kernels: dict = {}
    for r in rows:
        name = r["Metric Name"]
        if name not in METRICS:
            continue
        value = r["Metric Value"].replace(",", "")
        if name == "Duration":
            value = float(value) * TO_US[r["Metric Unit"]]
        elif name in ("Block Size", "Grid Size"):
            value = int(value.strip("()").split()[0].rstrip(","))
        else:
            value = float(value)
        k = kernels.setdefault(int(r["ID"]), {"kernel": r["Kernel Name"]})
        k[METRICS[name]] = value
    return [kernels[i] for i in sorted(kernels)]


def main(out: str) -> None:
    rows = []
    for (dt, M, N, what), x in zip(CASES, inputs()):
        t = gpu_time({"copy": lambda: x.clone(), "one_read": lambda: softmax.run("one_read", x)}, reps=20, rounds=3)
        rows.append({"dtype": dt, "M": M, "N": N, "what": what, "plan": str(regs_plan(N, x.element_size())),
                     "one_read_us": t["one_read"] * 1e3, "copy_us": t["copy"] * 1e3,
                     "pct_copy": 100 * t["copy"] / t["one_read"]})
        print(dt, M, N, round(rows[-1]["pct_copy"], 1), flush=True)
    profiled = profile()
    assert len(profiled) == len(rows), (len(profiled), len(rows))
    for r, p in zip(rows, profiled):
        r["ncu"] = p
    Path(out).write_text(json.dumps({**stamp(), "what": __doc__.split("\n\n")[0].replace("\n", " "),
                                     "method": METHODS["pipelined"], "profile": "ncu, caches flushed before the call",
                                     "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    run() if sys.argv[1:] == ["run"] else main(*sys.argv[1:])
