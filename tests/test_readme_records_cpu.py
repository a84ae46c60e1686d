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
