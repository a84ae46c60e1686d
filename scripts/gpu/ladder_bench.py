"""Time every ladder rung (reimpl/ladder/registry.py, CUDA and Triton) beside torch's F.layer_norm /
F.rms_norm, a copy (x.clone()) and the public peers (Liger-Kernel; quack, CuTe DSL; apex's fused
LayerNorm, built by scripts/gpu/build_apex_layer_norm.py, in the forward), every kernel of a
cell in the same run, over the shared grid (reimpl.checks.grid: tall, wide and model cells), by both
of the repository's methods (reimpl.checks.bench.METHODS: pipelined; L2 flushed before every call).

  forward            y from x, weight and bias (RMSNorm: weight): GB/s counts one read of x and one
                     write of y, pct_copy is the copy's time over the kernel's
  forward+backward   through autograd (torch, every rung with a backward, Liger, quack's RMSNorm), the weight
                     and bias gradients included: GB/s counts x and y, then x, dy and dx, and
                     pct_copy compares with 2.5 copies
  backward           the backward alone from the forward's saved statistics (torch's aten backward
                     ops, every rung with a backward, Liger's through autograd.grad on a kept
                     graph): dx, dweight and dbias; GB/s counts the copy-equivalent bytes
                     (grid.backward_bytes), pct_copy compares that rate with the copy's

Usage (a CUDA machine; peers optional, see scripts/gpu/unpack_peers.sh):
    python scripts/gpu/ladder_bench.py OUT.json [dtypes=fp32,bf16,fp16] [parts=tall,wide,model]
        [passes=forward,forward+backward,backward] [methods=pipelined,flushed] [min_n=0]
LADDER_KERNELS=a,b,... times only those kernels (copy and torch's always), min_n only the cells of
rows of at least that many elements. Rows are written after
every cell and merged into OUT.json by (method, dtype, M, N, pass, kernel): a run over part of the
grid keeps the other rows, each row pointing at its run's stamp in `runs`, and the copy each kept
row was compared against stays beside it. The committed record is results/ladder_bench.json."""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from reimpl.checks import grid, peers  # noqa: E402
from reimpl.checks.bench import METHODS, gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.ladder import registry, triton_rungs  # noqa: E402
from reimpl.ladder.backward import norm  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
PASSES = ("forward", "forward+backward", "backward")
SLOW = {"naive"}  # one thread per row: small cells only, with fewer calls
REPS, ROUNDS = 20, 3
EPS = 1e-5
KEY = ("method", "dtype", "M", "N", "pass", "kernel")


class Out:
    def __init__(self, path):
        self.path = Path(path)
        old = json.loads(self.path.read_text()) if self.path.is_file() else {}
        self.runs = old.get("runs", [])
        self.rows = old.get("rows", [])
        self.run = len(self.runs)
        self.runs.append({**stamp(), "peers": peers.versions()})
        self.skipped = old.get("skipped", [])

    def add(self, rows):
        """A cell's new rows replace the older rows of the kernels they time; the copy each older row was
        measured against stays while a row of its run does."""
        new = {tuple(r[k] for k in KEY) for r in rows if r["kernel"] != "copy"}
        kept = [r for r in self.rows if r["kernel"] == "copy" or tuple(r[k] for k in KEY) not in new]
        live = {(r["run"], *(r[k] for k in KEY[:-1])) for r in kept + rows if r["kernel"] != "copy"}
        self.rows = [r for r in kept if r["kernel"] != "copy" or (r["run"], *(r[k] for k in KEY[:-1])) in live] + rows
        # the newest run's stamp heads the file; each row names its own run
        self.path.write_text(json.dumps({**self.runs[-1], "methods": METHODS, "grid": grid.__doc__.split("\n\n")[0],
                                         "pct_copy": "100 x the copy's time over the kernel's, the copy timed in "
                                                     "the same run (a cell's rows may come from several runs: "
                                                     "`run` indexes `runs`)",
                                         "passes": PASSES, "runs": self.runs, "unavailable": peers.UNAVAILABLE,
                                         "skipped": self.skipped, "rows": self.rows}, indent=0) + "\n")


def wanted(name):
    only = os.environ.get("LADDER_KERNELS")
    return name == "copy" or name.startswith("torch_") or not only or name in only.split(",")


def forward_fns(x, w, b, w32, b32):
    N = x.shape[-1]
    fns = {"copy": lambda: x.clone(),
           "torch_layer_norm": lambda: F.layer_norm(x, (N,), w, b, EPS),
           "torch_rms_norm": lambda: F.rms_norm(x, (N,), w, EPS)}
    for e in registry.RUNGS:
        if e.name not in SLOW:
            fns[e.name] = (lambda e=e, run=e.launch_fn(): run(e.name, x, w, None if e.rms_norm else b, EPS))
    liger_ln, liger_rms = peers.liger_layer_norm(), peers.liger_rms_norm()
    quack_ln, quack_rms = peers.quack_layer_norm(), peers.quack_rms_norm()
    apex_ln = peers.apex_layer_norm()
    if apex_ln:
        fns["apex_layer_norm"] = lambda: apex_ln(x, w, b, EPS)
    if liger_ln:
        fns["liger_layer_norm"] = lambda: liger_ln(x, w, b, EPS)
    if liger_rms:
        fns["liger_rms_norm"] = lambda: liger_rms(x, w, EPS)
    if quack_ln:
        fns["quack_layer_norm"] = lambda: quack_ln(x, w32, b32, EPS)  # quack wants float32 parameters
    if quack_rms:
        fns["quack_rms_norm"] = lambda: quack_rms(x, w, EPS)
    return {k: f for k, f in fns.items() if wanted(k)}


def training_fns(x, w, b):
    """One forward and one backward through autograd; autograd.grad returns fresh gradients, so no
    accumulation kernel is timed."""
    N = x.shape[-1]
    xg, wg, bg = (t.detach().requires_grad_(True) for t in (x, w, b))
    dy = torch.randn_like(x)

    def step(f, params):
        return lambda: torch.autograd.grad(f(), params, dy)
    ln, rms = (xg, wg, bg), (xg, wg)
    fns = {"copy": lambda: x.clone(),
           "torch_layer_norm": step(lambda: F.layer_norm(xg, (N,), wg, bg, EPS), ln),
           "torch_rms_norm": step(lambda: F.rms_norm(xg, (N,), wg, EPS), rms)}
    for e in registry.BACKWARD_RUNGS:
        fns[e.name] = step(lambda e=e: norm(e.name, xg, wg, None if e.rms_norm else bg, EPS), rms if e.rms_norm else ln)
    liger_ln, liger_rms, quack_rms = peers.liger_layer_norm(), peers.liger_rms_norm(), peers.quack_rms_norm()
    if liger_ln:
        fns["liger_layer_norm"] = step(lambda: liger_ln(xg, wg, bg, EPS), ln)
    if liger_rms:
        fns["liger_rms_norm"] = step(lambda: liger_rms(xg, wg, EPS), rms)
    if quack_rms:
        fns["quack_rms_norm"] = step(lambda: quack_rms(xg, wg, EPS), rms)
    return {k: f for k, f in fns.items() if wanted(k)}


def backward_fns(x, w, b):
    """The backward alone: torch's aten ops and every rung's backward from the forward's statistics,
    Liger's through autograd.grad on a graph kept for the repeats."""
    aten = torch.ops.aten
    N = x.shape[-1]
    dy = torch.randn_like(x)
    _, mean, rstd = aten.native_layer_norm(x, [N], w, b, EPS)
    _, rrstd = aten._fused_rms_norm(x, [N], w, EPS)
    fns = {"copy": lambda: x.clone(),
           "torch_layer_norm": lambda: aten.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b, [True] * 3),
           "torch_rms_norm": lambda: aten._fused_rms_norm_backward(dy, x, [N], rrstd, w, [True, True])}
    for e in registry.BACKWARD_RUNGS:
        run = e.backward_fn()
        fns[e.name] = (lambda e=e, run=run: run(e.name, dy, x, w, None, None, rrstd.view(-1)) if e.rms_norm
                       else run(e.name, dy, x, w, b, mean.view(-1), rstd.view(-1)))
    xg, wg, bg = (t.detach().clone().requires_grad_(True) for t in (x, w, b))
    liger_ln, liger_rms = peers.liger_layer_norm(), peers.liger_rms_norm()
    if liger_ln:
        y = liger_ln(xg, wg, bg, EPS)
        fns["liger_layer_norm"] = lambda: torch.autograd.grad(y, (xg, wg, bg), dy, retain_graph=True)
    if liger_rms:
        yr = liger_rms(xg, wg, EPS)
        fns["liger_rms_norm"] = lambda: torch.autograd.grad(yr, (xg, wg), dy, retain_graph=True)
    return {k: f for k, f in fns.items() if wanted(k)}


def time_cell(out, fns, method, cell):
    """Median ms of each kernel; a kernel that raises on the cell is recorded in `skipped`, not fatal."""
    for k in [k for k in fns if k not in ("copy",)]:
        try:
            fns[k]()
        except Exception as e:  # noqa: BLE001
            out.skipped.append({"kernel": k, **cell, "method": method, "why": f"{type(e).__name__}: {str(e)[:160]}"})
            del fns[k]
    return gpu_time(fns, reps=REPS, rounds=ROUNDS, flush_l2=method == "flushed")


def main(path, dtypes=",".join(DTYPES), parts=",".join(grid.PARTS), passes=",".join(PASSES),
         methods=",".join(METHODS), min_n="0") -> None:
    out = Out(path)
    for dname in dtypes.split(","):
        dtype = DTYPES[dname]
        for part, M, N in grid.cells(dtype.itemsize, parts.split(",")):
            if N < int(min_n):
                continue
            x = torch.randn(M, N, device="cuda", dtype=dtype)
            w, b = torch.randn(N, device="cuda", dtype=dtype), torch.randn(N, device="cuda", dtype=dtype)
            w32, b32 = w.float(), b.float()
            small = M * N <= grid.SLOW_MOST
            for ps in passes.split(","):
                for method in methods.split(","):
                    cell = {"dtype": dname, "M": M, "N": N, "pass": ps}
                    with torch.no_grad() if ps == "forward" else torch.enable_grad():
                        fns = (forward_fns(x, w, b, w32, b32) if ps == "forward" else
                               training_fns(x, w, b) if ps == "forward+backward" else backward_fns(x, w, b))
                        ms = time_cell(out, fns, method, cell)
                        if ps == "forward" and small and wanted("naive"):
                            run = registry.BY_NAME["naive"].launch_fn()
                            ms.update(gpu_time({"naive": lambda: run("naive", x, w, b, EPS)}, reps=3, rounds=1,
                                               flush_l2=method == "flushed"))
                    rows = []
                    for k, t in ms.items():
                        pct, gbps = grid.pct_and_gbps(ps, k, M, N, x.element_size(), t, ms["copy"])
                        rows.append({"method": method, **cell, "part": part, "kernel": k, "ms": t, "gbps": gbps,
                                     "pct_copy": pct, "run": out.run})
                    out.add(rows)
                    print(method, dname, M, N, ps, {r["kernel"]: round(r["pct_copy"]) for r in rows}, flush=True)
                    del fns
            del x, w, b


if __name__ == "__main__":
    main(*sys.argv[1:])
