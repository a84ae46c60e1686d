"""The training guide's host-cost tables, drawn at build time from results/host_overhead.json
(written on the GPU machine by scripts/gpu/host_bench.py, with scripts/gpu/host_probe.py's
breakdown merged in as `probe`), and its whole-model table from results/training_step.json
(scripts/gpu/training_step.py)."""
from __future__ import annotations

import json
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "results"
MISSING = "*Not measured yet: run `python scripts/gpu/host_bench.py results/host_overhead.json` on a GPU.*\n"
OPS = {"layer_norm": "LayerNorm", "rms_norm": "RMSNorm"}
CALLS = {("layer_norm", "functional"): "F.layer_norm / reimpl.layer_norm",
         ("rms_norm", "functional"): "F.rms_norm / reimpl.rms_norm",
         ("layer_norm", "module"): "nn.LayerNorm", ("rms_norm", "module"): "nn.RMSNorm",
         ("layer_norm", "aten"): "native_layer_norm(_backward)",
         ("rms_norm", "aten"): "_fused_rms_norm(_backward)"}
WAYS = {"functional": "functional", "module": "module", "aten": "aten op"}


def load(path: Path = RESULTS / "host_overhead.json") -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _method(d: dict, part: str) -> str:
    """The record's method for the per-call matrix ("calls") or for the steps ("steps"): host_bench
    writes both in one string, the steps' after "; steps: "."""
    calls, _, steps = d["method"].partition("; steps: ")
    return calls if part == "calls" else f"steps: {steps}"


def _stamp(d: dict) -> str:
    return f"{d['device']}, torch {d['torch']}, CUDA {d['cuda']}, {d['date']}"


def cells(d: dict) -> dict:
    """(op, api, pass) -> {kernels: host us}, and "<kernels> without plans" for ours."""
    out: dict = {}
    for r in d["rows"]:
        c = out.setdefault((r["op"], r["api"], r["pass"]), {})
        c[r["kernels"]] = r["host_us"]
        if "host_us_without_plans" in r:
            c[f"{r['kernels']} without plans"] = r["host_us_without_plans"]
    return out


LIMIT = 1.5  # the host-cost goal: at most this many times torch's
PROVIDERS = {"torch": "torch", "mirror": "mirror", "fast": "fast", "mirror_in_torch": "in torch: mirror",
             "fast_in_torch": "in torch: fast"}


def over_limit(d: dict, kernels: str = "fast") -> list[tuple]:
    """The small-shape cells where `kernels`' call costs the host more than LIMIT times torch's."""
    return [key for key, c in cells(d).items() if c[kernels] / c["torch"] > LIMIT]


def host_over(d: dict | None) -> str:
    """How many cells cost the host more than LIMIT times torch's, through reimpl and in torch (the
    matrix shows them in bold)."""
    if d is None:
        return MISSING
    n = len(cells(d))
    fast, in_torch = over_limit(d), over_limit(d, "fast_in_torch")
    return (f"*{len(fast)} of the {n} cells cost more than {LIMIT} times torch's through `reimpl.fast`, and "
            f"{len(in_torch)} with `reimpl.fast` installed in torch: their ratios are in bold in the tables above "
            f"({_stamp(d)}).*\n")


def host_table(d: dict | None, op: str) -> str:
    """The matrix of one op ("layer_norm" or "rms_norm")."""
    if d is None:
        return MISSING
    M, N = d["shape"]
    rows = [f"*Host time per call in µs at {M} x {N} {d['dtype']}, {OPS[op]}: torch's call beside the same call "
            f"through reimpl on the mirror's kernels and on reimpl.fast's (each with its launch plans), and torch's "
            f"own call with each installed as aten's kernels (reimpl.in_torch); ratios over {LIMIT} in bold. Calls: "
            f"functional is "
            f"{CALLS[(op, 'functional')]}, module is {CALLS[(op, 'module')]}, aten op is {CALLS[(op, 'aten')]}. "
            f"Method: {_method(d, 'calls')}. {_stamp(d)}.*", "",
            "| call: pass | " + " | ".join(PROVIDERS.values()) + " | fast / torch | in torch: fast / torch |",
            "|---|" + "--:|" * (len(PROVIDERS) + 2)]
    for (o, api, pass_), c in cells(d).items():
        if o == op:
            ratios = [c[k] / c["torch"] for k in ("fast", "fast_in_torch")]
            rows.append(f"| {WAYS[api]}: {pass_} | " + " | ".join(f"{c[k]:.1f}" for k in PROVIDERS) + " | "
                        + " | ".join(f"**{r:.2f}**" if r > LIMIT else f"{r:.2f}" for r in ratios) + " |")
    return "\n".join(rows) + "\n"


def plans_saving(d: dict) -> tuple[float, float]:
    """The least and the most a launch plan saves the fast call, as full-path / replayed host time."""
    ratios = [c["fast without plans"] / c["fast"] for c in cells(d).values()]
    return min(ratios), max(ratios)


def host_steps(d: dict | None) -> str:
    """Forward+backward per step on shapes of at least 32 MB, pipelined."""
    if d is None:
        return MISSING
    rows = [f"*Forward+backward through autograd (functional call), µs per step, steps back to back: the "
            f"slower of host and GPU sets the pace. Method: {_method(d, 'steps')}. {_stamp(d)}.*", "",
            "| op, dtype | M×N | torch | mirror | fast | in torch: fast | fast / torch | in torch: fast / torch |",
            "|---|---|--:|--:|--:|--:|--:|--:|"]
    for r in d["steps"]:
        rows.append(f"| {OPS[r['op']]}, {r['dtype']} | {r['M']}×{r['N']} | {r['torch']:.0f} | {r['mirror']:.0f} "
                    f"| {r['fast']:.0f} | {r['fast_in_torch']:.0f} | {r['fast'] / r['torch']:.2f} "
                    f"| {r['fast_in_torch'] / r['torch']:.2f} |")
    return "\n".join(rows) + "\n"


def host_steps_summary(d: dict | None) -> str:
    """Where the fast step beats torch's and where it loses, with the ratios, from the step rows."""
    if d is None:
        return MISSING
    rows = d["steps"]
    ratio = {(r["op"], r["dtype"], r["M"], r["N"]): r["fast"] / r["torch"] for r in rows}
    wins = sorted(v for v in ratio.values() if v < 1)
    losses = sorted(v for v in ratio.values() if v >= 1)
    lost_16 = [k for k, v in ratio.items() if v >= 1 and k[1] != "fp32"]
    text = f"The fast step is faster than torch's on {len(wins)} of the {len(rows)} rows"
    if wins:
        text += f", taking {wins[0]:.2f} to {wins[-1]:.2f} of its time"
    if losses:
        text += (f", and slower on {len(losses)} ({losses[0]:.2f} to {losses[-1]:.2f} times torch's), "
                 f"{len(lost_16)} of them in 16-bit")
    return f"{text} ({_stamp(d)}).\n"


def load_split(path: Path = RESULTS / "step_split.json") -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def step_split(d: dict | None) -> str:
    """Host, wall and GPU kernel time per step for torch's and the fast step (scripts/gpu/step_split.py)."""
    if d is None:
        return "*Not measured yet: run `python scripts/gpu/step_split.py results/step_split.json` on a GPU.*\n"
    by = {(r["op"], r["dtype"], r["M"], r["N"], r["kernels"]): r for r in d["rows"]}
    rows = [f"*µs per forward+backward step, each column's time over the round divided by its steps: host until "
            f"the last call returns, GPU kernels from the profiler, wall until the GPU has finished (the step's time). "
            f"Method: {d['method']}. {_stamp(d)}.*", "",
            "| op, dtype | M×N | torch: host | torch: GPU kernels | torch: wall | fast: host | fast: GPU kernels "
            "| fast: wall |", "|---|---|--:|--:|--:|--:|--:|--:|"]
    for (op, dt, M, N, k), r in by.items():
        if k == "torch":
            f = by[(op, dt, M, N, "fast")]
            rows.append(f"| {OPS[op]}, {dt} | {M}×{N} | {r['host_us']:.0f} | {r['gpu_kernels_us']:.0f} "
                        f"| {r['wall_us']:.0f} | {f['host_us']:.0f} | {f['gpu_kernels_us']:.0f} | {f['wall_us']:.0f} |")
    return "\n".join(rows) + "\n"


def split_facts(d: dict) -> dict:
    """What the split shows: our kernels' GPU time over torch's (least, most), and whether our host
    time exceeds our GPU time on every row (the step waits on the host)."""
    by = {(r["op"], r["dtype"], r["M"], r["N"], r["kernels"]): r for r in d["rows"]}
    gpu = [by[(*k[:4], "fast")]["gpu_kernels_us"] / r["gpu_kernels_us"] for k, r in by.items() if k[4] == "torch"]
    host_bound = all(r["host_us"] > r["gpu_kernels_us"] for k, r in by.items() if k[4] == "fast")
    return {"gpu_ratio": (min(gpu), max(gpu)), "fast_host_bound": host_bound}


PARTS = (  # (probe section, key, what the row is)
    ("floor", "python Function, forward+backward", "an autograd Function that launches nothing: forward and "
                                                    "torch.autograd.grad"),
    ("floor", "x * 2, forward+backward", "`x * 2` and its gradient: torch's own C++ node"),
    ("torch", "forward+backward", "torch's LayerNorm, forward and backward"),
    ("torch", "forward, grad", "torch's LayerNorm forward, recording the graph"),
    ("floor", "torch.empty(8, 1024)", "one `torch.empty` from Python"),
    ("floor", "torch.empty_like(x)", "one `torch.empty_like` from Python"),
    ("floor", "fast: kernels call, out only", "our forward kernel call, plan replayed, one output"),
    ("floor", "fast: kernels call, three outputs", "the same with mean and rstd returned (autograd keeps them)"),
    ("floor", "fast: backward kernels call", "our backward kernel call, on the calling thread"),
    ("fast", "inside api backward call", "the same call made by autograd, in its own thread"),
    ("fast", "forward, grad", "our forward through the autograd Function"),
    ("fast", "forward+backward", "our forward and backward"),
    ("fast_in_torch", "inside api backward call", "in torch: our backward kernel call made by torch's node, in "
                                                  "autograd's thread"),
    ("fast_in_torch", "forward, grad", "in torch: torch's forward, recording its graph, on our kernels"),
    ("fast_in_torch", "forward+backward", "in torch: torch's forward and backward on our kernels"),
)


def host_parts(d: dict | None) -> str:
    """Where a forward+backward's microseconds go: the floors every Python call pays, and ours."""
    if d is None or "probe" not in d:
        return MISSING
    p = d["probe"]
    rows = [f"*The pieces of one LayerNorm forward+backward at {d['shape'][0]} x {d['shape'][1]} fp32, µs of host "
            f"time. Method: {p['method']}. {_stamp(d)}.*", "", "| what | µs |", "|---|--:|"]
    rows += [f"| {what} | {p[section][key]:.1f} |" for section, key, what in PARTS]
    return "\n".join(rows) + "\n"


# cProfile rows: ncalls tottime percall cumtime percall filename:lineno(function)
_ROW = re.compile(r"^\s*(\d+)(?:/\d+)?\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+(.*)$")
# the stages of a call, by where the time is spent (first match wins)
STAGES = (
    ("launch (CuPy's driver call and our launcher)", ("launchKernel", "runtime.py", "<launch plan")),
    ("allocation of the outputs (torch.empty, torch.empty_like)", ("torch.empty",)),
    ("tensor queries (data_ptr, device, contiguity)", ("data_ptr", "get_device", "is_contiguous", "_cuda_getDevice")),
    ("replaying the recorded launch plan", ("replay.py",)),
    ("the public API and the plan lookup", ("api.py", "functional.py")),
)


def _where(location: str) -> str:
    """A profile row's function without the machine's path: reimpl/api.py:80(_plan_call) stays
    'reimpl/api.py (_plan_call)', torch's files likewise from torch/ on; built-ins keep their name."""
    m = re.search(r"((?:reimpl|torch)/[\w/]+\.py):\d+\((\w+)\)", location)
    if m:  # a path with underscores in code quotes, so that Markdown keeps them
        path = f"`{m.group(1)}`" if "_" in m.group(1) else m.group(1)
        return f"{path} (`{m.group(2)}`)"
    m = re.search(r"<(launch plan[^>]*)>:\d+\((\w+)\)", location)
    if m:
        return f"`{m.group(2)}` (generated: {m.group(1).replace('of 1 launches', 'of 1 launch')})"
    name = location.strip("{}").replace("built-in method ", "")
    m = re.match(r"method '(\w+)' of '([\w.]+)' objects", name)
    return f"{m.group(2).replace('torch._C.TensorBase', 'Tensor')}.{m.group(1)}" if m else name


# the autograd path's profile has torch's own share first
AUTOGRAD_STAGES = (("torch's autograd: the engine, its thread hand-off, torch.autograd.grad, Function.apply",
                    ("_EngineBase", "torch/autograd/", "symbolic_shapes", "overrides.py", "isinstance",
                     "built-in method apply")),) + STAGES[:-1] + (
    ("our Python route: the public API, the plan key, the autograd signature", ("api.py", "functional.py",
                                                                                "autograd.py")),)


def host_profile(d: dict | None, which: str = "") -> str:
    """A cProfile as a table by stage: own time per forward+backward in each, and the functions it
    holds (machine paths dropped). which="": the fast forward and backward kernel calls (no
    autograd); "autograd": a forward+backward through autograd (the probe's, all threads)."""
    if d is None or (which and "probe" not in d):
        return MISSING
    if which:
        text, stages_of = d["probe"]["cprofile fast backward in autograd's thread"], AUTOGRAD_STAGES
        unit, what = "step", "forward+backward steps through autograd (reimpl.layer_norm, torch.autograd.grad)"
    else:
        text, stages_of = d["cprofile_fast_forward_backward"], STAGES
        unit, what = "pair", "pairs of kernel calls"
    rows = [m.groups() for line in text.splitlines() if (m := _ROW.match(line))]
    key = "functional.py" if which else "_native_layer_norm"
    calls = max(int(n) for n, _, _, loc in rows if key in loc and ("api.py" in loc or which))
    stages: dict[str, list] = {name: [] for name, _ in stages_of}
    stages["other"] = []
    for n, tottime, _, loc in rows:
        stage = next((name for name, keys in stages_of if any(k in loc for k in keys)), "other")
        stages[stage].append((float(tottime), _where(loc)))
    M, N = d["shape"]
    lead = ("forward+backward step through autograd" if which
            else "forward+backward pair of `reimpl.fast` kernel calls (no autograd)")
    out = [f"*Own time in µs per {lead}, by stage, with the functions each holds. Method: cProfile of {calls} "
           f"{what} at {M} x {N} {d['dtype']}, its {len(rows)} costliest functions, own time only (the profiler "
           f"inflates every entry). {_stamp(d)}.*\n",
           f"| stage | µs per {unit} | functions |", "|---|---:|---|"]
    for name, items in stages.items():
        if items:
            us = sum(t for t, _ in items) * 1e6 / calls
            out.append(f"| {name} | {us:.1f} | {', '.join(w for _, w in sorted(items, reverse=True))} |")
    return "\n".join(out) + "\n"


SHORT_MODEL = {"GPT-2": "GPT-2 small", "Llama": "Llama-style"}


def _short(model: str) -> str:
    return next((v for k, v in SHORT_MODEL.items() if model.startswith(k)), model)


def training_step(path: Path = RESULTS / "training_step.json") -> str:
    """A real model's training step, batch-1 inference and compiled step: torch's norms against
    reimpl.fast's, through reimpl's modules and installed in torch."""
    if not path.exists():
        return "*Not measured yet: run `python scripts/gpu/training_step.py results/training_step.json` on a GPU.*\n"
    d = json.loads(path.read_text())
    models = "; ".join(f"{_short(r['model'])}: {r['model']}, {r['dtype']}, batch {r['batch'][0]} x {r['batch'][1]}"
                       for r in d["rows"])

    def yes(flag: bool) -> str:
        return "yes" if flag else "no"
    rows = [f"*Training step in ms: torch's norms; reimpl.fast's through reimpl.nn modules (fast); torch's modules "
            f"with reimpl.fast installed as aten's kernels (in torch); a second copy with torch's norms (the control). "
            f"'Equal' says whether every parameter is bit-identical to torch's run after the steps shown. Models: "
            f"{models}. Method: {d['method']}. {_stamp(d)}.*", "",
            "| model | steps | equal: fast, in torch | torch | fast | in torch | control | fast / torch "
            "| in torch / torch |", "|---|--:|---|--:|--:|--:|--:|--:|--:|"]
    for r in d["rows"]:
        t = r["torch_norms_ms"]
        rows.append(f"| {_short(r['model'])} | {r['steps']} | {yes(r['params_bit_identical'])}, "
                    f"{yes(r['in_torch_params_bit_identical'])} | {t:.2f} | {r['fast_norms_ms']:.2f} "
                    f"| {r['in_torch_norms_ms']:.2f} | {r['control_ms']:.2f} | {r['fast_norms_ms'] / t:.3f} "
                    f"| {r['in_torch_norms_ms'] / t:.3f} |")
    rows += ["", f"*Inference at batch 1 x 128 tokens in ms, the same models: torch's, fast and in-torch copies. "
             f"Method: {d['method']}. "
             f"{_stamp(d)}.*", "",
             "| model | torch | fast | in torch | fast / torch | in torch / torch |", "|---|--:|--:|--:|--:|--:|"]
    for r in d["rows"]:
        t = r["inference_batch1_torch_ms"]
        rows.append(f"| {_short(r['model'])} | {t:.2f} | {r['inference_batch1_fast_ms']:.2f} "
                    f"| {r['inference_batch1_in_torch_ms']:.2f} | {r['inference_batch1_fast_ms'] / t:.3f} "
                    f"| {r['inference_batch1_in_torch_ms'] / t:.3f} |")
    hosted = [r for r in d["rows"] if "norm_forward_host_us_fast" in r]
    if hosted:
        rows += ["", "*Host time of one norm module's forward in us, with the input requiring grad: inside "
                 "the training step (forward hooks' clock around each norm call, median over every norm of 5 "
                 "steps) and in a loop (one of those modules on one of those inputs, 200 calls back to back, "
                 f"median of 5 rounds), torch's modules and ours (fast). Method: {d['method']}. {_stamp(d)}.*", "",
                 "| model | torch, in the step | torch, in a loop | fast, in the step | fast, in a loop "
                 "| fast / torch, in the step | fast / torch, in a loop |", "|---|--:|--:|--:|--:|--:|--:|"]
        for r in hosted:
            t, f = r["norm_forward_host_us_torch"], r["norm_forward_host_us_fast"]
            rows.append(f"| {_short(r['model'])} | {t['in_step']:.1f} | {t['loop']:.1f} | {f['in_step']:.1f} "
                        f"| {f['loop']:.1f} | {f['in_step'] / t['in_step']:.2f} | {f['loop'] / t['loop']:.2f} |")
    return "\n".join(rows) + "\n"


def step_ratios(r: dict) -> dict:
    """Each copy's training step over torch's in one record row."""
    t = r["torch_norms_ms"]
    return {"fast": r["fast_norms_ms"] / t, "in torch": r["in_torch_norms_ms"] / t, "control": r["control_ms"] / t}


def training_step_repeat(paths=(RESULTS / "training_step.json", RESULTS / "training_step_repeat.json")) -> str:
    """The step ratios of the record beside a repeat of the same script on another machine of the
    same kind: how far a whole step's time moves between machines, against what the norms change."""
    runs = [json.loads(p.read_text()) for p in paths if p.exists()]
    if len(runs) < 2:
        return "*Not measured yet: a repeat of `scripts/gpu/training_step.py` is stored as results/training_step_repeat.json.*\n"
    rows = ["*Training step over torch's, each copy, in the record above (run 1) and in a repeat of the same "
            "script and code on another machine of the same kind (run 2); the control is torch's norms again. "
            "Method: " + runs[0]["method"] + ". " + "; ".join(f"run {i}: {_stamp(d)}" for i, d in enumerate(runs, 1))
            + ".*", "", "| model | run | torch (ms) | fast / torch | in torch / torch | control / torch "
            "| torch's batch-1 inference (ms) |", "|---|--:|--:|--:|--:|--:|--:|"]
    for k in range(len(runs[0]["rows"])):
        for i, d in enumerate(runs, 1):
            r = d["rows"][k]
            q = step_ratios(r)
            rows.append(f"| {_short(r['model'])} | {i} | {r['torch_norms_ms']:.2f} | {q['fast']:.3f} "
                        f"| {q['in torch']:.3f} | {q['control']:.3f} | {r['inference_batch1_torch_ms']:.2f} |")
    return "\n".join(rows) + "\n"


FLOOR = RESULTS / "host_floor.json"  # scripts/gpu/host_floor.py's record


def host_floor(d: dict | None) -> str:
    """torch's call, ours and the floors of a Python autograd Function (scripts/gpu/host_floor.py)."""
    if d is None:
        return "*Not measured yet: run `python scripts/gpu/host_floor.py results/host_floor.json` on a GPU.*\n"
    small = [r for r in d["rows"] if "forward_grad_us" in r]
    out = [f"*Host us per call at {small[0]['M']} x {small[0]['N']} {small[0]['dtype']}, functional calls: torch's; "
           "reimpl.fast's; the forward's launch-plan replay alone on fixed addresses (floor: replay); a Python "
           "autograd Function that runs that replay and keeps what ours keeps (floor: Function); one that keeps "
           f"the same and launches nothing (floor: empty Function). Method: {d['method']}. {_stamp(d)}.*", "",
           "| op | pass | torch | fast | floor: replay | floor: Function | floor: empty Function | fast / torch "
           "| floor / torch |", "|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for r in small:
        for pass_, key, floor in (("forward", "forward_us", "floor: replay"),
                                  ("forward, grad", "forward_grad_us", "floor: Function")):
            c = r[key]
            out.append(f"| {OPS[r['op']]} | {pass_} | {c['torch']:.2f} | {c['fast']:.2f} "
                       f"| {c.get('floor: replay', float('nan')):.2f} | {c.get('floor: Function', float('nan')):.2f} "
                       f"| {c.get('floor: empty Function', float('nan')):.2f} | {c['fast'] / c['torch']:.2f} "
                       f"| {c[floor] / c['torch']:.2f} |".replace("| nan ", "| – "))
    out += ["", "*A forward+backward step through autograd (torch.autograd.grad of the input and weights), us per "
            "step with the GPU waited for inside the clock: torch's, reimpl.fast's, and the floor Function, whose "
            f"backward replays the backward plan on addresses read from the tensors. Method: {d['method']}. "
            f"{_stamp(d)}.*", "", "| op | dtype | M x N | torch | fast | floor: Function | fast / torch "
            "| floor / torch |", "|---|---|---|--:|--:|--:|--:|--:|"]
    for r in d["rows"]:
        s = r["step_us"]
        out.append(f"| {OPS[r['op']]} | {r['dtype']} | {r['M']} x {r['N']} | {s['torch']:.1f} | {s['fast']:.1f} "
                   f"| {s['floor: Function']:.1f} | {s['fast'] / s['torch']:.2f} | {s['floor: Function'] / s['torch']:.2f} |")
    return "\n".join(out) + "\n"


def compiled_step(path: Path = RESULTS / "training_step.json") -> str:
    """The same training step under torch.compile: Inductor's own norms (other bits) against ours."""
    if not path.exists():
        return "*Not measured yet: run `python scripts/gpu/training_step.py results/training_step.json` on a GPU.*\n"
    d = json.loads(path.read_text())
    rows = [f"*Training step in ms under torch.compile (default mode): the torch-norm model, whose norms Inductor "
            f"generates itself (other bits), against the reimpl.fast model (reimpl.nn modules), whose norms are opaque "
            f"custom ops with "
            f"torch's bits; eager torch for scale. Method: {d['method']}. {_stamp(d)}.*", "",
            "| model | eager, torch's norms | compiled, Inductor's norms | compiled, ours | ours / Inductor's |",
            "|---|--:|--:|--:|--:|"]
    for r in d["rows"]:
        ind, ours = r["compiled_torch_norms_ms"], r["compiled_fast_norms_ms"]
        rows.append(f"| {_short(r['model'])} | {r['torch_norms_ms']:.2f} | {ind:.2f} | {ours:.2f} | {ours / ind:.3f} |")
    return "\n".join(rows) + "\n"


def compiled_profile(path: Path = RESULTS / "compiled_norms_profile.json") -> str:
    """GPU time and launches per compiled training step by kernel family, Inductor's norms against
    ours (scripts/gpu/compiled_norms_profile.py)."""
    if not path.exists():
        return ("*Not measured yet: run `python scripts/gpu/compiled_norms_profile.py "
                "results/compiled_norms_profile.json` on a GPU.*\n")
    d = json.loads(path.read_text())
    fams = sorted({f for r in d["rows"] for f in r["gpu_ms_by_family"]})
    shown = {"norm kernels (ours or torch's)": "kernels named for a norm",
             "Inductor's Triton kernels": "Inductor's other Triton kernels"}
    rows = [f"*One compiled training step, GPU time in ms and (launches) by kernel family: kernels named for a norm "
            f"(ours, or Inductor's fused norm kernels), Inductor's other Triton kernels, matrix multiplies, and the "
            f"rest. Method: {d['method']}. {_stamp(d)}.*", "",
            "| model, norms | graphs (breaks) | " + " | ".join(shown.get(f, f) for f in fams) + " | all |",
            "|---|--:|" + "--:|" * (len(fams) + 1)]
    names = {"gpt2": "GPT-2 small", "llama": "Llama-style"}
    for r in d["rows"]:
        who = "Inductor's" if r["norms"] == "torch" else "ours"
        cells = [f"{r['gpu_ms_by_family'].get(f, 0):.2f} ({r['launches_by_family'].get(f, 0)})" for f in fams]
        rows.append(f"| {names[r['model']]}, {who} | {r['graphs']} ({r['graph_breaks']}) | " + " | ".join(cells)
                    + f" | {r['gpu_ms']:.2f} ({sum(r['launches_by_family'].values())}) |")
    return "\n".join(rows) + "\n"


def cpp_node(path: Path = RESULTS / "cpp_node_probe.json") -> str:
    """A C++ autograd node against a Python one on a CPU machine (scripts/cpp_node_probe.py)."""
    if not path.exists():
        return "*Not measured yet: run `python scripts/cpp_node_probe.py results/cpp_node_probe.json`.*\n"
    d = json.loads(path.read_text())
    out = [f"*Host µs per call on a CPU machine, CPU tensors at {d['shape'][0]} x {d['shape'][1]} fp32, one thread: "
           "a C++ autograd node doing what our replayed call does (key, lookup, three allocations, a launch "
           "through a function pointer that does nothing), a Python one doing less (three allocations, no "
           "key), and torch's F.layer_norm, which also computes on the CPU (for scale). Method: "
           f"{d['method']}. {d['cpu']}, torch {d['torch']}, {d['date']}, no GPU.*", "",
           "| node | forward, grad | forward+backward |", "|---|--:|--:|"]
    for r in d["rows"]:
        out.append(f"| {r['node']} | {r['forward_grad_us']:.2f} | {r['forward_backward_us']:.2f} |")
    return "\n".join(out) + "\n"


NATIVE = RESULTS / "host_overhead_native.json"  # scripts/gpu/host_bench.py with the C++ node loaded
TRAINING_NATIVE = RESULTS / "training_step_native.json"  # scripts/gpu/training_step.py OUT gpt2, the same


def native_ratios(python: dict, native: dict) -> dict:
    """(op, api, pass) -> (fast / torch with the Python node, fast / torch with the C++ node), each
    ratio within its own record's run."""
    a, b = cells(python), cells(native)
    return {k: (a[k]["fast"] / a[k]["torch"], b[k]["fast"] / b[k]["torch"]) for k in a if k in b}


def host_native(python: dict | None, native: dict | None) -> str:
    """The host matrix's fast / torch ratios before and after the C++ node, side by side."""
    if python is None or native is None:
        return ("*Not measured yet: run `python scripts/gpu/host_bench.py results/host_overhead_native.json` "
                "on a GPU with a C++ compiler and ninja.*\n")
    out = [f"*`reimpl.fast`'s host time over torch's, per call (torch's own time is in each record). Python node: "
           f"`results/host_overhead.json`, {_stamp(python)}. C++ node: `results/host_overhead_native.json`, "
           f"{_stamp(native)}. Each ratio is taken within its own run; a bold ratio is over {LIMIT}.*", "",
           "| op | API | pass | Python node | C++ node |", "|---|---|---|--:|--:|"]
    for (op, api, pass_), (before, after) in native_ratios(python, native).items():
        cell = [f"**{r:.2f}**" if r > LIMIT else f"{r:.2f}" for r in (before, after)]
        out.append(f"| {OPS[op]} | {api} | {pass_} | {cell[0]} | {cell[1]} |")
    return "\n".join(out) + "\n"


def native_steps(python: dict, native: dict) -> dict:
    """(op, dtype, M, N) -> (fast / torch with the Python node, with the C++ node), per step of the
    steps table, each within its own run."""
    a = {(r["op"], r["dtype"], r["M"], r["N"]): r["fast"] / r["torch"] for r in python["steps"]}
    b = {(r["op"], r["dtype"], r["M"], r["N"]): r["fast"] / r["torch"] for r in native["steps"]}
    return {k: (a[k], b[k]) for k in a if k in b}


def host_native_steps(python: dict | None, native: dict | None) -> str:
    """The steps table's fast / torch before and after the C++ node; where the record keeps the steps
    of an earlier run of the same code (`steps_earlier_run`), those too, so the spread between runs shows."""
    if python is None or native is None:
        return "*Not measured yet: see the table above.*\n"
    earlier = native.get("steps_earlier_run")
    runs = native_steps(python, native)
    extra = native_steps(python, earlier) if earlier else {}
    head = ["Python node", "C++ node"] + ([f"C++ node, earlier run ({earlier['date']})"] if earlier else [])
    out = [f"*Forward+backward steps through autograd on 32 to 192 MiB, fast / torch per step, each within its own "
           f"run ({_method(native, 'steps')}); a bold ratio is a step slower than torch's"
           + (f". Last column, {earlier['what']}" if earlier else "") + ".*", "",
           "| op | dtype | M×N | " + " | ".join(head) + " |", "|---|---|---|" + "--:|" * len(head)]
    for key, ratios in runs.items():
        op, dtype, M, N = key
        values = [*ratios, *([extra[key][1]] if earlier else [])]
        cell = [f"**{r:.3f}**" if r > 1 else f"{r:.3f}" for r in values]  # 3 places: a step 0.2% slower shows
        out.append(f"| {OPS[op]} | {dtype} | {M}×{N} | " + " | ".join(cell) + " |")
    return "\n".join(out) + "\n"
