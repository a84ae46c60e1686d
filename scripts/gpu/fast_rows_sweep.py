"""The measurement behind reimpl.fast.forward.rows_per_warp's four-row band: 16-bit rows of 1024
elements (the warp kernel's `full` instance) two or four to a warp, over M, beside a copy
(x.clone()) in the same run. Every output is first checked against torch's, bit for bit. Median
CUDA-event time per call, launches pipelined behind a spin kernel, L2 not flushed.
Usage: python scripts/gpu/fast_rows_sweep.py OUT.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from reimpl import fast  # noqa: E402
from reimpl.mirror import kernel_table as K  # noqa: E402
from reimpl.checks.bench import gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.fast import forward as FK  # noqa: E402

N = 1024
MS = (1024, 2048, 2112, 3072, 4096, 5120, 6144, 6336, 7168, 8192, 12288, 16384, 32768)


def main(out: str) -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    chosen = FK.rows_per_warp
    # compile (and so list the instantiations) with the real rule before it is overridden below
    fast.layer_norm(torch.ones(1, N, device="cuda", dtype=torch.bfloat16), (N,))
    rows = []
    for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        for M in MS:
            x = torch.randn(M, N, device="cuda", dtype=dtype)
            w, b = torch.randn(N, device="cuda", dtype=dtype), torch.randn(N, device="cuda", dtype=dtype)
            fns = {"copy": lambda: x.clone()}
            for r in (2, 4):
                for op in ("layer_norm", "rms_norm"):
                    def f(r=r, op=op):
                        FK.rows_per_warp = lambda *a, r=r: r  # the plan looks it up at each launch
                        return fast.layer_norm(x, (N,), w, b) if op == "layer_norm" else fast.rms_norm(x, (N,), w)
                    ref = F.layer_norm(x, (N,), w, b) if op == "layer_norm" else F.rms_norm(x, (N,), w)
                    with torch.no_grad():
                        assert torch.equal(f().view(torch.int16), ref.view(torch.int16)), (dname, M, r, op)
                    fns[f"{op} rows={r}"] = f
            with torch.no_grad():
                ms = gpu_time(fns, reps=30, rounds=5)
            FK.rows_per_warp = chosen
            plan_rows = chosen(K.BFloat16, 2, True, M, sms)
            for k, t in ms.items():
                rows.append({"dtype": dname, "M": M, "N": N, "kernel": k, "ms": t, "pct_copy": 100 * ms["copy"] / t,
                             "plan_rows": plan_rows})
            print(dname, M, {k: f"{100 * ms['copy'] / v:.0f}%" for k, v in ms.items()}, "plan:", plan_rows, flush=True)
    Path(out).write_text(json.dumps({**stamp(), "sms": sms, "method": "median of CUDA-event times, launches "
                                     "pipelined behind a spin kernel, L2 not flushed; bits checked against torch "
                                     "first", "rows": rows}, indent=0) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
