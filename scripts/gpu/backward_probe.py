"""Time the settings of the CUDA backward rung (reimpl/ladder/backward.py, cuda/ln_row_held_backward.cu)
beside torch's backward and a copy: whether a holder requests its next row before reducing the
current one (the BACK_PREFETCH macro), the most threads of a block plan (backward.BACK_MAX_BLOCK)
and the most elements a thread holds (backward.BACK_EPT). Each setting is compiled by NVRTC with its
-D options and timed on its own, the copy and torch's backward in the same timing; cells of the
shared grid (reimpl.checks.grid) that land on each kind of plan. Median CUDA-event times, pipelined.
% of copy counts the backward's copy-equivalent bytes (grid.backward_bytes).
Usage (a CUDA machine): python scripts/gpu/backward_probe.py OUT.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl.checks import grid  # noqa: E402
from reimpl.checks.bench import METHODS, gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.device import runtime  # noqa: E402
from reimpl.ladder import backward, rungs  # noqa: E402

# name: (-D options, BACK_MAX_BLOCK, BACK_EPT); the first is the committed default
SETTINGS = {
    "prefetch": (("-DBACK_PREFETCH=1",), 512, 16),
    "no_prefetch": (("-DBACK_PREFETCH=0",), 512, 16),
    "prefetch_block256": (("-DBACK_PREFETCH=1",), 256, 16),
    "prefetch_ept8": (("-DBACK_PREFETCH=1",), 512, 8),
}
CELLS = {d: [(grid.tall_rows(N, s), N) for N in (128, 1024, 2048, 4096, 8192, 16384, 65536)]
         + [(4096, 768), (1024, 12288), (2048, 8192), (4096, 16384)] for d, s in (("bf16", 2), ("fp32", 4))}
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def main(out):
    rows = []
    aten = torch.ops.aten
    for dname, cells in CELLS.items():
        dtype = DTYPES[dname]
        for M, N in cells:
            x, dy = (torch.randn(M, N, device="cuda", dtype=dtype) for _ in range(2))
            w, b = (torch.randn(N, device="cuda", dtype=dtype) for _ in range(2))
            _, mean, rstd = aten.native_layer_norm(x, [N], w, b, 1e-5)
            _, rrstd = aten._fused_rms_norm(x, [N], w, 1e-5)
            fixed = {"copy": lambda: x.clone(),
                     "torch_layer_norm": lambda: aten.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b,
                                                                                 [True] * 3),
                     "torch_rms_norm": lambda: aten._fused_rms_norm_backward(dy, x, [N], rrstd, w, [True, True])}
            ours = {"row_held": lambda: backward.run("row_held", dy, x, w, b, mean.view(-1), rstd.view(-1)),
                    "rms_row_held": lambda: backward.run("rms_row_held", dy, x, w, None, None, rrstd.view(-1))}
            res = {}
            for sname, (opts, most, ept) in SETTINGS.items():
                backward.BACK_MAX_BLOCK, backward.BACK_EPT = most, ept
                runtime.get().use_compile_options(opts)
                if backward.back_plan(N, x.element_size()) is None:  # past what this setting's layout holds
                    continue
                for f in ours.values():
                    f()
                ms = gpu_time({**fixed, **ours}, reps=20, rounds=3)
                for k, t in ms.items():
                    size = x.element_size()
                    nbytes = 2 * M * N * size if k == "copy" else grid.backward_bytes(M, N, size, "rms" in k)
                    pct = 100 * (nbytes / t) / (2 * M * N * size / ms["copy"])
                    rows.append({"setting": sname, "dtype": dname, "M": M, "N": N, "kernel": k, "ms": t, "pct_copy": pct,
                                 "plan": str(backward.back_plan(N, size))})
                    res[k if k in fixed else f"{k}:{sname}"] = round(pct)
            print(dname, M, N, res, flush=True)
            Path(out).write_text(json.dumps({**stamp(), "method": METHODS["pipelined"],
                                             "settings": {k: {"options": o, "max_block": m, "ept": e}
                                                          for k, (o, m, e) in SETTINGS.items()},
                                             "rows": rows}, indent=0) + "\n")
            del x, dy
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main(*sys.argv[1:])
