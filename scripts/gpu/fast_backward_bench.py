"""Time the whole LayerNorm/RMSNorm backward (dX, dgamma, dbeta) of reimpl.fast beside torch's,
Liger-Kernel's and a copy (x.clone()) in one run: median CUDA-event time per call, launches
pipelined behind a spin kernel, once with the L2 as the previous call left it and once flushed
before every call (reimpl.checks.bench.METHODS). Torch's and ours are the aten backward op with every
gradient asked for; Liger's is torch.autograd.grad through its Function on a graph kept for
the repeats (its backward kernels only: the GPU time excludes the host). GB/s counts the backward's
copy-equivalent bytes: x, dy, dx, mean (LayerNorm), rstd, gamma, dgamma and dbeta (LayerNorm); a
copy moves x and its clone, so % of copy is (bytes / t) / (2 |x| / t_copy).
Usage: python scripts/gpu/fast_backward_bench.py OUT.json [quick]   (REIMPL_PEERS_DIR: Liger)"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl import fast  # noqa: E402
from reimpl.checks import grid, peers  # noqa: E402
from reimpl.checks.bench import METHODS, gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402

aten = torch.ops.aten
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# tall rows at model widths, few-row wide rows, and the fast kernels' tuning cells
SHAPES = ((4096, 1024), (65536, 768), (16384, 1024), (32768, 2048), (16384, 4096), (8192, 4096), (8192, 6144),
          (16384, 5120), (4096, 8192), (2048, 12288), (2048, 16384), (8192, 16384))
QUICK = ((16384, 4096), (8192, 6144), (2048, 16384))


def fns(x, dy, w, b):
    ns = [x.shape[-1]]
    _, mean, rstd = aten.native_layer_norm(x, ns, w, b, 1e-5)
    _, rrstd = aten._fused_rms_norm(x, ns, w, 1e-5)
    out = {
        "copy": lambda: x.clone(),
        "torch_layer_norm_backward": lambda: aten.native_layer_norm_backward(dy, x, ns, mean, rstd, w, b,
                                                                             [True, True, True]),
        "fast_layer_norm_backward": lambda: fast.native_layer_norm_backward(dy, x, ns, mean, rstd, w, b,
                                                                            (True, True, True)),
        "torch_rms_norm_backward": lambda: aten._fused_rms_norm_backward(dy, x, ns, rrstd, w, [True, True]),
        "fast_rms_norm_backward": lambda: fast.fused_rms_norm_backward(dy, x, ns, rrstd, w, (True, True)),
    }
    ln, rms = peers.liger_layer_norm(), peers.liger_rms_norm()
    xg, wg, bg = (t.detach().clone().requires_grad_(True) for t in (x, w, b))
    if ln is not None:
        y = ln(xg, wg, bg, 1e-5)
        out["liger_layer_norm_backward"] = lambda: torch.autograd.grad(y, (xg, wg, bg), dy, retain_graph=True)
    if rms is not None:
        yr = rms(xg, wg, 1e-5)
        out["liger_rms_norm_backward"] = lambda: torch.autograd.grad(yr, (xg, wg), dy, retain_graph=True)
    return out


def nbytes(kernel: str, M: int, N: int, size: int) -> int:
    return 2 * M * N * size if kernel == "copy" else grid.backward_bytes(M, N, size, "rms_norm" in kernel)


def main(out: str, quick: bool = False) -> None:
    rows = []
    for method in METHODS:
        for dname, dtype in DTYPES.items():
            for M, N in (QUICK if quick else SHAPES):
                x, dy = (torch.randn(M, N, device="cuda", dtype=dtype) for _ in range(2))
                w, b = (torch.randn(N, device="cuda", dtype=dtype) for _ in range(2))
                ms = gpu_time(fns(x, dy, w, b), reps=20, rounds=3, flush_l2=method == "flushed")
                size = x.element_size()
                for k, t in ms.items():
                    rows.append({"method": method, "dtype": dname, "M": M, "N": N, "kernel": k, "ms": t,
                                 "gbps": nbytes(k, M, N, size) / t / 1e6,
                                 "pct_copy": 100 * (nbytes(k, M, N, size) / t) / (2 * M * N * size / ms["copy"])})
                print(method, dname, M, N, {r["kernel"].replace("_backward", ""): f"{r['pct_copy']:.0f}%"
                                            for r in rows[-len(ms):]}, flush=True)
                del x, dy, w, b
                torch.cuda.empty_cache()
                write(out, rows)  # after every cell: a run cut short keeps what it measured


def write(out: str, rows: list) -> None:
    Path(out).write_text(json.dumps({**stamp(), "peers": peers.versions(), "methods": METHODS,
                                     "bytes": "GB/s counts x, dy, dx, mean (LayerNorm), rstd, gamma, dgamma and "
                                              "dbeta (LayerNorm); copy: x and its clone", "rows": rows}, indent=0) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], quick=len(sys.argv) > 2 and sys.argv[2] == "quick")
