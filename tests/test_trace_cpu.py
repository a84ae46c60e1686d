"""Step traces on the CPU: the trace switch leaves the kernels unchanged, the step codes agree
between CUDA and Python, the emulator's steps say what the reductions must do, and the CLI prints
tables, writes JSON and stops in pdb."""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reimpl import emulator
from reimpl.checks.cases import Case
from reimpl.device import compile as compile_mod
from reimpl.emulator import trace
from reimpl.mirror.kernel_table import SOURCE, all_instantiations, backward_instantiations

ROOT = Path(__file__).resolve().parents[1]
CUDA = ROOT / "reimpl" / "mirror" / "cuda"


def test_step_codes_agree_with_trace_cuh():
    text = (CUDA / "trace.cuh").read_text()
    defined = {m[1]: int(m[2]) for m in re.finditer(r"#define REIMPL_STEP_(\w+) (\d+)", text)}
    assert defined == trace.CODE_OF


def _strip_trace(src: str) -> str:
    """The source as it was before the trace points: no include, no REIMPL_TRACE(...) statement,
    no #ifdef REIMPL_TRACING block."""
    src = src.replace('#include "trace.cuh"  // REIMPL_TRACE: empty unless built with -DREIMPL_TRACING\n', "")
    src = re.sub(r"#ifdef REIMPL_TRACING\n.*?#endif\n", "", src, flags=re.S)
    return re.sub(r"[ \t]*REIMPL_TRACE\(.*?\);\n", "", src, flags=re.S)


def _normalise(cubin: bytes) -> bytes:
    # the anonymous namespace's mangled name carries a hash of the source text
    return re.sub(rb"_layer_norm_kernel_cu_[0-9a-f]{8}_", b"_layer_norm_kernel_cu_XXXXXXXX_", cubin)


def test_trace_switch_off_compiles_to_the_same_cubin(tmp_path):
    """With REIMPL_TRACING undefined the trace points vanish: the cubin equals that of the source with
    every trace line removed (byte for byte, up to the source hash in anonymous-namespace names), for
    all 184 kernels, forward and backward (one build of each source)."""
    kernels = all_instantiations()
    assert len(kernels) == 184 and set(backward_instantiations()) <= set(kernels)
    stripped = tmp_path / "cuda"
    stripped.mkdir()
    for p in CUDA.iterdir():
        if p.suffix in (".cu", ".cuh", ".h"):
            (stripped / p.name).write_text(_strip_trace(p.read_text()))
    for name in ("layer_norm_kernel.cu", "block_reduce.cuh"):
        text = (stripped / name).read_text()
        assert "REIMPL_TRACE" not in text and "reimpl_trace::" not in text, name
    ours = compile_mod.build(SOURCE, "sm_90", kernels, use_cache=False)
    plain = compile_mod.build(compile_mod.CudaSource(stripped, SOURCE.main, SOURCE.default_kernels), "sm_90",
                              kernels, use_cache=False)
    assert _normalise(ours.cubin) == _normalise(plain.cubin)


def test_traced_build_compiles_for_sm90_without_warnings():
    prog = compile_mod.build(SOURCE, "sm_90", all_instantiations(), extra_options=("-DREIMPL_TRACING",))
    assert prog.log == ""
    for sym in (b"reimpl_trace_buf", b"reimpl_trace_capacity", b"reimpl_trace_count"):
        assert sym in prog.cubin


def _trace(case):
    x, w, b = case.make_inputs("cpu")
    with trace.recording() as tr:
        outs = emulator.run_case(case, x, w, b)
    return tr, outs


def test_vectorized_trace_follows_the_reduction_tree():
    """N = 512 on a (32, 4) block: each thread reads one vector of 4, the shuffles double the count
    each round (lane l reads lane l + offset, or itself past lane 31), the shared-memory rounds
    merge warps 2,3 into 0,1 then 1 into 0, and the outputs are the elements the thread read."""
    tr, (out, mean, rstd) = _trace(Case("layer_norm", "fp32", (1, 512), seed=3))
    steps = {(s.kind, s.index): s for s in tr.steps}
    online = [steps[("online", k)] for k in range(4)]
    assert all(s.active.all() for s in online)
    np.testing.assert_array_equal(online[3].values["count"], 4)
    np.testing.assert_array_equal(online[0].aux, np.arange(128) * 4)
    lane = np.arange(128) % 32
    for r, offset in enumerate((16, 8, 4, 2, 1)):
        s = steps[("shfl_down", r)]
        np.testing.assert_array_equal(s.aux, np.where(lane + offset <= 31, np.arange(128) + offset, np.arange(128)))
        assert s.values["count"][0] == 4 * 2 ** (r + 1)
    w0, c0 = steps[("smem_write", 0)], steps[("smem_combine", 0)]
    assert np.flatnonzero(w0.active).tolist() == [64, 96] and w0.aux[[64, 96]].tolist() == [0, 1]
    assert np.flatnonzero(c0.active).tolist() == [0, 32] and c0.values["count"][0] == 256
    c1 = steps[("smem_combine", 1)]
    assert np.flatnonzero(c1.active).tolist() == [0] and c1.values["count"][0] == 512
    stats = steps[("stats", 0)]
    assert stats.values["mean"][0] == mean[0]
    assert steps[("rstd", 0)].values["rstd"][5] == rstd[0]
    outs = [steps[("output", k)] for k in range(4)]
    for k, s in enumerate(outs):
        np.testing.assert_array_equal(s.values["out"], out[0, np.arange(128) * 4 + k])


def test_fallback_trace_has_both_warp_reduce_phases():
    tr, (out, mean, rstd) = _trace(Case("layer_norm", "fp32", (2, 254), seed=4))
    blk0 = [s for s in tr.steps if s.block == 0 and s.kernel.startswith("RowwiseMoments")]
    kinds = [s.kind for s in blk0]
    assert kinds == ["reduce"] + ["warp_reduce"] * 5 + ["block_write", "block_read"] + ["warp_reduce"] * 5 + ["moments"]
    phase2 = blk0[8:13]
    assert all(np.flatnonzero(s.active).tolist() == list(range(32)) for s in phase2)
    # combine leaves n = -1 (upstream: only nf is used afterwards); nf counts the row
    assert phase2[-1].values["n"][0] == -1 and phase2[-1].values["nf"][0] == 254 and blk0[-1].values["mean"][0] == mean[0]
    assert blk0[-1].values["rstd"][0] == rstd[0]
    fwd = [s for s in tr.steps if s.kind == "fwd_output" and s.block == 1]
    assert len(fwd) == 1 and np.array_equal(fwd[0].values["out"][:254], out[1])


def test_records_keep_each_threads_program_order():
    tr, _ = _trace(Case("rms_norm", "bf16", (2, 256), seed=5))
    r = tr.records()
    assert len(r) == sum(int(s.active.sum()) for s in tr.steps)
    t0 = r[(r[:, 0] == 1) & (r[:, 2] == 0)]
    codes = [trace.KIND_OF[int(c) >> 16] for c in t0[:, 1]]
    assert codes[:3] == ["online"] * 3 and codes.index("stats") > codes.index("smem_combine")
    assert codes[-1] == "output"


def _cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "reimpl", "trace", *args], input=stdin, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_prints_tables_and_writes_json(tmp_path):
    out = tmp_path / "t.json"
    res = _cli("--shape", "2,64", "--kind", "shfl_down", "--thread", "3", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("shfl_down #") == 5 and "partner" in res.stdout
    data = json.loads(out.read_text())
    assert data["meta"]["case"]["shape"] == [2, 64]
    assert {s["block"] for s in data["steps"]} == {0, 1}


def test_cli_stops_in_pdb_inside_the_named_device_function():
    res = _cli("--shape", "1,64", "--kind", "stats", "--break", "cuWelfordCombine:2",
               stdin="p 'ARGS', float(dataB.count[0]), float(dataA.count[0])\nc\n")
    assert res.returncode == 0, res.stderr
    assert "cuWelfordCombine()" in res.stdout and "('ARGS', 4.0, 4.0)" in res.stdout


def test_cli_traces_the_backward():
    """GammaBeta <32,8,64> at M = 64: the XOR rounds pair lane l with l ^ 4, l ^ 2, l ^ 1."""
    res = _cli("--backward", "--shape", "64,32", "--kind", "gb_shfl_xor", "--thread", "5")
    assert res.returncode == 0, res.stderr
    assert "GammaBetaBackwardCUDAKernelTemplate<float, float, 32u, 8u, 64u" in res.stdout
    partners = [int(line.split()[3]) for line in res.stdout.splitlines() if line.strip().startswith("5 ")]
    assert partners[:3] == [5 ^ 4, 5 ^ 2, 5 ^ 1]


def test_cli_rejects_an_unknown_function():
    res = _cli("--break", "noSuchFunction")
    assert res.returncode != 0 and "no emulated device function 'noSuchFunction'" in res.stderr
