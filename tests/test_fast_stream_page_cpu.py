"""CPU-only: the fast page's section on the stream kernel and the group kernel's sets of rows says
what results/fast_forward_probe.json holds: its knob tables are rendered from the probe (every
variant's bits checked against torch's before it was timed), the plan's knobs are among the ones it
measured, and the sentences around the tables are held to the record here."""
import json
from pathlib import Path

import pytest

from reimpl.docsite import forward_probe_tables as P
from reimpl.fast import forward as F
from reimpl.mirror import kernel_table as K

ROOT = Path(__file__).resolve().parents[1]


def _probe():
    return json.loads((ROOT / "results/fast_forward_probe.json").read_text())


def _page():
    return " ".join((ROOT / "docs/ladder/fast.md").read_text().split())


def test_every_variant_gave_torchs_bits():
    d = _probe()
    assert d["bits"]["variants_compared"] > 1000 and d["bits"]["mismatched_elements"] == 0


def test_the_plans_knobs_are_measured_and_win_where_the_page_says():
    d = _probe()
    chosen = f"stream_U{F.STREAM_CHUNK}_B{F.STREAM_BLOCKS}"
    stream = P.cells(d, "stream")
    assert stream and all(chosen in c for c in stream.values())
    # past 16384 elements the plan's knobs beat no stash (two reads from DRAM) on most cells
    long = [c for (dt, op, M, N), c in stream.items() if N > 16384]
    assert sum(c[chosen] > c[f"stream_U{F.STREAM_CHUNK}_B0"] for c in long) > len(long) / 2
    # rows of 10240 to 16384: where the plan keeps the register kernel, it measured ahead of the
    # stream kernel; where it streams, the stream kernel is ahead on most cells
    route = P.cells(d, "route")
    T = {"fp32": K.float_, "bf16": K.BFloat16, "fp16": K.Half}
    streamed = [(c[chosen], c["fast_plan"]) for (dt, op, M, N), c in route.items()
                if F.streams(T[dt], op == "rms_norm", M, N, 132)]
    kept = [(c[chosen], c["fast_plan"]) for (dt, op, M, N), c in route.items()
            if not F.streams(T[dt], op == "rms_norm", M, N, 132)]
    assert kept and all(reg > st - 2 for st, reg in kept) and any(reg > st + 2 for st, reg in kept)
    assert sum(st > reg for st, reg in streamed) > len(streamed) / 2
    # the group kernel's K is among the sets measured, and beats one set on every 16-bit cell
    group = P.cells(d, "group")
    assert all(c[f"group_K{F.GROUP_SETS}"] > c["group_K1"] for (dt, *_), c in group.items() if dt != "fp32")


def test_the_register_kernel_profile_sentence():
    n = _probe()["ncu"]
    assert n["kernel"].startswith("fast_layer_norm_kernel<") and n["kernel"].endswith(", 32>") and n["waves_per_sm"] < 1
    assert (f"The DRAM runs at {n['dram_throughput_pct']:.0f}% of its peak throughput, the grid fills less than one "
            f"wave, and a warp issues one instruction every {n['warp_cycles_per_issued_instruction']:.0f} cycles.") \
        in _page()


def test_the_stash_sentence():
    page = _page()
    per_block = F.stash_bytes(K.BFloat16, 65536)
    assert (f"({per_block // 1024} KB a block on the H100's and H200's {F.SHARED_PER_SM // 1024} KB of shared memory "
            "per SM)") in page
    assert f"(fp32, with 16-byte vectors, keeps {F.stash_bytes(K.float_, 65536) // (128 * 16)} vectors a thread)" in page
    assert F.stash_bytes(K.BFloat16, 32768) == 32768 * 2  # "a whole bf16 row of 32768 elements"
    assert f"or {per_block // (128 * 8)} of the 128 vectors a thread of 65536" in page
    assert f"in chunks of {F.STREAM_CHUNK}" in " ".join(page.split("**Rows that do not fit")[1:2]) or \
        f"vectors {F.STREAM_CHUNK} at a time" in page


def test_labels_and_refusals():
    assert P.label("stream_U16_B2") == "U 16, stash for 2" and P.label("stream_U8_B0") == "U 8, no stash"
    assert P.label("group_K4") == "K 4" and P.label("torch") == "torch"
    with pytest.raises(ValueError, match="a part of"):
        P.fast_probe("nowhere torch")
    with pytest.raises(ValueError, match="has no"):
        P.fast_probe("group stream_U16_B2")
    text = P.fast_probe("route fast_plan stream_U16_B2 torch")
    assert "| bf16, LayerNorm | 8192×16384 | **" in text  # the register kernel's win, in bold
