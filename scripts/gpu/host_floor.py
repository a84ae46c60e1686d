"""The least a Python autograd Function can cost on the host, against torch's C++ call and ours.
For LayerNorm and RMSNorm (functional call, reimpl.fast), in one process, taking turns round by round:

    torch                  torch.nn.functional's call (C++ autograd node)
    fast                   reimpl.fast's call
    floor: replay          the forward's compiled launch-plan replay alone, on fixed addresses (no
                           key, no lookup, no autograd): three allocations and the launch
    floor: Function        a Python autograd Function whose forward runs that replay and keeps what
                           ours keeps (the statistics on ctx, input and weights saved): what any
                           Python Function that launches this plan pays at least
    floor: empty Function  a Python autograd Function that saves the same tensors and launches nothing

Each is timed without grad (where it can be) and with grad (the input and weights need one), at 8 x
1024 fp32; and forward+backward steps (torch.autograd.grad of the input and weights, the GPU waited
for inside the clock) for torch, fast and the floor Function (its backward replays the backward
plan, the addresses read from the tensors) at 8 x 1024 fp32 and on two 32 MB bf16 shapes.
Usage (a CUDA machine): python scripts/gpu/host_floor.py OUT.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

import reimpl  # noqa: E402
from reimpl import api, autograd  # noqa: E402
from reimpl.checks import bench, host  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402

F = torch.nn.functional
CALLS, ROUNDS, STEPS = 400, 11, 40
SHAPES = ((8, 1024, torch.float32), (16384, 1024, torch.bfloat16), (8192, 4096, torch.bfloat16))


def floor_functions(op, x, w, b, N):
    """(floor replay, floor Function, empty Function, floor step) for one op on x, w, b after our
    call has run once: the signature's compiled replays, bound to these tensors."""
    rt = api.runtime_for("fast")
    inputs = (x, w, b) if op == "layer_norm" else (x, w)
    method = "native_layer_norm" if op == "layer_norm" else "_fused_rms_norm"
    key, ptrs = api.signature(method, inputs, ((N,), api._eps_key(1e-5 if op == "layer_norm" else 1e-6)))
    sig = rt.plans[(autograd._SIGNATURE, key)]
    forward, stream = sig.forward, rt.getCurrentCUDAStream()
    backward = next(fn for fn in sig.backward.values() if fn)
    n = len(inputs)

    def replay():
        return forward(inputs, ptrs, stream)

    class Floor(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *ts):
            out, *stats = forward(inputs, ptrs, stream)
            ctx.stats = stats
            ctx.save_for_backward(*ts)
            return out

        @staticmethod
        def backward(ctx, g):
            saved = ctx.saved_tensors
            tensors = (g, saved[0], *ctx.stats, *saved[1:])
            return backward(tensors, [t.data_ptr() for t in tensors], stream)

    class Empty(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *ts):
            ctx.stats = None
            ctx.save_for_backward(*ts)
            return ts[0].view_as(ts[0])

        @staticmethod
        def backward(ctx, g):
            return (g,) + (None,) * (n - 1)
    floor, empty = autograd._direct(Floor), autograd._direct(Empty)
    return replay, lambda: floor(*inputs), lambda: empty(*inputs), floor


def turns(fns: dict, calls: int, rounds: int, wait=False) -> dict:
    """bench.host_us's medians, rounded for the record."""
    return {k: round(v, 2) for k, v in bench.host_us(fns, calls, rounds, wait).items()}


def calls(op, x, w, b, N):
    if op == "layer_norm":
        return (lambda: F.layer_norm(x, (N,), w, b), lambda: reimpl.fast.layer_norm(x, (N,), w, b))
    return lambda: F.rms_norm(x, (N,), w, 1e-6), lambda: reimpl.fast.rms_norm(x, (N,), w, 1e-6)


def main(out: str) -> None:
    result = {**stamp(), "method": f"host us per call: median of {ROUNDS} rounds of {CALLS} back-to-back calls "
              "(steps: rounds of "
              f"{STEPS}, the GPU waited for inside the clock), the providers taking turns round by round, one process",
              "rows": []}
    for op in ("layer_norm", "rms_norm"):
        for M, N, dtype in SHAPES:
            x, w, b = host._inputs(op, M, N, dtype, True)
            g = torch.randn(M, N, device="cuda", dtype=dtype)
            torch_call, fast_call = calls(op, x, w, b, N)
            params = (x, w, b) if op == "layer_norm" else (x, w)
            for _ in range(3):
                torch.autograd.grad(fast_call(), params, g)  # the first calls record the plans
            replay, floor_fn, empty_fn, floor = floor_functions(op, x, w, b, N)
            steps = turns({"torch": lambda: torch.autograd.grad(torch_call(), params, g),
                           "fast": lambda: torch.autograd.grad(fast_call(), params, g),
                           "floor: Function": lambda: torch.autograd.grad(floor(*params), params, g)},
                          STEPS, 7, wait=True)
            row = {"op": op, "M": M, "N": N, "dtype": str(dtype).removeprefix("torch."), "step_us": steps}
            if M * N <= 1 << 16:
                row["forward_grad_us"] = turns({"torch": torch_call, "fast": fast_call, "floor: Function": floor_fn,
                                                "floor: empty Function": empty_fn}, CALLS, ROUNDS)
                with torch.no_grad():
                    row["forward_us"] = turns({"torch": torch_call, "fast": fast_call, "floor: replay": replay},
                                              CALLS, ROUNDS)
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
    Path(out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
