"""What a C++ autograd node would cost the host, against a Python one, on this machine's CPU (no GPU
needed): scripts/cpp_node_probe.cpp, built with torch.utils.cpp_extension (g++ and ninja), does in C++
what reimpl.fast's differentiable LayerNorm does per call once its plan exists: hash the plan key,
look the plan up, allocate out, mean and rstd, launch (a function pointer that does nothing), save x,
w and b; its backward allocates dX, dw and db and "launches" once. Beside it: a Python autograd
Function that only allocates the same three outputs and saves the same tensors (no key, no lookup:
less than ours does), and torch's F.layer_norm on the CPU (which also computes, so it is shown for
scale only). CPU tensors at 8 x 1024 fp32, one thread; forward with grad, and forward+backward
(torch.autograd.grad). Usage: python scripts/cpp_node_probe.py OUT.json"""
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reimpl import autograd  # noqa: E402
from reimpl.checks.record import host_cpu  # noqa: E402

M, N = 8, 1024
CALLS, ROUNDS = 3000, 9


class PythonNode(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        out = torch.empty_like(x)
        ctx.stats = (torch.empty(M, 1), torch.empty(M, 1))
        ctx.save_for_backward(x, w, b)
        return out

    @staticmethod
    def backward(ctx, g):
        x, w, b = ctx.saved_tensors
        return torch.empty_like(x), torch.empty_like(w), torch.empty_like(b)


def median_us(fn, calls: int) -> float:
    rounds = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - t0) / calls * 1e6)
    return round(statistics.median(rounds), 2)


def main(out: str) -> None:
    torch.set_num_threads(1)
    t0 = time.time()
    mod = load_inline("reimpl_cpp_node_probe", cpp_sources=(Path(__file__).with_suffix(".cpp")).read_text(),
                      functions=["ln", "add_plan"], extra_cflags=["-O2"])
    build_s = round(time.time() - t0, 1)
    x, w, b = (torch.randn(*s, requires_grad=True) for s in ((M, N), (N,), (N,)))
    g = torch.randn(M, N)
    mod.add_plan(x, w, b)
    python = autograd._direct(PythonNode)  # apply without its Python step, as ours
    calls = {"torch F.layer_norm (computes too)": lambda: torch.nn.functional.layer_norm(x, (N,), w, b),
             "Python Function: three allocations, no key": lambda: python(x, w, b),
             "C++ Function: key, lookup, three allocations, launch call": lambda: mod.ln(x, w, b)}
    for f in calls.values():
        for _ in range(200):
            torch.autograd.grad(f(), (x, w, b), g)
    rows = [{"node": name, "forward_grad_us": median_us(f, CALLS),
             "forward_backward_us": median_us(lambda f=f: torch.autograd.grad(f(), (x, w, b), g), CALLS // 3)}
            for name, f in calls.items()]
    record = {"torch": torch.__version__, "cpu": host_cpu(), "threads": 1, "date": datetime.date.today().isoformat(),
              "build_s": build_s, "shape": [M, N],
              "method": f"median of {ROUNDS} rounds of back-to-back calls ({CALLS} forward, {CALLS // 3} "
                        "forward+backward), time.perf_counter around each round, CPU tensors",
              "rows": rows}
    Path(out).write_text(json.dumps(record, indent=1) + "\n")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main(sys.argv[1])
