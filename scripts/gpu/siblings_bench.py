"""Time LayerNorm's siblings beside torch, a copy and the public peers, every kernel of a cell in the
same run (reimpl.checks.bench.gpu_time: median CUDA-event time per call, kernels interleaved by
round), by both of the repository's methods (bench.METHODS: pipelined; L2 flushed before each call).

  softmax        rows of N from 128 to 262144, the vocabularies, about 256 MB of traffic each, and
                 a few few-row long shapes: our four kernels, torch.softmax, Liger's and quack's
  cross_entropy  the loss and its gradient over vocabulary-sized rows: ours (one fused kernel),
                 F.cross_entropy forward and backward, Liger's (its forward computes the gradient),
                 quack's forward and backward
  batchnorm      ResNet-50's layers at batch 32 and a ViT's (N*L, C), NCHW and channels_last:
                 training forward (ours: bn_kernel, bn_split; torch's F.batch_norm) and forward plus
                 backward (bn_split's two passes; torch through autograd)

GB/s counts the bytes a copy-equivalent moves: x read and y written (softmax, forward); logits read
and gradient written (cross-entropy); x, y, dy and dx (forward plus backward, against two copies).
Usage (a CUDA machine, peers optional: scripts/gpu/unpack_peers.sh):
    python scripts/gpu/siblings_bench.py OUT.json [softmax,cross_entropy,batchnorm]
Rows are written after every cell, so a run cut short keeps what it measured; an op not named
keeps its rows (and its run's stamp, under "runs") from the file as it was."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from reimpl.checks import peers  # noqa: E402
from reimpl.checks.bench import METHODS, gpu_time  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.ladder import batchnorm, cross_entropy, registry, softmax  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
TRAFFIC = 256 << 20
SOFTMAX_NS = (128, 512, 768, 1024, 2048, 4096, 5120, 6144, 8192, 12288, 16384, 32000, 32768, 50257, 65536,
              128256, 131072, 262144)
SOFTMAX_FEW_ROWS = ((16, 131072), (4, 262144), (64, 32000), (32, 50257))
CE_SHAPES = ((8192, 32000), (4096, 50257), (2048, 128256), (512, 262144))
RESNET50 = ((32, 64, 112, 112), (32, 64, 56, 56), (32, 256, 56, 56), (32, 128, 28, 28), (32, 512, 28, 28),
            (32, 256, 14, 14), (32, 1024, 14, 14), (32, 512, 7, 7), (32, 2048, 7, 7))
VIT = ((32 * 197, 768),)
REPS, ROUNDS = 20, 3


def softmax_shapes(itemsize):
    tall = [(max(1, round(TRAFFIC / (2 * N * itemsize))), N) for N in SOFTMAX_NS]
    return tall + list(SOFTMAX_FEW_ROWS)


class Out:
    """The results file. Ops not measured now keep their rows from an earlier run of the file, each
    op's run stamped in `runs` (device, versions, date, peers)."""

    def __init__(self, path, ops):
        self.path = Path(path)
        old = json.loads(self.path.read_text()) if self.path.is_file() else {"rows": [], "runs": {}}
        self.rows = [r for r in old["rows"] if r["op"] not in ops]
        runs = {op: run for op, run in old.get("runs", {}).items() if op not in ops}
        run = {**stamp(), "peers": peers.versions()}
        self.head = {**run, "methods": METHODS, "runs": {**runs, **{op: run for op in ops}},
                     "traffic": "bytes a copy-equivalent moves (see the script's docstring)"}

    def add(self, method, op, dname, shape, ms, nbytes, copies=1, extra=None):
        for k, t in ms.items():
            self.rows.append({"method": method, "op": op, "dtype": dname, "shape": list(shape), "kernel": k,
                              "ms": t, "gbps": nbytes / t / 1e6, "pct_copy": 100 * copies * ms["copy"] / t,
                              **(extra or {})})
        self.path.write_text(json.dumps({**self.head, "unavailable": peers.UNAVAILABLE, "skipped": SKIPPED,
                                         "rows": self.rows},
                                        indent=0) + "\n")
        print(method, op, dname, shape, {k: round(v * 1e3, 1) for k, v in ms.items()}, "us", flush=True)


SKIPPED: list = []  # a peer that refuses a cell's shape (quack wants rows of a multiple of 16 bytes)


def time_cell(fns, method, cell=None):
    """Median ms of each kernel of a cell; a peer that raises on the cell (`cell`: its dtype and shape)
    is recorded in SKIPPED and left out, not fatal."""
    for k in [k for k in fns if k.startswith(("liger_", "quack_"))]:
        try:
            fns[k]()
        except Exception as e:  # noqa: BLE001
            SKIPPED.append({"kernel": k, **(cell or {}), "why": f"{type(e).__name__}: {str(e)[:160]}"})
            del fns[k]
    return gpu_time(fns, reps=REPS, rounds=ROUNDS, flush_l2=method == "flushed")


def time_rows(out, op, dname, x, fns, methods):
    """One cell of a row-wise op by each method: x read once and an output of its size written."""
    for method in methods:
        ms = time_cell(fns, method, {"dtype": dname, "shape": list(x.shape)})
        out.add(method, op, dname, tuple(x.shape), ms, 2 * x.numel() * x.element_size())


def bench_softmax(out, dname, dtype, methods):
    liger, quack = peers.liger_softmax(), peers.quack_softmax()
    for M, N in softmax_shapes(dtype.itemsize):
        x = torch.randn(M, N, device="cuda", dtype=dtype)
        fns = {"copy": lambda: x.clone(), "torch_softmax": lambda: torch.softmax(x, -1)}
        for e in registry.of_group("softmax"):
            if e.name == "online_warp" and N > 32768:
                continue  # a warp per row of 64k+: tens of ms a call, and not what it is for
            fns[e.name] = (lambda e=e: softmax.run(e.name, x))
        if liger:
            fns["liger_softmax"] = lambda: liger(x)
        if quack:
            fns["quack_softmax"] = lambda: quack(x)
        time_rows(out, "softmax", dname, x, fns, methods)


def bench_cross_entropy(out, dname, dtype, methods):
    liger, quack = peers.liger_cross_entropy(), peers.quack_cross_entropy()
    for M, N in CE_SHAPES:
        x = torch.randn(M, N, device="cuda", dtype=dtype)
        xg = x.clone().requires_grad_()
        t = torch.randint(0, N, (M,), device="cuda")
        fns = {"copy": lambda: x.clone(),
               "cross_entropy_fused": lambda: cross_entropy.loss_and_grad(x, t),
               "torch_cross_entropy": lambda: torch.autograd.grad(F.cross_entropy(xg, t), xg)}
        if liger:
            xl = x.clone().requires_grad_()  # Liger writes the gradient into it: its forward is the whole work
            fns["liger_cross_entropy"] = lambda: liger(xl, t)
        if quack:
            fns["quack_cross_entropy"] = lambda: torch.autograd.grad(quack(xg, t), xg)
        time_rows(out, "cross_entropy", dname, x, fns, methods)


def batchnorm_cells(dtype):
    """Each BatchNorm cell's (shape, layout, x, dy, weight, bias): ResNet-50's layers in both memory
    formats, the ViT input as columns."""
    for shape in RESNET50 + VIT:
        for layout in ("nchw", "channels_last") if len(shape) == 4 else ("channels_last",):
            C = shape[1]
            x = torch.randn(shape, device="cuda", dtype=dtype)
            if layout == "channels_last" and x.dim() == 4:
                x = x.to(memory_format=torch.channels_last)
            dy = torch.randn_like(x)
            w, b = torch.randn(C, device="cuda", dtype=dtype), torch.randn(C, device="cuda", dtype=dtype)
            yield shape, layout, x, dy, w, b


def bench_batchnorm(out, dname, dtype, methods):
    from reimpl.ladder import batchnorm_split as split
    for shape, layout, x, dy, w, b in batchnorm_cells(dtype):
        C = shape[1]
        rm, rv = torch.zeros(C, device="cuda", dtype=dtype), torch.ones(C, device="cuda", dtype=dtype)
        rm2, rv2 = rm.clone(), rv.clone()
        xg, wg, bg = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
        _, mean, invstd = split.batch_norm_train_forward_split(x, w, b)

        def ours_fwd_bwd():
            y, m, s = split.batch_norm_train_forward_split(x, w, b, rm2, rv2, 0.1, 1e-5)
            return split.batch_norm_train_backward_split(dy, x, w, m, s)

        fwd = {"copy": lambda: x.clone(),
               "torch_batch_norm": lambda: F.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5),
               "bn_split": lambda: split.batch_norm_train_forward_split(x, w, b, rm2, rv2, 0.1, 1e-5)}
        if layout == "nchw":
            fwd["bn_kernel"] = lambda: batchnorm.batch_norm_train_forward(x, w, b, rm2, rv2, 0.1, 1e-5)
        both = {"copy": lambda: x.clone(),
                "torch_batch_norm": lambda: torch.autograd.grad(
                    F.batch_norm(xg, rm, rv, wg, bg, True, 0.1, 1e-5), (xg, wg, bg), dy),
                "bn_split": ours_fwd_bwd,
                "bn_split_backward": lambda: split.batch_norm_train_backward_split(dy, x, w, mean, invstd)}
        nbytes = 2 * x.numel() * x.element_size()
        for method in methods:
            out.add(method, "batchnorm", dname, shape, time_cell(fwd, method), nbytes,
                    extra={"layout": layout, "pass": "forward"})
            ms = time_cell(both, method)
            # forward + backward moves four tensors: two copies' worth; the backward alone three
            out.add(method, "batchnorm", dname, shape, {k: v for k, v in ms.items() if k != "bn_split_backward"},
                    2 * nbytes, copies=2, extra={"layout": layout, "pass": "forward_backward"})
            out.add(method, "batchnorm", dname, shape, {"copy": ms["copy"], "bn_split": ms["bn_split_backward"]},
                    3 * nbytes // 2, copies=1.5, extra={"layout": layout, "pass": "backward"})


OPS = {"softmax": bench_softmax, "cross_entropy": bench_cross_entropy, "batchnorm": bench_batchnorm}


def main(path, ops=",".join(OPS), methods=",".join(METHODS)) -> None:
    out = Out(path, ops.split(","))
    for op in ops.split(","):
        for dname, dtype in DTYPES.items():
            OPS[op](out, dname, dtype, methods.split(","))


if __name__ == "__main__":
    main(*sys.argv[1:])
