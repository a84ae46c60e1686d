"""A real model's training step with every norm on reimpl.fast, beside the same model with torch's
norms: GPT-2 small (124M, its nn.LayerNorms) and a Llama-style model (transformers' LlamaForCausalLM,
its RMSNorms replaced by torch.nn.RMSNorm in the torch run and reimpl.nn.RMSNorm in ours), random
weights (nothing is downloaded), bf16 autocast, AdamW, deterministic algorithms on, eager attention.
Two ways onto the fast kernels: "fast" swaps in reimpl.nn modules (reimpl's Python autograd);
"in_torch" keeps torch's modules and installs the fast kernels as aten's (reimpl.fast.in_torch).
  parity:  the same seed, data and steps with torch's norms, with each of ours, and with torch's
           again (does torch's own step repeat?): every parameter after STEPS_PARITY steps compared
           bit for bit.
  timing:  four copies (torch's norms, fast, in_torch, torch's again as the noise control) take turns
           step by step; wall time of each step with a synchronize at its end; median over STEPS_TIMED.
  inference: batch 1, 128 tokens, no grad, median forward time, the same copies taking turns.
  compiled: torch.compile of the torch-norm model (Inductor generates its own norm kernels, with
           other bits) against torch.compile of the fast model (our ops opaque to Inductor, torch's
           norm bits), taking turns step by step as above; the price of exact norms under compile.
Writes OUT.json (rows: model, dtype, steps, torch_norms_ms, fast_norms_ms, in_torch_norms_ms,
control_ms, params_bit_identical, in_torch_params_bit_identical, torch_runs_bit_identical, inference
..., compiled_torch_norms_ms, compiled_fast_norms_ms, norm_forward_host_us_{torch,fast}: a norm module's
forward host time inside the step and in a loop, norm_forward_host's). Usage (a CUDA machine):
python scripts/gpu/training_step.py OUT.json [MODEL ...]"""
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS's deterministic mode needs it
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

import reimpl  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402

STEPS_PARITY, STEPS_TIMED, WARM, STEPS_HOST = 20, 50, 3, 5
BATCH, SEQ = 8, 1024


def _swap(model, make):
    """Replace every norm module with make(old), keeping its state."""
    for name, child in list(model.named_children()):
        new = make(child)
        if new is not None:
            setattr(model, name, new)
        else:
            _swap(child, make)
    return model


def build(kind: str, norms: str):
    import transformers as tf
    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = tf.GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=SEQ,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        cfg._attn_implementation = "eager"
        model = tf.GPT2LMHeadModel(cfg)

        def make(m):
            if type(m) is torch.nn.LayerNorm and norms == "fast":
                new = reimpl.nn.LayerNorm(m.normalized_shape, eps=m.eps)
                new.load_state_dict(m.state_dict())
                new.kernels = "fast"
                return new
            return None
    else:
        cfg = tf.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                             num_key_value_heads=16, vocab_size=32000, max_position_embeddings=SEQ)
        cfg._attn_implementation = "eager"
        model = tf.LlamaForCausalLM(cfg)

        def make(m):
            if type(m).__name__ == "LlamaRMSNorm":
                new = (reimpl.nn.RMSNorm if norms == "fast" else torch.nn.RMSNorm)(m.weight.shape[0],
                                                                                  eps=m.variance_epsilon)
                with torch.no_grad():
                    new.weight.copy_(m.weight)
                if norms == "fast":
                    new.kernels = "fast"
                return new
            return None
    return _swap(model, make).cuda()


def batches(kind: str, n: int):
    g = torch.Generator(device="cuda").manual_seed(1)
    vocab = 50257 if kind == "gpt2" else 32000
    return [torch.randint(0, vocab, (BATCH, SEQ), device="cuda", generator=g) for _ in range(n)]


# each copy: (its name in the record, the norms its model is built with, installed fast kernels)
COPIES = (("torch", "torch", False), ("fast", "fast", False), ("in_torch", "torch", True), ("control", "torch", False))


def installed(in_torch: bool):
    return reimpl.fast.in_torch() if in_torch else contextlib.nullcontext()


def step(model, opt, ids):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def run(kind: str) -> dict:
    data = batches(kind, STEPS_PARITY)
    trained = {}
    for name, norms, in_torch in COPIES:
        model = build(kind, norms)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        with installed(in_torch):
            for ids in data:
                step(model, opt, ids)
            torch.cuda.synchronize()
        trained[name] = [p.detach().clone() for p in model.parameters()]
        del model, opt

    def identical(a, b):
        return all(torch.equal(x.view(torch.int32), y.view(torch.int32)) for x, y in zip(trained[a], trained[b]))
    same = {name: identical("torch", name) for name in ("fast", "in_torch", "control")}
    del trained
    torch.cuda.empty_cache()

    copies = {name: (build(kind, norms), in_torch) for name, norms, in_torch in COPIES}
    opts = {name: torch.optim.AdamW(m.parameters(), lr=1e-4) for name, (m, _) in copies.items()}
    data = batches(kind, 4)
    times = turns({name: (lambda s, m=m, o=opts[name]: step(m, o, data[s % len(data)]), in_torch)
                   for name, (m, in_torch) in copies.items()})
    ids = batches(kind, 1)[0][:1, :128]

    def infer(m):
        m.eval()
        return lambda s: m(input_ids=ids)
    with torch.no_grad():
        inference = turns({name: (infer(m), in_torch) for name, (m, in_torch) in copies.items() if name != "control"})
    norm_host = {name: norm_forward_host(m, opts[name], data) for name, (m, in_torch) in copies.items()
                 if name in ("torch", "fast")}
    del copies, opts
    torch.cuda.empty_cache()
    compiled = compiled_steps(kind)
    return {"model": {"gpt2": "GPT-2 small (124M), its LayerNorms",
                      "llama": "Llama-style (8 layers, 1024 wide), torch.nn.RMSNorm / reimpl.nn.RMSNorm"}[kind],
            "dtype": "bf16 autocast", "batch": [BATCH, SEQ], "steps": STEPS_PARITY,
            "params_bit_identical": same["fast"], "in_torch_params_bit_identical": same["in_torch"],
            "torch_runs_bit_identical": same["control"],
            **{f"{name}_norms_ms" if name != "control" else "control_ms": round(statistics.median(v), 3)
               for name, v in times.items()},
            **{f"inference_batch1_{name}_ms": round(statistics.median(v), 3) for name, v in inference.items()},
            **{f"compiled_{name}_norms_ms": round(statistics.median(v), 3) for name, v in compiled.items()},
            **{f"norm_forward_host_us_{name}": v for name, v in norm_host.items()}}


def norm_forward_host(model, opt, data) -> dict:
    """Host microseconds of one norm module's forward call (hooks' perf_counter around it), median
    over every norm of STEPS_HOST training steps (in_step), and the same call repeated 200 times back
    to back on one of those inputs (loop, median of 5 rounds): what a call costs where the rest of
    the model runs between calls, and where it runs hot."""
    norms = [m for m in model.modules() if isinstance(m, (torch.nn.LayerNorm, torch.nn.RMSNorm))]
    took, start, held = [], {}, []

    def pre(m, args):
        if not held:
            held.append((m, args[0].detach().requires_grad_()))
        start[m] = time.perf_counter()

    def post(m, args, out):
        took.append(time.perf_counter() - start[m])
    hooks = [h for m in norms for h in (m.register_forward_pre_hook(pre), m.register_forward_hook(post))]
    for s in range(STEPS_HOST):
        step(model, opt, data[s % len(data)])
    torch.cuda.synchronize()
    for h in hooks:
        h.remove()
    m, x = held[0]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        rounds = []
        for _ in range(5):
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(200):
                m(x)
            rounds.append((time.perf_counter() - t) / 200)
    torch.cuda.synchronize()
    return {"in_step": round(statistics.median(took) * 1e6, 2), "loop": round(statistics.median(rounds) * 1e6, 2)}


def turns(runs: dict) -> dict:
    """{name: (f(step index), in_torch)} -> {name: [ms of each timed call]}, the copies taking turns
    call by call, each call's wall time with a synchronize at its end (installation outside the clock)."""
    times = {name: [] for name in runs}
    for s in range(WARM + STEPS_TIMED):
        for name, (f, in_torch) in runs.items():
            with installed(in_torch):
                torch.cuda.synchronize()
                t = time.perf_counter()
                f(s)
                torch.cuda.synchronize()
                if s >= WARM:
                    times[name].append((time.perf_counter() - t) * 1e3)
    return times


def compiled_steps(kind: str) -> dict:
    """Step times of the torch-norm model and the fast one, each under torch.compile."""
    models = {name: torch.compile(build(kind, name)) for name in ("torch", "fast")}
    opts = {name: torch.optim.AdamW(m.parameters(), lr=1e-4) for name, m in models.items()}
    data = batches(kind, 4)
    for name, m in models.items():  # compile the forward and the backward before the clock
        step(m, opts[name], data[0])
    times = turns({name: (lambda s, m=m, o=opts[name]: step(m, o, data[s % len(data)]), False)
                   for name, m in models.items()})
    del models, opts
    torch.cuda.empty_cache()
    return times


def main(out: str) -> None:
    torch.use_deterministic_algorithms(True, warn_only=True)  # the control run shows torch's own repeat
    method = (f"parameters after {STEPS_PARITY} AdamW steps compared bit for bit; step times: four copies "
              f"(torch's norms, reimpl.nn modules on the fast kernels, torch's modules with the fast kernels "
              f"installed in torch, torch's norms again) taking turns, wall time of each step with a synchronize "
              f"at its end, median of {STEPS_TIMED} after {WARM}; inference: batch 1 x 128 tokens, median of "
              f"{STEPS_TIMED}, taking turns; compiled: torch.compile (default mode) of the torch-norm and the "
              f"fast model, compiled before the clock, taking turns; deterministic algorithms on, eager "
              f"attention, no dropout")
    rows = []
    for kind in sys.argv[2:] or ("gpt2", "llama"):
        rows.append(run(kind))
        print(rows[-1], flush=True)
        Path(out).write_text(json.dumps({**stamp(), "method": method, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
