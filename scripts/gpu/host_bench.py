"""Host cost per call, torch's beside the mirror's and reimpl.fast's, and where ours goes.
Writes OUT.json: the environment stamp; `rows`, host microseconds per call of every cell of
reimpl.checks.host (LayerNorm and RMSNorm; the aten op, the functional call and the module;
forward, forward with grad, backward, forward+backward) at 8 x 1024 fp32 for torch, the mirror
and fast (with plans and without), and torch's calls with the mirror or fast installed as aten's
kernels (reimpl.in_torch); `steps`, pipelined forward+backward time per step on
shapes of at least 32 MB; and a cProfile of the fast forward+backward's two kernel calls. Where a
forward+backward's microseconds go is scripts/gpu/host_probe.py's, run last and stored as `probe`.
Usage (a CUDA machine): python scripts/gpu/host_bench.py OUT.json [quick]"""
import cProfile
import io
import json
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl import api  # noqa: E402
from reimpl.checks import host  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402

M, N = host.SMALL
# forward+backward shapes, each at least 32 MB in 16-bit storage
STEP_SHAPES = ((65536, 768), (16384, 1024), (8192, 4096), (4096, 8192), (2048, 16384))
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def rows(calls, rounds):
    out = []
    for op, way, pass_ in host.cells():
        us = host.host_us(op, way, pass_, calls=calls, rounds=rounds)
        api.USE_PLANS = False
        full = host.host_us(op, way, pass_, ("mirror", "fast"), calls=calls // 4, rounds=rounds)
        api.USE_PLANS = True
        for kernels in host.KERNELS:
            row = {"op": op, "api": way, "pass": pass_, "kernels": kernels, "host_us": round(us[kernels], 2)}
            if kernels in full:
                row["host_us_without_plans"] = round(full[kernels], 2)
            out.append(row)
        print(f"{op:10s} {way:10s} {pass_:16s}", {k: round(v, 1) for k, v in us.items()}, flush=True)
    return out


def profile():
    """cProfile of reimpl.fast's forward and backward kernel calls (no autograd) at the small shape."""
    x, w, b, g = (torch.randn(*shape, device="cuda") for shape in ((M, N), (N,), (N,), (M, N)))
    rt = api.runtime_for("fast")
    _, mean, rstd = api._native_layer_norm(x, (N,), w, b, 1e-5, rt=rt)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(5000):
        api._native_layer_norm(x, (N,), w, b, 1e-5, rt=rt)
        api.native_layer_norm_backward(g, x, (N,), mean, rstd, w, b, (True, True, True), rt=rt)
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(20)
    return text.getvalue().split("\n", 3)[-1].strip()


def steps(quick):
    out = []
    shapes = STEP_SHAPES[2:3] if quick else STEP_SHAPES
    for op in ("layer_norm", "rms_norm"):
        for dname, dtype in DTYPES.items():
            for Mx, Nx in shapes:
                r = {"op": op, "dtype": dname, "M": Mx, "N": Nx}
                r.update({k: round(v, 2) for k, v in host.step_us(op, Mx, Nx, dtype).items()})
                out.append(r)
                print(op, dname, Mx, Nx, {k: r[k] for k in host.KERNELS}, flush=True)
                torch.cuda.empty_cache()
    return out


def main(out_path, quick=False):
    calls, rounds = (300, 5) if quick else (400, 11)
    result = {**stamp(), "shape": [M, N], "dtype": "float32",
              "method": f"host_us: median of {rounds} rounds of {calls} back-to-back calls, time.perf_counter "
                        "around each round, the five providers (torch; reimpl's calls on the mirror's and the fast kernels; "
                        "torch's calls with each installed as aten's, installed around the round, outside the clock) "
                        "taking turns round by round, the GPU idle "
                        "enough to keep up; backward cells time "
                        "torch.autograd.grad on graphs built before the round; steps: forward+backward "
                        "through autograd, 20 back to back and a synchronize inside the clock (the slower of "
                        "the host and the GPU sets the time), median of 7 rounds taken in turns",
              "rows": rows(calls, rounds)}
    result["cprofile_fast_forward_backward"] = profile()
    result["steps"] = steps(quick)
    Path(out_path).write_text(json.dumps(result, indent=1) + "\n")
    from host_probe import probe  # this script's folder is on sys.path
    result["probe"] = probe()
    Path(out_path).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], quick=len(sys.argv) > 2 and sys.argv[2] == "quick")
