"""CPU-only: reimpl/checks/ncu_report.py reads Nsight Compute's text reports as committed under
results/ncu/: each profiled launch with its kernel, grid, block and headline figures, the same
figures the probes' records quote from those reports; and a probe's `--ncu` arguments."""
import json
from pathlib import Path

from reimpl.checks import ncu_report

RESULTS = Path(__file__).resolve().parents[1] / "results"


def test_the_forward_probes_figures_are_its_reports():
    record = json.loads((RESULTS / "fast_forward_probe.json").read_text())["ncu"]
    [launch] = ncu_report.launches((RESULTS / "ncu/fast_forward_register_bf16_512x16384.txt").read_text())
    assert launch["kernel"] == record["kernel"] and launch["grid"] == "512,1,1" and launch["block"] == "32,4,1"
    assert {k: launch[k] for k in ncu_report.FIGURES} == {k: record[k] for k in ncu_report.FIGURES}


def test_the_chains_probes_figures_are_its_report():
    record = json.loads((RESULTS / "chains_probe.json").read_text())["ncu"]["kernels"]
    launches = ncu_report.launches((RESULTS / "ncu/chains_bf16_65536x768.txt").read_text())
    assert launches == record
    assert [k["name"] for k in launches] == ["GammaBetaBackwardCUDAKernelTemplate", "fast_gamma_beta_chains_kernel"]
    assert all(set(ncu_report.FIGURES) <= set(k) for k in launches)


def test_a_probes_ncu_arguments_are_split_off():
    assert ncu_report.split_args(["out.json", "stream", "--ncu", "r.txt", "bf16", "512", "16384", "wide"]) == (
        ["out.json", "stream", "wide"], ["r.txt", "bf16", "512", "16384"])
    assert ncu_report.split_args(["out.json", "quick"]) == (["out.json", "quick"], None)
