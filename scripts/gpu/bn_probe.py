"""Where the split BatchNorm's time goes, and which plan constants suit it, beside torch.

  kernels  every kernel of one training forward and one backward, ours (bn_split) and torch's
           (F.batch_norm through autograd), on every shape of siblings_bench.py's BatchNorm grid:
           mean device time per call from the profiler (CUPTI), 20 calls
  plans    bn_split's forward and backward timed (median CUDA-event times, pipelined) under each
           setting of SETTINGS, the plan constants of reimpl/ladder/batchnorm_split.py changed one
           at a time from their defaults, torch and a copy in the same run

Usage (a CUDA machine): python scripts/gpu/bn_probe.py OUT.json [kernels|plans] [dtypes=bf16,fp32] [settings]
(settings: a comma list of SETTINGS' names, all by default)"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from reimpl.checks.bench import METHODS, gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.ladder import batchnorm_split as split  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from siblings_bench import DTYPES, batchnorm_cells  # noqa: E402

DEFAULTS = {k: getattr(split, k) for k in ("COLUMN_TX", "MIN_VALUES", "WAVES", "LAST_BLOCK_STATES",
                                            "ONE_BLOCK_VALUES", "MAX_SLICES", "RESIDENT",
                                            "RESIDENT_FROM_BYTES")}
SETTINGS = {"default": {},
            # channels-last input through the split's three launches instead of one resident launch
            "split_columns": {"RESIDENT": False},
            # and through the resident launch whatever its size
            "resident_always": {"RESIDENT_FROM_BYTES": {"forward": {4: 0, 2: 0}, "backward": {4: 0, 2: 0}}},
            # the constants before this probe: blocks of 4096 values, two waves, 2048 slices, tiles of
            # up to 16384 states merged by their last block
            "earlier": {"MIN_VALUES": 4096, "WAVES": 2, "MAX_SLICES": 2048, "LAST_BLOCK_STATES": 16384}, "tx4": {"COLUMN_TX": 4}, "tx2": {"COLUMN_TX": 2}, "min1024": {"MIN_VALUES": 1024},
            "min16384": {"MIN_VALUES": 16384}, "waves1": {"WAVES": 1}, "waves4": {"WAVES": 4},
            "finalize_always": {"LAST_BLOCK_STATES": 0}, "finalize_never": {"LAST_BLOCK_STATES": 1 << 40},
            "one_block_32k": {"ONE_BLOCK_VALUES": 32768}, "max_slices_512": {"MAX_SLICES": 512},
            "min4096": {"MIN_VALUES": 4096}, "waves2": {"WAVES": 2}, "max_slices_2048": {"MAX_SLICES": 2048},
            "last_block_16384": {"LAST_BLOCK_STATES": 16384},
            "min16384_fin": {"MIN_VALUES": 16384, "LAST_BLOCK_STATES": 0},
            "min16384_s512": {"MIN_VALUES": 16384, "MAX_SLICES": 512},
            "min16384_s512_fin": {"MIN_VALUES": 16384, "MAX_SLICES": 512, "LAST_BLOCK_STATES": 0},
            "min16384_w1_fin": {"MIN_VALUES": 16384, "WAVES": 1, "LAST_BLOCK_STATES": 0},
            "min65536_fin": {"MIN_VALUES": 65536, "LAST_BLOCK_STATES": 0},
            "min16384_w1_s512_fin": {"MIN_VALUES": 16384, "WAVES": 1, "MAX_SLICES": 512, "LAST_BLOCK_STATES": 0}}


def use(setting):
    for k, v in {**DEFAULTS, **setting}.items():
        setattr(split, k, v)
    for f in (split.nchw_plan, split.columns_plan, split.resident_plan, split.elementwise_plan):
        f.cache_clear()


def per_kernel(fn, calls=20):
    """{kernel name: mean device us per call}, from the profiler's CUDA activity."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in p.key_averages():
        if e.self_device_time_total > 0:
            out[e.key[:90]] = round(e.self_device_time_total / calls, 2)
    return out


def kernels(dtypes):
    rows = []
    for dname in dtypes:
        for shape, layout, x, dy, w, b in batchnorm_cells(DTYPES[dname]):
            C = shape[1]
            rm, rv = torch.zeros(C, device="cuda", dtype=x.dtype), torch.ones(C, device="cuda", dtype=x.dtype)
            xg, wg, bg = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
            _, mean, invstd = split.batch_norm_train_forward_split(x, w, b)
            plan = split._statistics_plan(*split._layout(x)[:2], True, torch.cuda.get_device_properties(0).multi_processor_count)
            fns = {"bn_split_forward": lambda: split.batch_norm_train_forward_split(x, w, b, rm, rv, 0.1, 1e-5),
                   "bn_split_backward": lambda: split.batch_norm_train_backward_split(dy, x, w, mean, invstd),
                   "torch_forward": lambda: F.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5),
                   "torch_forward_backward": lambda: torch.autograd.grad(
                       F.batch_norm(xg, rm, rv, wg, bg, True, 0.1, 1e-5), (xg, wg, bg), dy)}
            for what, fn in fns.items():
                k = per_kernel(fn)
                rows.append({"dtype": dname, "shape": list(shape), "layout": layout, "what": what, "kernels": k,
                             "total_us": round(sum(k.values()), 2), "plan": str(plan)})
                print(dname, shape, layout, what, round(sum(k.values()), 1), k, flush=True)
    return rows


def plans(dtypes, names=None, method="pipelined"):
    settings = {k: v for k, v in SETTINGS.items() if names is None or k in names or k == "default"}
    rows = []
    for dname in dtypes:
        for shape, layout, x, dy, w, b in batchnorm_cells(DTYPES[dname]):
            use({})
            _, mean, invstd = split.batch_norm_train_forward_split(x, w, b)
            base = {"copy": lambda: x.clone(), "torch_forward": lambda: F.batch_norm(x, None, None, w, b, True, 0.1, 1e-5)}
            res = gpu_time(base, reps=20, rounds=3, flush_l2=method == "flushed")
            for sname, setting in settings.items():
                use(setting)
                ms = gpu_time({"copy": base["copy"],
                               "forward": lambda: split.batch_norm_train_forward_split(x, w, b),
                               "backward": lambda: split.batch_norm_train_backward_split(dy, x, w, mean, invstd)},
                              reps=20, rounds=3, flush_l2=method == "flushed")
                plan = split._statistics_plan(*split._layout(x)[:2], True,
                                              torch.cuda.get_device_properties(0).multi_processor_count)
                rows.append({"dtype": dname, "shape": list(shape), "layout": layout, "setting": sname,
                             "forward_us": ms["forward"] * 1e3, "backward_us": ms["backward"] * 1e3,
                             "copy_us": ms["copy"] * 1e3, "torch_forward_us": res["torch_forward"] * 1e3,
                             "plan": str(plan)})
            use({})
            best = min((r for r in rows if r["shape"] == list(shape) and r["layout"] == layout and r["dtype"] == dname),
                       key=lambda r: r["forward_us"])
            print(dname, shape, layout, "torch", round(res["torch_forward"] * 1e3, 1), "default",
                  round(rows[-len(settings)]["forward_us"], 1), "best", best["setting"], round(best["forward_us"], 1),
                  flush=True)
    return rows


def main(out, what="kernels", dtypes="bf16,fp32", names=None):
    rows = kernels(dtypes.split(",")) if what == "kernels" else plans(dtypes.split(","), names and names.split(","))
    Path(out).write_text(json.dumps({**stamp(), "what": what, "method": METHODS["pipelined"],
                                     "settings": SETTINGS, "defaults": DEFAULTS, "rows": rows}, indent=0) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
