"""Which plan suits each row width: time the one-read softmax under every register plan (elements
per thread, cluster size) and every shared-memory plan (cluster size, block) that holds the row,
beside a copy, at about 256 MB of traffic, by both timing methods. launch.regs_plan's choice is
read off this table.
Usage (a CUDA machine): python scripts/gpu/softmax_plans.py OUT.json [methods] [N,N,...]
  or: python scripts/gpu/softmax_plans.py OUT.json caps   the register caps of the 64-a-thread
      kernels (softmax.cu's ONE_READ_REGS_* settings, CAPS), pipelined, on the widths that take them"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl.checks.bench import METHODS, gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.ladder import softmax  # noqa: E402
from reimpl.ladder.launch import REGS_BLOCK_EPT, SOFTMAX_CLUSTERS, REGS_MAX_BLOCK, REGS_WARP_BLOCK, RegsPlan, regs_block, regs_plan, regs_table, regs_vec, smem_plan, span  # noqa: E402

NS = (128, 256, 512, 768, 1024, 2048, 4096, 5120, 6144, 8192, 12288, 16384, 20000, 32000, 32768, 50257, 65536, 100000,
      100277, 128256, 131072, 262144)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def plans(N, itemsize):
    """name -> plan: every warp plan that holds the row, every register plan whose block has 64 to
    REGS_MAX_BLOCK threads, and every shared-memory plan of 256 or 512 threads that fits."""
    yield "default", regs_plan(N, itemsize)
    vec = regs_vec(itemsize, True)
    for v, vecs, lanes, _ in regs_table(itemsize):
        if v == vec and lanes and lanes * vecs * vec >= span(N, vec) and lanes * vecs * vec < 2 * span(N, vec):
            yield f"warp_l{lanes}_v{vecs}", RegsPlan(vec, vecs, lanes, 1, REGS_WARP_BLOCK)
    for cluster in SOFTMAX_CLUSTERS:
        for ept in REGS_BLOCK_EPT:
            threads = regs_block(span(N, vec), ept, cluster)
            if 64 <= threads <= REGS_MAX_BLOCK:
                yield f"regs_ept{ept}_c{cluster}_b{threads}", RegsPlan(vec, ept // vec, 0, cluster, threads)
        for block in (256, 512):
            p = smem_plan(N, itemsize, cluster, block)
            if p is not None and p.share >= block * vec:
                yield f"smem_c{cluster}_b{block}", p


def main(path, methods=",".join(METHODS), ns=None):
    """ns: a comma list of widths to time again; the file's rows of other widths are kept."""
    ns = tuple(int(n) for n in ns.split(",")) if ns else NS
    old = json.loads(Path(path).read_text())["rows"] if ns != NS and Path(path).is_file() else []
    rows = [r for r in old if r["N"] not in ns] + probe(methods.split(","), ns)
    Path(path).write_text(json.dumps({**stamp(), "method": {m: METHODS[m] for m in methods.split(",")},
                                      "rows": rows}, indent=0) + "\n")


# -D settings of the register caps (softmax.cu's ONE_READ_REGS_*), each given in full, and the widths
# whose plans take 64 elements a thread
CAPS_WHAT = ("the one-read kernels' plans of 64 elements a thread under each register-cap setting (softmax.cu's "
             "ONE_READ_REGS_*: 16-bit rows; float32 rows of clusters up to 8; float32 rows of a cluster of 16), "
             "pipelined, at about 256 MB of traffic")


def _caps(r16, r32, r32_wide):
    return {"ONE_READ_REGS_16_64": r16, "ONE_READ_REGS_32_64": r32, "ONE_READ_REGS_32_64_WIDE": r32_wide}


CAPS = {"fp32_128": _caps(80, 128, 128), "fp32_80": _caps(80, 80, 80), "16bit_72": _caps(72, 128, 128),
        "16bit_64": _caps(64, 128, 128)}
CAP_NS = (32768, 50257, 65536, 100000, 128256, 131072, 262144)


def caps(path):
    """Every ept64 plan of CAP_NS under each setting of CAPS, each setting compiled afresh."""
    from reimpl.device import runtime
    rows = []
    for setting, values in CAPS.items():
        runtime.get().use_compile_options(tuple(f"-D{k}={v}" for k, v in values.items()))
        for r in probe(["pipelined"], CAP_NS, only=lambda name: "ept64" in name):
            rows.append({**r, "setting": setting})
    runtime.get().use_compile_options(())
    Path(path).write_text(json.dumps({**stamp(), "what": CAPS_WHAT, "method": {"pipelined": METHODS["pipelined"]},
                                      "settings": CAPS, "rows": rows}, indent=0) + "\n")


def probe(methods, ns=NS, only=lambda name: True):
    rows = []
    for dname, dtype in DTYPES.items():
        for N in ns:
            M = max(1, round((256 << 20) / (2 * N * dtype.itemsize)))
            x = torch.randn(M, N, device="cuda", dtype=dtype)
            fns = {"copy": lambda: x.clone()}
            for name, p in plans(N, dtype.itemsize):
                if only(name):
                    fns[name] = (lambda p=p: softmax.run("one_read", x, plan=p))
            for method in methods:
                ms = gpu_time(fns, reps=20, rounds=3, flush_l2=method == "flushed")
                for k, t in ms.items():
                    rows.append({"method": method, "dtype": dname, "M": M, "N": N, "plan": k, "ms": t,
                                 "pct_copy": 100 * ms["copy"] / t})
                print(method, dname, M, N, {k: round(100 * ms["copy"] / t) for k, t in ms.items()}, flush=True)
    return rows


if __name__ == "__main__":
    caps(sys.argv[1]) if sys.argv[2:3] == ["caps"] else main(*sys.argv[1:])
