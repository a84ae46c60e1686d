"""Kernel times (torch's profiler, CUPTI) of reimpl.fast's LayerNorm backward on each of its two
routes, beside torch's: the fused kernel with its finish (taken here on every width: the plan's
floor of 8 KB rows set aside, and recorded with the other floors), and the route of two kernels (the fast dX
kernel, then torch's GammaBeta tile: the chains kernel set aside), with every gradient asked for. Five calls each after warm-up;
the bits of each route are compared with torch's. Writes a JSON record.
Usage: python scripts/gpu/fused_probe.py OUT.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl import fast  # noqa: E402
from reimpl.checks.bench import kernel_us  # noqa: E402
from reimpl.checks.parity import bit_mismatches  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.fast import backward  # noqa: E402

# the plan's own, restored after the run
MIN_ROW_BYTES, ENABLED, CHAINS = backward.MIN_ROW_BYTES, backward.ENABLED, backward.CHAINS_MIN_ELEMENTS

SHAPES = ((torch.float32, 4096, 1024), (torch.bfloat16, 65536, 768), (torch.float32, 16384, 4096),
          (torch.bfloat16, 16384, 4096), (torch.float32, 8192, 6144), (torch.bfloat16, 8192, 8192),
          (torch.float32, 16384, 1024), (torch.bfloat16, 32768, 1536), (torch.float32, 32768, 2048),
          (torch.bfloat16, 32768, 2048), (torch.bfloat16, 16384, 3072), (torch.float32, 8192, 3072),
          (torch.bfloat16, 16384, 5120), (torch.float32, 4096, 8192))
NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16"}


def main(out: str) -> None:
    rows = []
    rt = fast.fast_runtime()
    backward.MIN_ROW_BYTES, backward.CHAINS_MIN_ELEMENTS = 0, 1 << 62
    for dt, M, N in SHAPES:
        x, dy = (torch.randn(M, N, device="cuda", dtype=dt) for _ in range(2))
        w, b = (torch.randn(N, device="cuda", dtype=dt) for _ in range(2))
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)
        want = torch.ops.aten.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b, [True] * 3)
        routes = {"torch": lambda: torch.ops.aten.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b, [True] * 3)}
        for route, enabled in (("fast_two_kernels", False), ("fast_fused", True)):
            backward.ENABLED = enabled
            rt.plans.clear()
            call = lambda: fast.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b)  # noqa: E731
            got = [call() for _ in range(3)][-1]
            times = kernel_us(call)
            rows.append({"dtype": NAMES[dt], "M": M, "N": N, "route": route, "kernels_us": times,
                         "total_us": sum(times.values()),
                         "bit_identical": all(bit_mismatches(a, b) == 0 for a, b in zip(got, want))})
        times = kernel_us(routes["torch"])
        rows.append({"dtype": NAMES[dt], "M": M, "N": N, "route": "torch", "kernels_us": times,
                     "total_us": sum(times.values()), "bit_identical": True})
        print({r["route"]: round(r["total_us"], 1) for r in rows[-3:]}, NAMES[dt], M, N, flush=True)
    backward.ENABLED, backward.MIN_ROW_BYTES, backward.CHAINS_MIN_ELEMENTS = ENABLED, MIN_ROW_BYTES, CHAINS
    route = {"min_row_bytes": MIN_ROW_BYTES, "max_width": 512 * max(backward.REGISTER_VECTORS),
             "min_elements": backward.MIN_ELEMENTS}  # the plan's floors, set aside above
    Path(out).write_text(json.dumps({**stamp(), "route": route, "method": "torch.profiler (CUPTI) kernel times, mean of 5 calls "
                                     "after 3 warm-up calls, LayerNorm backward with weight and bias, every "
                                     "gradient asked for; bit_identical: dX, dgamma, dbeta equal torch's",
                                     "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
