"""Kernel times (torch's profiler, CUPTI) of reimpl.fast's backward on its default route, with the
fast dX kernel's rows in order and from the last up (grad_input.ROWS_FROM_LAST): where the chains
kernel follows, it starts at the top rows, which the reversed dX kernel read last. Calls back to back
(a call also finds in L2 what the one before left), every gradient asked for, five calls after
warm-up; each setting's bits compared with torch's. Writes a JSON record.
Usage: python scripts/gpu/rows_from_last_probe.py OUT.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl import fast  # noqa: E402
from reimpl.checks.bench import kernel_us  # noqa: E402
from reimpl.checks.parity import bit_mismatches  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.fast import grad_input  # noqa: E402

SHAPES = ((65536, 768), (32768, 1024), (16384, 1024), (32768, 1536), (32768, 2048), (2048, 16384), (16384, 4096))
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def main(out: str) -> None:
    rows = []
    rt = fast.fast_runtime()
    for M, N in SHAPES:
        for dname, dt in DTYPES.items():
            x, dy = (torch.randn(M, N, device="cuda", dtype=dt) for _ in range(2))
            w, b = (torch.randn(N, device="cuda", dtype=dt) for _ in range(2))
            _, mean, rstd = torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)
            want = torch.ops.aten.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b, [True] * 3)
            for from_last in (False, True, False, True):  # twice each, in turns
                grad_input.ROWS_FROM_LAST = from_last
                rt.plans.clear()
                got = [fast.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b) for _ in range(3)][-1]
                times = kernel_us(lambda: fast.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b))
                rows.append({"op": "layer_norm", "dtype": dname, "M": M, "N": N, "rows_from_last": from_last,
                             "kernels_us": times, "total_us": sum(times.values()),
                             "bit_identical": all(bit_mismatches(a, c) == 0 for a, c in zip(got, want))})
            print(dname, M, N, [(r["rows_from_last"], round(r["total_us"], 1)) for r in rows[-4:]], flush=True)
            del x, dy
            torch.cuda.empty_cache()
    grad_input.ROWS_FROM_LAST = False
    Path(out).write_text(json.dumps({**stamp(), "method": "torch.profiler (CUPTI) kernel times, mean of 5 calls back "
                                     "to back after 3 warm-up calls, LayerNorm backward with every gradient, the "
                                     "plan's route; each setting measured twice, in turns", "rows": rows},
                                    indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
