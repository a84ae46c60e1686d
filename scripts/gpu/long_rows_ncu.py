"""Nsight Compute on long softmax rows, ours beside quack's: what holds a row-per-cluster kernel under
a copy's bandwidth (occupancy, the stalls of its warps, the cluster's scheduling).

  ncu --profile-from-start off --section ... python scripts/gpu/long_rows_ncu.py [PLAN ...]

Each case warms up, then one call runs between cudaProfilerStart and cudaProfilerStop. PLAN names
(softmax_plans.py's) add register plans to the default one."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl.checks import peers  # noqa: E402
from reimpl.ladder import softmax  # noqa: E402
from reimpl.ladder.launch import RegsPlan, regs_block, span  # noqa: E402

SHAPES = (("bf16", 1024, 65536), ("bf16", 256, 262144), ("fp32", 128, 262144), ("bf16", 2048, 32768))
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def plan(name, N, itemsize):
    """regs_ept{E}_c{C}: E elements a thread, C blocks a row."""
    ept, c = (int(p[1:]) for p in name.removeprefix("regs_").replace("ept", "e").split("_"))
    vec = 16 // itemsize
    return RegsPlan(vec, ept // vec, 0, c, regs_block(span(N, vec), ept, c))


def main(names):
    quack = peers.quack_softmax()
    for dname, M, N in SHAPES:
        x = torch.randn(M, N, device="cuda", dtype=DTYPES[dname])
        fns = {"default": lambda: softmax.run("one_read", x)}
        for n in names:
            p = plan(n, N, x.element_size())
            fns[n] = lambda p=p: softmax.run("one_read", x, plan=p)
        if quack is not None:
            fns["quack"] = lambda: quack(x)
        for label, fn in fns.items():
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            print(f"case {dname} {M}x{N} {label}", flush=True)
            torch.cuda.cudart().cudaProfilerStart()
            fn()
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main(sys.argv[1:])
