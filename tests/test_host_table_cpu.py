"""CPU-only: the training guide's host-cost tables are drawn from results/host_overhead.json (a
fixture here, not a committed result), say "not measured yet" without it, and the sentences the
guide states about the committed record hold for it."""
import json
import re
from pathlib import Path

from reimpl.docsite import host_table

ROOT = Path(__file__).resolve().parents[1]
STAMP = {"device": "GPU", "torch": "2.11.0", "cuda": "13.0", "date": "2026-01-01", "shape": [8, 1024],
         "dtype": "float32", "method": "m"}


def _row(op, api, pass_, kernels, us, full=None):
    r = {"op": op, "api": api, "pass": pass_, "kernels": kernels, "host_us": us}
    return r if full is None else {**r, "host_us_without_plans": full}


FIXTURE = {
    **STAMP,
    "rows": [_row("layer_norm", "functional", "forward", "torch", 10.0),
             _row("layer_norm", "functional", "forward", "mirror", 14.0, 40.0),
             _row("layer_norm", "functional", "forward", "fast", 15.0, 50.0),
             _row("layer_norm", "functional", "forward", "mirror_in_torch", 13.0),
             _row("layer_norm", "functional", "forward", "fast_in_torch", 12.0),
             _row("rms_norm", "module", "backward", "torch", 80.0),
             _row("rms_norm", "module", "backward", "mirror", 100.0, 150.0),
             _row("rms_norm", "module", "backward", "fast", 120.0, 160.0),
             _row("rms_norm", "module", "backward", "mirror_in_torch", 90.0),
             _row("rms_norm", "module", "backward", "fast_in_torch", 100.0)],
    "steps": [{"op": "layer_norm", "dtype": "bf16", "M": 8192, "N": 4096, "torch": 100.0, "mirror": 150.0,
               "fast": 125.0, "mirror_in_torch": 140.0, "fast_in_torch": 130.0}],
    "probe": {"method": "pm", "floor": {k: 1.0 for s, k, _ in host_table.PARTS if s == "floor"},
              "torch": {"forward+backward": 90.0, "forward, grad": 12.0},
              "fast": {"inside api backward call": 40.0, "forward, grad": 30.0, "forward+backward": 180.0},
              "fast_in_torch": {"inside api backward call": 45.0, "forward, grad": 28.0, "forward+backward": 170.0}},
    "cprofile_fast_forward_backward": "\n".join([
        "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)",
        "     2000    0.020    0.000    0.100    0.000 /home/someone/repo/reimpl/api.py:80(_plan_call)",
        "     1000    0.010    0.000    0.010    0.000 {built-in method torch.empty_like}",
        "     5000    0.005    0.000    0.005    0.000 {method 'data_ptr' of 'torch._C.TensorBase' objects}",
        "     1000    0.004    0.000    0.050    0.000 <launch plan of 2 launches>:1(replay)",
        "     1000    0.003    0.000    0.120    0.000 /home/someone/repo/reimpl/api.py:147(_native_layer_norm)"]),
}


def test_matrix_rows_and_ratios():
    ln, rms = host_table.host_table(FIXTURE, "layer_norm"), host_table.host_table(FIXTURE, "rms_norm")
    assert "| functional: forward | 10.0 | 14.0 | 15.0 | 13.0 | 12.0 | 1.50 | 1.20 |" in ln and "| module" not in ln
    worse = host_table.host_table({**FIXTURE, "rows": [dict(r, host_us=r["host_us"] * 2) if r["kernels"] == "fast"
                                                       else r for r in FIXTURE["rows"]]}, "layer_norm")
    assert "| functional: forward | 10.0 | 14.0 | 30.0 | 13.0 | 12.0 | **3.00** | 1.20 |" in worse
    assert "| module: backward | 80.0 | 100.0 | 120.0 | 90.0 | 100.0 | 1.50 | 1.25 |" in rms and "| functional" not in rms
    assert "| call: pass | torch | mirror | fast | in torch: mirror | in torch: fast |" in ln


def test_steps_and_parts():
    assert "| LayerNorm, bf16 | 8192×4096 | 100 | 150 | 125 | 130 | 1.25 | 1.30 |" in host_table.host_steps(FIXTURE)
    parts = host_table.host_parts(FIXTURE)
    assert "| torch's LayerNorm, forward and backward | 90.0 |" in parts
    assert "| the same call made by autograd, in its own thread | 40.0 |" in parts
    assert "| in torch: torch's forward and backward on our kernels | 170.0 |" in parts


def test_missing_results_say_so():
    assert "Not measured yet" in host_table.host_table(None, "layer_norm")
    for draw in (host_table.host_profile, host_table.host_parts, host_table.host_steps, host_table.host_over):
        assert "Not measured yet" in draw(None)


def test_profile_is_a_table_by_stage_without_machine_paths():
    text = host_table.host_profile(FIXTURE)
    assert "cProfile of 1000 pairs" in text and "/home/" not in text
    assert ("| the public API and the plan lookup | 23.0 | reimpl/api.py (`_plan_call`), reimpl/api.py "
            "(`_native_layer_norm`) |") in text
    assert "| allocation of the outputs (torch.empty, torch.empty_like) | 10.0 | torch.empty_like |" in text
    assert "`replay` (generated: launch plan of 2 launches)" in text


def _number_after(text: str, phrase: str) -> float:
    m = re.search(re.escape(phrase) + r"\D*([\d.]+)", text)
    assert m, phrase
    return float(m.group(1))


def test_the_guides_claims_hold_for_the_committed_record():
    """training.md says: the fast call costs the host about what the mirror's costs, and running the
    host mirror in full 1.8 to 4.7 times as much; what is over the limit is the forward that records
    a graph; installed in torch, every call without a graph and every backward costs more than
    through reimpl, a forward that records a graph a few percent less; an autograd Function
    that launches nothing costs most of torch's whole LayerNorm step; our kernels take 0.40 to 0.77
    of torch's GPU time per step and our host is the slower side on every row; the fast step is the
    faster one on every 65536 x 768 LayerNorm row and the slower one only where torch's GPU time is
    short; a row the split loses by a few microseconds is a win in the steps table."""
    d = host_table.load()
    page = (ROOT / "docs/guide/training.md").read_text()
    flat = " ".join(page.split())
    cells = host_table.cells(d)
    assert all(0.8 < c["fast"] / c["mirror"] < 1.2 for c in cells.values())
    lo, hi = host_table.plans_saving(d)
    assert f"makes the fast call {lo:.1f} to {hi:.1f} times" in page
    full = [c["mirror without plans"] / c["torch"] for c in cells.values()]
    assert f"costs the host {min(full):.1f} to {max(full):.1f} times what torch's C++ costs per\ncall" in page
    assert {key[2] for key in host_table.over_limit(d)} <= {"forward, grad"}
    for key, c in cells.items():
        if key[2] == "forward, grad":
            assert 0.85 < c["fast_in_torch"] / c["fast"] < 1.0, key
        if key[2] in ("forward", "backward"):
            assert c["fast_in_torch"] > c["fast"], key
    p = d["probe"]
    assert p["floor"]["python Function, forward+backward"] > 0.5 * p["torch"]["forward+backward"]
    facts = host_table.split_facts(host_table.load_split())
    lo, hi = facts["gpu_ratio"]
    assert f"Our kernels take {lo:.2f} to {hi:.2f} of torch's GPU time on every row" in flat
    assert facts["fast_host_bound"]
    steps = {(r["op"], r["dtype"], r["M"], r["N"]): r for r in d["steps"]}
    assert all(r["fast"] < r["torch"] for k, r in steps.items() if k[0] == "layer_norm" and k[2:] == (65536, 768))
    split = {(r["op"], r["dtype"], r["M"], r["N"], r["kernels"]): r for r in host_table.load_split()["rows"]}
    rows = {k[:4] for k in split}
    wins = {k[:4] for k, r in split.items() if k[4] == "fast" and r["wall_us"] < split[k[:4] + ("torch",)]["wall_us"]}
    losses = rows - wins
    assert f"Where torch's kernels take longer than our host does ({len(wins)} of the {len(rows)} rows)" in flat
    assert losses == {("layer_norm", "bf16", 16384, 1024), ("layer_norm", "fp32", 16384, 1024),
                      ("rms_norm", "bf16", 16384, 1024)}
    assert "(LayerNorm 16384 × 1024 in bf16 and fp32, RMSNorm bf16 16384 × 1024)" in flat
    moved = ("layer_norm", "bf16", 16384, 1024)
    assert moved in losses and steps[moved]["fast"] < steps[moved]["torch"]
    assert 0 < split[moved + ("fast",)]["wall_us"] - split[moved + ("torch",)]["wall_us"] < 10
    assert "bf16 LayerNorm 16384 × 1024 is a win in the steps table above and a loss here, by a few microseconds" in flat
    for (op, dt, M, N, k), r in split.items():
        if k == "torch":  # slower where torch's kernels take less than our host, faster where more
            ours = split[(op, dt, M, N, "fast")]
            assert (ours["wall_us"] > r["wall_us"]) == (r["gpu_kernels_us"] < ours["host_us"]), (op, dt, M, N)


def test_the_autograd_profile_says_what_the_guide_says():
    """training.md: through autograd, allocating and launching take the most of what is not torch's
    autograd, and our own Python route less than either."""
    page = (ROOT / "docs/guide/training.md").read_text()
    assert "allocating and launching take the\nmost, and our own Python route" in page
    table = host_table.host_profile(host_table.load(), "autograd")
    us = {line.split("|")[1].strip().split(" ")[0]: float(line.split("|")[2])
          for line in table.splitlines() if line.startswith("| ") and not line.startswith("| stage")}
    rest = {k: v for k, v in us.items() if k != "torch's"}
    assert sorted(rest, key=rest.get)[-2:] in (["launch", "allocation"], ["allocation", "launch"])
    assert rest["our"] < min(rest["launch"], rest["allocation"])


def test_the_readme_quotes_the_committed_host_records():
    """README's host-cost figures are the records' (ratios as the README rounds them)."""
    d = host_table.load()
    readme = (ROOT / "README.md").read_text()
    cells = host_table.cells(d).values()

    def span(values) -> str:
        return f"{min(values):.2f}-{max(values):.2f}×"
    assert f"mirror costs ({span([c['fast'] / c['mirror'] for c in cells])})" in readme
    grad = [c for k, c in host_table.cells(d).items() if k[2] == "forward, grad"]
    rest = [c for k, c in host_table.cells(d).items() if k[2] != "forward, grad"]
    assert f"{span([c['fast'] / c['torch'] for c in rest])} through reimpl" in readme
    assert f"records a graph ({span([c['fast'] / c['torch'] for c in grad])})" in readme
    assert f"{span([c['fast_in_torch'] / c['torch'] for c in cells])} installed in torch" in readme
    steps = d["steps"]
    wins = [r for r in steps if r["fast"] < r["torch"]]
    assert f"faster one on {len(wins)} of {len(steps)} rows" in readme
    losses = {(r["op"], r["dtype"], r["M"], r["N"]) for r in steps if r not in wins}
    assert losses == {("layer_norm", "fp32", 16384, 1024), ("rms_norm", "fp16", 8192, 4096)} | {
        ("rms_norm", dt, 16384, 1024) for dt in ("fp32", "bf16", "fp16")}
    assert ("(fp32 LayerNorm 16384 × 1024, RMSNorm 16384 × 1024 in every dtype, fp16 RMSNorm 8192 × 4096)"
            in readme.replace("\n  ", " "))
    assert all(r["N"] >= 4096 or r["M"] == 65536 for r in wins if r["dtype"] == "fp32")
    assert all(r in wins for r in steps if r["dtype"] == "fp32" and r["N"] >= 4096)
    lo, hi = host_table.split_facts(host_table.load_split())["gpu_ratio"]
    assert f"our kernels take {lo:.2f}-{hi:.2f} of torch's GPU" in readme.replace("\n  ", " ")


def test_over_limit_counts_the_cells_in_bold():
    assert host_table.host_over(FIXTURE).startswith("*0 of the 2 cells cost more than 1.5")  # 1.50 is not over
    worse = {**FIXTURE, "rows": [dict(r, host_us=r["host_us"] * (2 if r["kernels"] == "fast" else 1))
                                 for r in FIXTURE["rows"]]}
    assert host_table.host_over(worse).startswith(
        "*2 of the 2 cells cost more than 1.5 times torch's through `reimpl.fast`, and 0 with")


def _pct(x: float) -> str:
    return f"{abs(x - 1) * 100:.1f}"


def test_the_whole_model_record_says_what_the_guide_says():
    """The record holds both models with every parameter bit-identical to torch's run both ways in
    (and torch's own runs repeating); the guide's step figures (faster both ways in the run shown,
    the control's spread, the repeat's GPT-2 row), its batch-1 inference order, its hooks' ratios,
    and the route advice's span are the records' own; the compiled step with our norms is slower
    than with Inductor's."""
    import json
    from reimpl.docsite.host_table import step_ratios
    runs = [json.loads((ROOT / f"results/{n}.json").read_text()) for n in ("training_step", "training_step_repeat")]
    for d in runs:
        assert len(d["rows"]) == 2
        for r in d["rows"]:
            assert r["params_bit_identical"] and r["in_torch_params_bit_identical"] and r["torch_runs_bit_identical"]
            assert r["compiled_fast_norms_ms"] > r["compiled_torch_norms_ms"]
    d = runs[0]
    for r in d["rows"]:
        assert r["inference_batch1_in_torch_ms"] > r["inference_batch1_fast_ms"] > r["inference_batch1_torch_ms"]
    page = (ROOT / "docs/guide/training.md").read_text()
    flat = " ".join(page.split())
    shown = [step_ratios(r) for r in d["rows"]]
    ours = [q[k] for q in shown for k in ("fast", "in torch")]
    assert max(ours) < 1
    assert (f"the step with our norms is {_pct(max(ours))} to {_pct(min(ours))}% faster than torch's for both models, "
            "either way in") in flat
    assert max(abs(q["control"] - 1) for q in shown) <= 0.002
    assert "torch's own second copy (the control) is within 0.2% of torch's" in flat
    gpt2 = step_ratios(runs[1]["rows"][0])
    assert runs[1]["rows"][0]["model"].startswith("GPT-2") and gpt2["fast"] > 1 and gpt2["in torch"] > 1
    assert (f"There GPT-2's step with our norms was {_pct(gpt2['fast'])}% slower than torch's ({_pct(gpt2['in torch'])}% "
            "installed in torch), while the control again stayed within 0.3%") in flat
    assert max(abs(step_ratios(r)["control"] - 1) for r in runs[1]["rows"]) <= 0.003
    every = [q[k] for dd in runs for r in dd["rows"] for q in [step_ratios(r)] for k in ("fast", "in torch")]
    assert (f"Over the two runs above, the step time is between {_pct(min(every))}% faster and {_pct(max(every))}% "
            "slower than torch's.") in flat
    g = d["rows"][0]
    hook = g["norm_forward_host_us_fast"], g["norm_forward_host_us_torch"]
    assert (f"clock our forward at {hook[0]['in_step'] / hook[0]['loop']:.1f} times its cost in a loop "
            f"({hook[0]['in_step']:.1f} against {hook[0]['loop']:.1f} µs), and torch's at "
            f"{hook[1]['in_step'] / hook[1]['loop']:.1f} times ({hook[1]['in_step']:.1f} against {hook[1]['loop']:.1f})") in flat
    infer = [dd["rows"][0]["inference_batch1_torch_ms"] for dd in runs]
    assert f"Torch's own batch-1 inference took {infer[1]:.2f} ms there against {infer[0]:.2f} in the run shown" in flat
    text = host_table.training_step()
    assert text.count("| 20 | yes, yes |") == 2 and "| GPT-2 small |" in text and "| Llama-style |" in text
    assert ("At batch-1 inference our norms are slower than torch's both ways, and slower installed in torch than "
            "through `reimpl`") in flat
    assert "| ours / Inductor's |" in host_table.compiled_step()
    assert host_table.training_step_repeat().count("| GPT-2 small |") == 2


def test_the_floor_says_what_the_guide_says():
    """The host-floor bullets: the replay alone against torch's call, ours without a graph, the
    floor Function and ours with one, the microseconds between them, and the 32-64 MiB steps won."""
    import json
    d = json.loads((ROOT / "results/host_floor.json").read_text())
    flat = " ".join((ROOT / "docs/guide/training.md").read_text().split())
    small = [r for r in d["rows"] if "forward_grad_us" in r]
    assert {r["op"] for r in small} == {"layer_norm", "rms_norm"}

    def span(key, who):
        v = [r[key][who] / r[key]["torch"] for r in small]
        return f"{min(v):.2f} to {max(v):.2f}"
    assert ("the replay of a graph-recording forward (three outputs) costs about what torch's whole C++ call costs "
            f"({span('forward_us', 'floor: replay')} times)") in flat
    matrix = host_table.cells(host_table.load())[("layer_norm", "functional", "forward")]["torch"]
    ln = next(r for r in small if r["op"] == "layer_norm")
    assert f"torch's own forward costs {matrix:.1f} µs in the matrix, {ln['forward_us']['torch']:.1f} µs here" in flat
    assert f"and costs {span('forward_us', 'fast')} times torch's" in flat
    assert (f"the floor `Function` costs {span('forward_grad_us', 'floor: Function')} times torch's call, ours "
            f"{span('forward_grad_us', 'fast')} times") in flat
    gap = [r["forward_grad_us"]["fast"] - r["forward_grad_us"]["floor: Function"] for r in small]
    assert f"The {min(gap):.1f} to {max(gap):.1f} µs between ours and the floor" in flat
    large = [r for r in d["rows"] if "forward_grad_us" not in r]
    assert {r["M"] * r["N"] * 2 >> 20 for r in large} == {32, 64}
    floor_wins = sum(r["step_us"]["floor: Function"] < r["step_us"]["torch"] for r in large)
    ours_win = sum(r["step_us"]["fast"] < r["step_us"]["torch"] for r in large)
    assert f"the floor `Function` beats torch's step on {floor_wins} of the {len(large)} rows, and ours on {ours_win}." in flat


def test_bench_host_prints_every_cell_with_its_ratio(monkeypatch):
    """`python -m reimpl bench --host` (reimpl.checks.host.table): one row per cell of host.cells(),
    the five providers' times and each of ours over torch's. The timing itself runs on a GPU; here it
    is stubbed."""
    from reimpl.checks import bench, host
    monkeypatch.setattr(bench, "_stamp_line", lambda: "Device: a GPU.")
    us = {"torch": 10.0, "mirror": 12.0, "fast": 15.0, "mirror_in_torch": 11.0, "fast_in_torch": 13.0}
    monkeypatch.setattr(host, "host_us", lambda op, api, pass_, **kw: us)
    text = host.table(calls=1, rounds=1)
    rows = [line for line in text.splitlines() if line.startswith("| layer_norm") or line.startswith("| rms_norm")]
    assert len(rows) == len(list(host.cells())) == 20
    assert ("| layer_norm | functional | forward+backward | 10.0 | 12.0 | 15.0 | 11.0 | 13.0 | 1.20 | 1.50 | 1.10 "
            "| 1.30 |") in rows
    assert "| fast_in_torch / torch |" in text and text.startswith("Device: a GPU.\n")


def test_the_compiled_profile_says_what_the_guide_says():
    """Under compile, the kernels named for a norm take about half the GPU time with ours; more kernels
    launch; the step's GPU time grows by less than its wall time grows (the rest host)."""
    import json
    prof = json.loads((ROOT / "results/compiled_norms_profile.json").read_text())
    steps = {r["model"].split()[0]: r for r in json.loads((ROOT / "results/training_step.json").read_text())["rows"]}
    by = {(r["model"], r["norms"]): r for r in prof["rows"]}
    norm = "norm kernels (ours or torch's)"
    for model, step_key in (("gpt2", "GPT-2"), ("llama", "Llama-style")):
        ind, ours = by[(model, "torch")], by[(model, "fast")]
        assert 0.4 < ours["gpu_ms_by_family"][norm] / ind["gpu_ms_by_family"][norm] < 0.55
        assert sum(ours["launches_by_family"].values()) > sum(ind["launches_by_family"].values())
        wall = steps[step_key]["compiled_fast_norms_ms"] - steps[step_key]["compiled_torch_norms_ms"]
        assert 0 < ours["gpu_ms"] - ind["gpu_ms"] < wall
    assert "| GPT-2 small, ours |" in host_table.compiled_profile()


def test_the_route_advice_follows_the_records():
    """'Which route to take': small-batch inference through reimpl costs less than installed in torch,
    and so does the forward without a graph on the host; under compile only the modules route runs
    our kernels (the compiled step has a fast row)."""
    import json
    page = (ROOT / "docs/guide/training.md").read_text()
    assert "### Which route to take" in page
    d = host_table.load()
    for key, c in host_table.cells(d).items():
        if key[2] == "forward":
            assert c["fast"] < c["fast_in_torch"], key
    rows = json.loads((ROOT / "results/training_step.json").read_text())["rows"]
    assert all(r["inference_batch1_torch_ms"] < r["inference_batch1_fast_ms"] < r["inference_batch1_in_torch_ms"]
               < 1.1 * r["inference_batch1_torch_ms"] for r in rows)
    assert all("compiled_fast_norms_ms" in r for r in rows)


def test_the_persistent_triton_probe_says_what_the_rungs_page_says():
    """rungs.md's few-row wide bullets: the gain and the % of copy of the best persistent setting on
    the cells of at most 2048 rows of 8192-32768 columns, how many of those settings prefetch, and
    the cells where one program a row stays faster."""
    from reimpl.docsite import grid_tables
    d = grid_tables.load(grid_tables.TRITON_WIDE)
    rows = grid_tables.triton_wide_rows(d)
    flat = " ".join((ROOT / "docs/ladder/rungs.md").read_text().split())
    few = [r for r in rows if r["M"] <= 2048 and 8192 <= r["N"] <= 32768]
    assert all(r["best"] > r["rung"] for r in few)
    gain = [r["best"] - r["rung"] for r in few]
    assert (f"the best persistent setting gains {min(gain):.1f} to {max(gain):.1f} points over the rung; "
            f"{sum(' pre1 ' in r['setting'] for r in few)} of those {len(few)} best settings issue the next row's "
            "load early") in flat
    assert (f"It still reaches only {min(r['best'] for r in few):.1f} to {max(r['best'] for r in few):.1f}% of copy "
            f"on those {len(few)} cells") in flat
    assert max(r["best"] for r in few) < 95
    others = {(r["M"], r["N"]): r["best"] - r["rung"] for r in rows if r["dtype"] == "bf16" and r["M"] == 4096}
    assert f"It also gains on bf16 4096 x 5120 and 4096 x 4096 ({others[(4096, 5120)]:.1f} and {others[(4096, 4096)]:.1f} points)" in flat
    faster = {(r["dtype"], r["M"], r["N"]) for r in rows if r["rung"] >= r["best"]}
    assert faster == {("bf16", 16384, 4096), ("fp32", 4096, 5120), ("bf16", 1024, 65536)}
    assert "One program a row is faster on bf16 16384 x 4096 and fp32 4096 x 5120, and on bf16 1024 x 65536" in flat
    wide = next(r for r in rows if r["N"] == 65536)
    assert f"in tiles ({wide['rung']:.1f} against {wide['best']:.1f})" in flat
    names = {k for r in d["rows"] for k, v in r.items() if isinstance(v, float) and k not in ("copy_ms", "rung")}
    beats = {n: sum(isinstance(r.get(n), float) and r[n] > r["rung"] for r in d["rows"]) for n in names}
    assert f"no single setting beats the rung on more than {max(beats.values())} of the {len(d['rows'])} cells" in flat
    raw = [r for r in d["rows"] if r["M"] <= 2048 and 8192 <= r["N"] <= 32768]
    full = [n for n in names if all(isinstance(r.get(n), float) for r in raw)]
    mean = {n: sum(r[n] - r["rung"] for r in raw) / len(raw) for n in full}
    top = max(mean, key=mean.get)
    worst = min(r[top] - r["rung"] for r in raw)
    assert (f"The one that gains most on average over the {len(few)} cells (`{top}`, {mean[top]:.1f} points) loses "
            f"{-worst:.1f} points on another of them") in flat
    settings = [sum(isinstance(v, float) and k not in ("copy_ms", "rung") for k, v in r.items()) for r in d["rows"]]
    assert f"in up to {max(settings)} settings on each of {len(d['rows'])} cells" in flat


def test_the_cpp_node_probe_says_what_the_guide_says():
    """The C++ node, doing more (key and lookup), costs less than the Python Function, by the ratio the
    guide gives."""
    import json
    d = json.loads((ROOT / "results/cpp_node_probe.json").read_text())
    by = {r["node"].split(":")[0]: r for r in d["rows"]}
    ratio = by["C++ Function"]["forward_grad_us"] / by["Python Function"]["forward_grad_us"]
    assert ratio < 1 and by["C++ Function"]["forward_backward_us"] < by["Python Function"]["forward_backward_us"]
    flat = " ".join((ROOT / "docs/guide/training.md").read_text().split())
    assert f"the C++ node costs {ratio:.2f} times the Python `Function` that skips them" in flat
    assert "| C++ Function: key, lookup, three allocations, launch call |" in host_table.cpp_node()


def test_the_cpp_node_section_says_what_its_record_shows():
    """training.md: with the C++ node no cell is over the limit, where every forward that records a
    graph was over it with the Python node; RMSNorm without a graph got dearer."""
    python, native = host_table.load(), host_table.load(host_table.NATIVE)
    ratios = host_table.native_ratios(python, native)
    assert len(ratios) == len(host_table.cells(python))
    assert not host_table.over_limit(native)
    assert all(before > host_table.LIMIT for (op, api, p), (before, _) in ratios.items() if p == "forward, grad")
    assert all(after < before for (op, api, p), (before, after) in ratios.items() if p == "forward, grad")
    assert all(after > before for (op, api, p), (before, after) in ratios.items() if op == "rms_norm" and p == "forward"
               and api != "aten")
    flat = " ".join((ROOT / "docs/guide/training.md").read_text().split())
    assert f"no cell costs more than {host_table.LIMIT} times torch's" in flat
    assert "{% host_native %}" in flat


def test_the_cpp_node_sections_numbers_are_its_records():
    """training.md: a backward through autograd at 0.93 to 1.08 times torch's with the C++ node; GPT-2's
    step and inference ratios with it, the control's, and the earlier repeat's ratios it compares with."""
    flat = " ".join((ROOT / "docs/guide/training.md").read_text().split())
    ratios = host_table.native_ratios(host_table.load(), host_table.load(host_table.NATIVE))
    backward = [after for (op, api, p), (_, after) in ratios.items() if p == "backward" and api != "aten"]
    assert f"costs {min(backward):.2f} to {max(backward):.2f} times torch's" in flat
    rms = [ratios[("rms_norm", api, "forward")] for api in ("functional", "module")]
    assert (f"functional and module ({rms[0][1]:.2f} and {rms[1][1]:.2f} times torch's, against {rms[0][0]:.2f} and "
            f"{rms[1][0]:.2f} with the Python node)") in flat
    # "the two runs disagree ... on several 16-bit LayerNorm steps": some step's ratio moves by more than 0.1
    native = host_table.load(host_table.NATIVE)
    now = host_table.native_steps(host_table.load(), native)
    then = host_table.native_steps(host_table.load(), native["steps_earlier_run"])
    spread, key = max((abs(now[k][1] - then[k][1]), k) for k in now)
    op, dtype, M, N = key
    assert (f"disagree by as much as {spread:.2f} on one step ({dtype} LayerNorm {M}×{N}: {now[key][1]:.3f} "
            f"against {then[key][1]:.3f})") in flat and op == "layer_norm"
    aten = max(abs(a - b) for (o, api, p), (b, a) in ratios.items() if api == "aten" and p == "forward")
    assert f"moved by as much as {aten:.2f} between them" in flat
    r = json.loads(host_table.TRAINING_NATIVE.read_text())["rows"][0]
    assert r["params_bit_identical"] and r["model"].startswith("GPT-2")
    step, control = r["fast_norms_ms"] / r["torch_norms_ms"], r["control_ms"] / r["torch_norms_ms"]
    infer = r["inference_batch1_fast_ms"] / r["inference_batch1_torch_ms"]
    assert f"The step is {step:.3f} times torch's, with the control at {control:.3f}" in flat
    assert f"batch-1 inference is {infer:.3f} times torch's" in flat
    assert step > 1 and infer > 1  # "still above torch's"
    repeat = json.loads((host_table.RESULTS / "training_step_repeat.json").read_text())["rows"]
    earlier = [x["fast_norms_ms"] / x["torch_norms_ms"] for x in repeat if x["model"].startswith("GPT-2")]
    earlier += [x["inference_batch1_fast_ms"] / x["inference_batch1_torch_ms"] for x in repeat
                if x["model"].startswith("GPT-2") and "inference_batch1_fast_ms" in x]
    assert f"Python node's {min(earlier):.3f} to {max(earlier):.3f} on the earlier repeat" in flat
    assert step < min(earlier) and infer < min(earlier)
    in_torch = r["in_torch_norms_ms"] / r["torch_norms_ms"]
    assert (f"GPT-2's step through the `reimpl.nn` modules was {step:.3f} times torch's, and installed in torch "
            f"{in_torch:.3f} times") in flat
    gpt2 = next(x for x in repeat if x["model"].startswith("GPT-2"))
    assert f"(torch's step there: {gpt2['torch_norms_ms']:.2f} ms)" in flat
