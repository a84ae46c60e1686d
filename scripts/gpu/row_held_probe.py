"""Time the settings of ln_row_held's knobs (its ROW_HELD_* macros: how early the weight and bias
are fetched, the blocks per SM its __launch_bounds__ ask for) beside torch, a copy and the one-read softmax, each setting
compiled by NVRTC with its -D options, on cells of the shared grid (reimpl.checks.grid) that land on
each kind of plan. Median CUDA-event times, pipelined (reimpl.checks.bench.METHODS).
"knobs" times each setting with the default block-shape order; "orders" the default setting with
each order of ORDERS (launch.HELD_ORDER and launch.HELD_WARP_MOST_32).
Usage (a CUDA machine): python scripts/gpu/row_held_probe.py OUT.json [knobs|orders] [method=pipelined]"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from reimpl.checks import grid  # noqa: E402
from reimpl.checks.bench import METHODS, gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.device import runtime  # noqa: E402
from reimpl.ladder import launch, rungs, softmax  # noqa: E402

SETTINGS = {
    "late": (),
    "late_w10_b2": ("-DROW_HELD_WARP_BLOCKS=10", "-DROW_HELD_BLOCK_BLOCKS=2"),
    "late_w12_b3": ("-DROW_HELD_WARP_BLOCKS=12", "-DROW_HELD_BLOCK_BLOCKS=3"),
    "early32_w8_b2": ("-DROW_HELD_EARLY_BYTES=32", "-DROW_HELD_WARP_BLOCKS=8", "-DROW_HELD_BLOCK_BLOCKS=2"),
}
# block-shape orders for held_plan (launch.HELD_ORDER), by storage size: (elements a thread, cluster,
# most threads), each with the most words a thread of a whole warp holds (launch.HELD_WARP_MOST_32)
C = launch.REGS_CLUSTERS
EPT32 = {4: tuple((e, c, 256) for e in (32, 64) for c in C) + tuple((e, c, 512) for e in (32, 64, 16) for c in C),
         2: tuple(e for c in C for e in ((32, c, 512), (16, c, 512), (64, c, 512)))}
WARP8, WARP4 = {4: 8, 2: 8}, dict(launch.REGS_WARP_MOST_32)
ORDERS = {
    "softmax_order": (dict(launch.REGS_ORDER), WARP4),
    "ept32_first_warp4": (EPT32, WARP4),
    "ept32_first": (EPT32, WARP8),
    "ept32_block512_first": ({4: tuple((e, c, 512) for e in (32, 64, 16) for c in C), 2: EPT32[2]}, WARP8),
    "ept32_over_clusters": ({4: tuple((e, c, 512) for e in (32, 64, 16) for c in C),
                             2: tuple((e, c, 512) for e in (32, 16, 64) for c in C)}, WARP8),
    "ept64_first": ({4: launch.REGS_ORDER[4], 2: tuple(e for c in C for e in ((64, c, 512), (32, c, 512), (16, c, 512)))},
                    WARP8),
}
CELLS = {  # what: the cells each probe times
    "knobs": {"bf16": [(grid.tall_rows(N, 2), N) for N in (64, 256, 1024, 1536, 2048, 4096, 8192, 16384, 32768, 65536)]
              + [(1024, 12288), (256, 16384), (4096, 4096)],
              "fp32": [(grid.tall_rows(N, 4), N) for N in (64, 256, 1024, 2048, 4096, 16384, 65536)] + [(1024, 16384)]},
    "orders": {"bf16": [(grid.tall_rows(N, 2), N) for N in (1024, 1536, 2048, 4096, 5120, 8192, 16384, 32768, 65536)]
               + [(1024, 12288), (256, 16384), (1024, 32768), (512, 65536)],
               "fp32": [(grid.tall_rows(N, 4), N) for N in (1536, 2048, 8192, 12288, 16384, 32768, 65536)]
               + [(1024, 16384), (512, 12288)]}}
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def use_setting(opts):
    runtime.get().use_compile_options(opts)


def main(out, what="knobs", method="pipelined"):
    """what: "knobs" (every setting of SETTINGS, the default order) or "orders" (every order of ORDERS,
    the default setting)."""
    rows = []
    settings = SETTINGS if what == "knobs" else {"late": SETTINGS["late"]}
    orders = ORDERS if what == "orders" else {"ept32_first": ORDERS["ept32_first"]}  # the knobs under one order
    for dname, cells in CELLS[what].items():
        dtype = DTYPES[dname]
        for M, N in cells:
            x = torch.randn(M, N, device="cuda", dtype=dtype)
            w, b = torch.randn(N, device="cuda", dtype=dtype), torch.randn(N, device="cuda", dtype=dtype)
            fns = {"copy": lambda: x.clone(), "torch_layer_norm": lambda: F.layer_norm(x, (N,), w, b)}
            # the setting switch recompiles: time each setting on its own, copy and torch beside it
            res = {}
            # the one-read softmax on the same layout and plan, for comparison (no weight, bias or statistics)
            ms = gpu_time({"copy": fns["copy"], "softmax_one_read": lambda: softmax.run("one_read", x)}, reps=20, rounds=3,
                          flush_l2=method == "flushed")
            res["softmax_one_read"] = [100 * ms["copy"] / ms["softmax_one_read"]]
            rows.append({"setting": None, "dtype": dname, "M": M, "N": N, "kernel": "softmax_one_read",
                         "ms": ms["softmax_one_read"], "pct_copy": res["softmax_one_read"][0]})
            for (sname, opts), (oname, (order, most_32)) in ((s, o) for s in settings.items() for o in orders.items()):
                name = f"{sname}/{oname}"
                launch.HELD_ORDER.clear()
                launch.HELD_ORDER.update(order)
                launch.HELD_WARP_MOST_32.clear()
                launch.HELD_WARP_MOST_32.update(most_32)
                use_setting(opts)
                rungs.run("row_held", x, w, b)
                rungs.run("rms_row_held", x, w)
                ms = gpu_time({"copy": fns["copy"], "torch_layer_norm": fns["torch_layer_norm"],
                               "row_held": lambda: rungs.run("row_held", x, w, b),
                               "rms_row_held": lambda: rungs.run("rms_row_held", x, w)},
                              reps=20, rounds=3, flush_l2=method == "flushed")
                for k, t in ms.items():
                    res.setdefault(k if k in ("copy", "torch_layer_norm") else f"{k}:{name}", []).append(
                        100 * ms["copy"] / t)
                    rows.append({"setting": name, "dtype": dname, "M": M, "N": N, "kernel": k, "ms": t,
                                 "pct_copy": 100 * ms["copy"] / t,
                                 "plan": str(launch.held_plan(N, dtype.itemsize))})
            print(dname, M, N, {k: round(sum(v) / len(v)) for k, v in res.items()}, flush=True)
            Path(out).write_text(json.dumps({**stamp(), "method": METHODS[method], "what": what, "settings": settings,
                                             "orders": {k: {str(i): v for i, v in o.items()} for k, (o, _) in orders.items()},
                                             "most_32": {k: {str(i): v for i, v in m.items()} for k, (_, m) in orders.items()},
                                             "rows": rows}, indent=0) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
