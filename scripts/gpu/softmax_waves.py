"""Does the one-read softmax lose its long rows to the last wave? Time `one_read` on rows of 262144
for a run of row counts M (benchmark method: pipelined, median CUDA-event times, x.clone() in the
same run). A row takes a cluster of 16 blocks, and only so many clusters are resident at once, so
if the tail of a partial last wave were what costs, the share of the copy would drop each time M
passes a multiple of that number and climb back as the wave fills: a saw-tooth over M. A flat or
smoothly rising line says the cost is paid by every row.

Usage (a CUDA machine): python scripts/gpu/softmax_waves.py OUT.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl.checks.bench import METHODS, gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.ladder import softmax  # noqa: E402
from reimpl.ladder.launch import regs_plan  # noqa: E402

N = 262144
ROWS = {"fp32": (torch.float32, range(96, 161, 4)), "bf16": (torch.bfloat16, range(192, 321, 8))}


def main(out: str) -> None:
    rows = []
    for dname, (dtype, ms) in ROWS.items():
        plan = regs_plan(N, dtype.itemsize)
        for M in ms:
            x = torch.randn(M, N, device="cuda", dtype=dtype)
            t = gpu_time({"copy": lambda: x.clone(), "one_read": lambda: softmax.run("one_read", x)},
                         reps=20, rounds=3)
            rows.append({"dtype": dname, "M": M, "N": N, "plan": str(plan), "one_read_us": t["one_read"] * 1e3,
                         "copy_us": t["copy"] * 1e3, "pct_copy": 100 * t["copy"] / t["one_read"]})
            print(dname, M, round(rows[-1]["pct_copy"], 1), flush=True)
    Path(out).write_text(json.dumps({**stamp(), "what": __doc__.split("\n")[0], "method": METHODS["pipelined"],
                                     "rows": rows}, indent=0) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
