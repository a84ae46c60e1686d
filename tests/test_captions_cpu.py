"""CPU-only: every table the docs draw from measured (or read) data opens with its caption, one italic
line right above it that says what it holds, how it was made, and where and when: the device, torch
version and date of the committed JSON it is drawn from, rendered from that file's own stamp."""
import json
import re
from pathlib import Path

import pytest

from reimpl.docsite import render

ROOT = Path(__file__).resolve().parents[1]
SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")


def _json(path: str) -> dict:
    return json.loads((ROOT / path).read_text())


def captions(markdown: str) -> list[str]:
    """The caption of each Markdown table in `markdown`, in order: the nearest non-blank line above
    its header row, which must be one italic line (`*...*`, not bold)."""
    lines = markdown.splitlines()
    out = []
    for i, line in enumerate(lines):
        if not (line.startswith("|") and i + 1 < len(lines) and SEPARATOR.match(lines[i + 1])):
            continue
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        above = lines[j] if j >= 0 else ""
        assert above.startswith("*") and above.endswith("*") and not above.startswith("**"), \
            f"table {lines[i]!r} has no caption line above it, but {above!r}"
        out.append(above)
    return out


def expand(directive: str) -> str:
    return render.expand(directive + "\n", "page.md", "../")


def gpu(path: str) -> list[str]:
    """What a caption must name of a GPU run's file: its device, torch version and date."""
    d = _json(path)
    return [d["device"], f"torch {d['torch']}", d["date"]]


# directive -> for each table it draws, in order, the strings its caption must hold
GPU_TABLES = {
    "{% parity %}": [gpu("results/gpu_suite_forward.json") + ["Method:", "Forward"],
                     gpu("results/gpu_suite_backward.json") + ["Method:", "Backward"]],
    "{% softmax_errors three_pass %}": [gpu("results/siblings_errors.json") + ["`three_pass`", "ulps"]],
    "{% softmax_errors online_warp %}": [gpu("results/siblings_errors.json") + ["`online_warp`"]],
    "{% softmax_errors online_block %}": [gpu("results/siblings_errors.json") + ["`online_block`"]],
    "{% batchnorm_errors torch_level %}": [gpu("results/siblings_errors.json") + ["`torch_level`", "no unit"]],
    "{% batchnorm_errors kernel %}": [gpu("results/siblings_errors.json") + ["`kernel`"]],
    "{% softmax_errors one_read %}": [gpu("results/siblings_errors.json") + ["`one_read`"]],
    "{% batchnorm_errors split %}": [gpu("results/siblings_errors.json") + ["`split`"]],
    "{% siblings_verdict softmax %}": [gpu("results/siblings_bench.json") + ["`one_read`", "% of the copy", "Method:"]],
    "{% siblings_verdict cross_entropy %}": [gpu("results/siblings_bench.json") + ["`cross_entropy_fused`"]],
    "{% siblings_verdict batchnorm %}": [gpu("results/siblings_bench.json") + ["`bn_split`"]],
    "{% siblings_ncu softmax %}": [gpu("results/ncu_siblings.json") + ["Nsight Compute", "µs", "Method:"],
                                   gpu("results/ncu_siblings.json") + ["Nsight Compute", "DRAM", "Method:"]],
    "{% siblings_ncu cross_entropy %}": [gpu("results/ncu_siblings.json") + ["Nsight Compute", "cross_entropy"]] * 2,
    "{% siblings_ncu batchnorm %}": [gpu("results/ncu_siblings.json") + ["Nsight Compute", "batchnorm"]] * 2,
    "{% releases %}": [gpu("results/torch_versions_gpu.json")
                       + ["`reference/torch_versions.json`", _json("reference/torch_versions.json")["date"]]],
    "{% releases_gpu %}": [gpu("results/torch_versions_gpu.json") + ["Method:", "counts"]],
    "{% large_tensor %}": [gpu("results/large_tensor.json") + ["Method:", "dX"]],
    "{% fast_backward fp32 %}": [gpu("results/fast_backward_bench.json") + ["Method:", "whole backward"]],
    "{% fast_backward bf16 flushed %}": [gpu("results/fast_backward_bench.json") + ["L2 flushed", "whole backward"]],
    "{% training_step %}": [gpu("results/training_step.json") + ["Method:", "Training step"],
                          gpu("results/training_step.json") + ["Method:", "Inference"],
                          gpu("results/training_step.json") + ["Method:", "in a loop"]],
    "{% training_step_repeat %}": [gpu("results/training_step.json") + gpu("results/training_step_repeat.json")
                                   + ["Method:", "repeat"]],
    "{% triton_wide %}": [gpu("results/triton_wide_probe.json") + ["Method:", "persistent"]],
    "{% host_floor %}": [gpu("results/host_floor.json") + ["Method:", "floor: Function"],
                         gpu("results/host_floor.json") + ["Method:", "step"]],
    "{% compiled_step %}": [gpu("results/training_step.json") + ["Method:", "torch.compile"]],
    "{% compiled_profile %}": [gpu("results/compiled_norms_profile.json") + ["Method:", "launches"]],
    "{% fast_grid_summary %}": [gpu("results/fast_grid_bench.json") + ["Method:", "whole grid"]],
    "{% fast_grid fp16 %}": [gpu("results/fast_grid_bench.json") + ["Method:", "fp16"]],
    "{% fast_grid bf16 flushed %}": [gpu("results/fast_grid_bench.json") + ["L2 flushed", "bf16"]],
    "{% fast_gain group %}": [gpu("results/fast_grid_bench.json") + ["Method:", "group kernel"]],
    "{% fast_gain stream %}": [gpu("results/fast_grid_bench.json") + ["Method:", "stream kernel"]],
    "{% fast_gain weights %}": [gpu("results/fast_grid_bench.json") + ["Method:", "weights early"]],
    "{% fast_probe route fast_plan stream_U16_B2 torch %}": [gpu("results/fast_forward_probe.json")
                                                             + ["Method:", "register kernel"]],
    "{% fast_probe group group_K1 group_K8 %}": [gpu("results/fast_forward_probe.json") + ["Method:", "sets of rows"]],
    "{% fast_probe_ncu %}": [gpu("results/fast_forward_probe.json") + ["Nsight Compute", "Method:", "ncu"]],
    "{% lane_ncu %}": [gpu("results/lane_probe.json") + ["Nsight Compute", "Method:", "ncu"]],
    "{% lane_gain %}": [gpu("results/lane_probe.json") + ["Method:", "32 MB"]],
    "{% fast_probe lane before lane_W2 torch %}": [gpu("results/lane_probe.json") + ["Method:", "lane kernel"]],
    "{% fast_probe lane_rows before lane_W2 torch %}": [gpu("results/lane_rows_probe.json") + ["Method:", "rows per SM"]],
    "{% host_overhead layer_norm %}": [gpu("results/host_overhead.json") + ["µs", "Method:", "median", "LayerNorm"]],
    "{% host_overhead rms_norm %}": [gpu("results/host_overhead.json") + ["µs", "Method:", "median", "RMSNorm"]],
    "{% host_profile %}": [gpu("results/host_overhead.json") + ["µs", "cProfile"]],
    "{% host_parts %}": [gpu("results/host_overhead.json") + ["µs", "Method:", "autograd's own thread"]],
    "{% host_steps %}": [gpu("results/host_overhead.json") + ["µs per step", "Method:"]],
    "{% judge_planted %}": [gpu("results/judge_planted.json") + ["Method:"]],
    "{% judge_rungs %}": [gpu("results/judge_rungs.json") + ["Method:"]],
    "{% judge_example %}": [gpu("results/judge_rungs.json") + ["Method:"]],
    "{% batch_invariance %}": [gpu("results/batch_invariance.json") + ["Method:"]],
}
# the numerics example draws one table per output that differs
_N = _json("results/numerics_example.json")
GPU_TABLES["{% numerics_example %}"] = [gpu("results/numerics_example.json") + [f"`{t}`", "Method:"]
                                        for t in ("mean", "rstd", "out") if _N["diffs"][t]]

# the host dispatch read from newer copies of the source: no device, but the file and its date
_HOST = ["`reference/host_dispatch.json`", _json("reference/host_dispatch.json")["date"], "no GPU run", "Method:"]
_CPP = _json("results/cpp_node_probe.json")
READ_TABLES = {
    "{% cpp_node %}": [[_CPP["cpu"], f"torch {_CPP['torch']}", _CPP["date"], "no GPU", "Method:"]],
    "{% releases_copies %}": [_HOST],
    "{% releases_host %}": [_HOST],
    "{% releases_host_changes %}": [_HOST],
    "{% releases_what_you_get %}": [_HOST[:2] + gpu("results/large_tensor.json")
                                    + [_json("reference/torch_versions.json")["date"]]],
}


@pytest.mark.parametrize("directive", sorted({**GPU_TABLES, **READ_TABLES}))
def test_each_table_has_its_caption_with_device_and_date(directive):
    wanted = {**GPU_TABLES, **READ_TABLES}[directive]
    got = captions(expand(directive))
    assert len(got) == len(wanted), (directive, got)
    for caption, needs in zip(got, wanted):
        for s in needs:
            assert s in caption, (directive, s, caption)


def test_tables_that_are_no_measurement_need_no_caption():
    """The variants, the layers and the worked CPU examples are not measurements: they still render."""
    for directive in ("{% judge_variants %}", "{% layers %}", "{% siblings_axes %}"):
        assert "|---" in expand(directive)


def test_captions_follow_the_stamp_not_typed_text(monkeypatch):
    """A caption changes with the stamp of the file it is drawn from."""
    from reimpl.docsite import judge_tables, siblings_bench_tables
    d = {**_json("results/siblings_bench.json"), "device": "Some GPU", "date": "2030-01-02"}
    (caption,) = captions(siblings_bench_tables.verdict_table(d, "softmax"))
    assert "Some GPU" in caption and "2030-01-02" in caption
    p = {**_json("results/judge_planted.json"), "device": "Other GPU", "date": "2031-02-03"}
    (caption,) = captions(judge_tables.planted(p))
    assert "Other GPU" in caption and "2031-02-03" in caption


def test_the_checker_finds_an_uncaptioned_table():
    with pytest.raises(AssertionError):
        captions("Some text.\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n")
    assert captions("*A caption.*\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n") == ["*A caption.*"]
