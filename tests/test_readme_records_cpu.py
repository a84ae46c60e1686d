"""CPU-only: the README's figures about the GPU suite, the forward bench and the ladder are the
committed records' (results/gpu_suite_*.json, results/bench_forward.md, reimpl/ladder/registry.py),
as the README prints them."""
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme() -> str:
    return " ".join((ROOT / "README.md").read_text().split())


def _record(name: str) -> dict:
    return json.loads((ROOT / "results" / name).read_text())


def test_the_gpu_suite_figures():
    fwd, bwd = _record("gpu_suite_forward.json"), _record("gpu_suite_backward.json")
    text = _readme()
    assert (f"Forward groups (`fast_*` included): {fwd['totals']['cases']:,} cases and "
            f"{fwd['totals']['elements_compared']:,} elements; backward groups (`bwd_fast_*` included): "
            f"{bwd['totals']['cases']:,} cases and {bwd['totals']['elements_compared']:,} elements; **0 differed**. "
            f"{fwd['counters']['fast_kernel_cases']:,} forward and {bwd['counters']['bwd_fast_grad_kernel_cases']:,} "
            "backward cases launched the fast") in text
    assert fwd["totals"]["mismatched_elements"] == bwd["totals"]["mismatched_elements"] == 0
    assert f"{fwd['parity_groups']['fast_plans']['cases']:,} cases aimed at each forward kernel" in text
    assert f"{bwd['parity_groups']['bwd_fast_plans']['cases']} cases at the edges of the dX plan" in text
    assert "(`results/gpu_suite_forward.json`, the `fast_*` groups, on an H200)" in text
    assert fwd["device"] == "NVIDIA H200"


def test_the_forward_bench_span():
    ratios = [float(m) for m in re.findall(r"^\| \w+ \| \w+ \| \d+ x \d+ \| [\d.]+ \| [\d.]+ \| ([\d.]+) \|",
                                           (ROOT / "results/bench_forward.md").read_text(), re.M)]
    assert len(ratios) >= 16
    assert f"ours/torch between {min(ratios):.3f} and {max(ratios):.3f} on every shape" in _readme()


def test_the_ladder_rung_count():
    from reimpl.ladder import registry
    words = {9: "nine", 2: "two"}
    ln = [e for e in registry.CUDA_RUNGS if not e.rms_norm]
    rms = [e for e in registry.CUDA_RUNGS if e.rms_norm]
    assert f"{words[len(ln)]} CUDA LayerNorm rungs" in _readme() and f"plus {words[len(rms)]} RMSNorm rungs" in _readme()


def _span(values, fmt="{:.3f}") -> str:
    return f"{fmt.format(min(values))}-{fmt.format(max(values))}"


def test_the_training_step_and_host_floor_figures():
    """The README's whole-model figures (both runs), its host-floor span and the two-GPU run's counts."""
    text = _readme()
    d, rep = _record("training_step.json"), _record("training_step_repeat.json")
    rows = d["rows"]

    def ratio(r, a, b):
        return r[a] / r[b]
    assert all(r["params_bit_identical"] and r["in_torch_params_bit_identical"] and r["torch_runs_bit_identical"]
               for r in rows + rep["rows"])
    assert f"(`scripts/gpu/training_step.py`, H200, {d['date']})" in text
    assert (f"Step time {_span([ratio(r, 'fast_norms_ms', 'torch_norms_ms') for r in rows])}× torch's through reimpl "
            f"and {_span([ratio(r, 'in_torch_norms_ms', 'torch_norms_ms') for r in rows])}× in torch (the control "
            f"{_span([ratio(r, 'control_ms', 'torch_norms_ms') for r in rows])}×)") in text
    g = rep["rows"][0]
    assert g["model"].startswith("GPT-2")
    assert (f"gave GPT-2 {ratio(g, 'fast_norms_ms', 'torch_norms_ms'):.3f}× and "
            f"{ratio(g, 'in_torch_norms_ms', 'torch_norms_ms'):.3f}×, the control within 0.3%") in text
    assert max(abs(ratio(r, "control_ms", "torch_norms_ms") - 1) for r in rep["rows"]) <= 0.003
    assert (f"Batch-1 inference {_span([ratio(r, 'inference_batch1_fast_ms', 'inference_batch1_torch_ms') for r in rows])}"
            f"× through reimpl, {_span([ratio(r, 'inference_batch1_in_torch_ms', 'inference_batch1_torch_ms') for r in rows])}"
            "× in torch") in text
    assert (f"is {_span([ratio(r, 'compiled_fast_norms_ms', 'compiled_torch_norms_ms') for r in rows], '{:.2f}')}× the "
            "step with Inductor's own norms") in text
    in_step = [r["norm_forward_host_us_fast"]["in_step"] / r["norm_forward_host_us_torch"]["in_step"] for r in rows]
    loop = [r["norm_forward_host_us_fast"]["loop"] / r["norm_forward_host_us_torch"]["loop"] for r in rows]
    assert (f"forward costs the host {_span(in_step, '{:.1f}')}× torch's inside the step, "
            f"{_span(loop, '{:.2f}')}× in a loop") in text
    small = [r for r in _record("host_floor.json")["rows"] if "forward_grad_us" in r]
    floor = [r["forward_grad_us"]["floor: Function"] / r["forward_grad_us"]["torch"] for r in small]
    ours = [r["forward_grad_us"]["fast"] / r["forward_grad_us"]["torch"] for r in small]
    assert (f"{_span(floor, '{:.2f}')}× torch's forward with grad, against ours at {_span(ours, '{:.2f}')}×") in text
    two = _record("gpu_tests_two_gpus.json")
    assert two["pytest_exitstatus"] == 0 and two["totals"]["mismatched_elements"] == 0
    passed = int(two["pytest"].split()[0])
    assert f"{passed} passed, 0 of {two['totals']['elements_compared']:,} elements differ" in text


def test_the_cpp_node_figures():
    """The README's figures for the C++ node's records (results/*_native.json)."""
    from reimpl.docsite import host_table
    text = _readme()
    native = _record("host_overhead_native.json")
    cells = host_table.cells(native)
    ratio = {k: c["fast"] / c["torch"] for k, c in cells.items()}
    grad = [r for k, r in ratio.items() if k[2] == "forward, grad"]
    backward = [r for k, r in ratio.items() if k[2] == "backward" and k[1] != "aten"]
    assert f"Forward with grad {min(grad):.2f}-{max(grad):.2f}× torch's" in text
    assert f"backward through autograd {min(backward):.2f}-{max(backward):.2f}×" in text
    assert f"every cell at most {max(ratio.values()):.2f}×" in text
    slower = sum(r["fast"] > r["torch"] for r in native["steps"])
    assert f"slower than torch's on {slower} of {len(native['steps'])} rows" in text
    earlier = native["steps_earlier_run"]["steps"]
    assert f"({sum(r['fast'] > r['torch'] for r in earlier)} of {len(earlier)} in an earlier run" in text
    assert "1010 passed" in text and _record("gpu_tests_lane_kernel_forward.json")["pytest"].startswith("1010 passed")
    r = _record("training_step_native.json")["rows"][0]
    assert r["params_bit_identical"]
    assert (f"GPT-2's step is {r['fast_norms_ms'] / r['torch_norms_ms']:.3f}× torch's and batch-1 inference "
            f"{r['inference_batch1_fast_ms'] / r['inference_batch1_torch_ms']:.3f}× (the control "
            f"{r['control_ms'] / r['torch_norms_ms']:.3f}×)") in text
    passed = _record("gpu_tests_native.json")["pytest"].split(" passed")[0]
    assert f"GPU tests: {passed} passed." in text


def test_the_lane_kernel_figures():
    from reimpl.docsite import forward_probe_tables as P
    pairs = P.lane_gain_cells("pipelined")[("16-bit", "LayerNorm")]
    before, lane = [p[0] for p in pairs], [p[1] for p in pairs]
    text = _readme()
    assert (f"16-bit LayerNorm went from {min(before):.0f}–{max(before):.0f}% of copy to "
            f"{min(lane):.0f}–{max(lane):.0f}%, pipelined, and every such cell gained") in text
    assert all(b < a for pairs in P.lane_gain_cells("pipelined").values() for b, a in pairs)
    tests = _record("gpu_tests_lane_kernel_forward.json")
    assert tests["totals"]["mismatched_elements"] == 0 and tests["pytest_exitstatus"] == 0
    assert "fast_lanes" in tests["parity_groups"]
    assert f"(`results/gpu_tests_lane_kernel_forward.json`: 0 of {tests['totals']['elements_compared']:,} elements)" in text
