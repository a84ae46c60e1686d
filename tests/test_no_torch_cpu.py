"""The emulator without torch: a fresh virtual environment with NumPy only (no torch, no CuPy), the
repository on PYTHONPATH rather than installed, imports reimpl.emulator without loading torch and
prints the same forward and backward traces as this environment, where torch makes the inputs (there
the twins of torch's CPU generator in reimpl/emulator/case_inputs.py make them, and the host mirror
runs on stand-in tensors either way). Making the environment needs PyPI (pip's cache makes it quick);
failing to make it fails the test."""
import importlib.util
import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from reimpl.checks.cases import VALUE_KINDS
from reimpl.checks.cases_backward import DY_SEED_SALT, BackwardCase
from reimpl.emulator import case_inputs
from reimpl.emulator.api import as_storage

ROOT = Path(__file__).resolve().parents[1]
TRACES = {"forward": ("--dtype", "fp32", "--shape", "1,64"),
          "backward": ("--dtype", "fp32", "--shape", "1,64", "--backward")}
# the float32 twin is torch's AVX2 kernel (reimpl/emulator/torch_random.py); torch's plain build differs
TWIN_HOLDS = torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")
needs_avx2 = pytest.mark.skipif(not TWIN_HOLDS, reason="torch runs its plain (non-AVX2) randn on this CPU")


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(PYTHONPATH=str(ROOT), PYTHONNOUSERSITE="1")  # no user site: it might hold torch
    return env


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """A new venv with numpy (this environment's version) and nothing else."""
    where = tmp_path_factory.mktemp("no_torch") / "venv"
    res = subprocess.run([sys.executable, "-m", "venv", str(where)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"python -m venv failed:\n{res.stderr}"
    py = where / "bin" / "python"
    res = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          f"numpy=={np.__version__}"], capture_output=True, text=True, timeout=300, env=_env())
    assert res.returncode == 0, f"pip could not install numpy into a fresh venv (is PyPI reachable?):\n{res.stderr}"
    return py


def _run(py, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(py), *args], capture_output=True, text=True, timeout=120, cwd=ROOT, env=_env())


def test_the_bare_environment_has_no_torch_and_the_emulator_loads_none(bare_python):
    code = ("import importlib.util, sys; import reimpl.emulator, reimpl.cli; "
            "assert importlib.util.find_spec('torch') is None and importlib.util.find_spec('cupy') is None; "
            "assert 'torch' not in sys.modules and 'cupy' not in sys.modules; print(reimpl.emulator.__file__)")
    res = _run(bare_python, "-c", code)
    assert res.returncode == 0, res.stderr
    assert Path(res.stdout.strip()).is_relative_to(ROOT)


@needs_avx2
@pytest.mark.parametrize("which", TRACES)
def test_the_trace_without_torch_is_the_trace_with_torch(bare_python, which):
    bare = _run(bare_python, "-m", "reimpl", "trace", *TRACES[which])
    assert bare.returncode == 0, bare.stderr
    kernel = "GammaBetaBackwardCUDAKernelTemplate<float" if which == "backward" else "vectorized_layer_norm_kernel<float"
    assert kernel in bare.stdout and "bits" in bare.stdout
    ours = _run(sys.executable, "-m", "reimpl", "trace", *TRACES[which])
    assert ours.returncode == 0, ours.stderr
    assert bare.stdout == ours.stdout


def test_importing_the_emulator_loads_no_torch_where_torch_is_installed():
    assert importlib.util.find_spec("torch") is not None
    res = _run(sys.executable, "-c", "import sys, reimpl.emulator; assert 'torch' not in sys.modules")
    assert res.returncode == 0, res.stderr


@needs_avx2
def test_the_input_twins_are_torchs_bits():
    """case_inputs against BackwardCase.make_args("cpu"): every dtype and value kind, sizes below 16,
    with a tail past the last 16 and without, transposed, with and without the affine tensors."""
    for dt, kind, shape, transpose in itertools.product(("fp32", "fp16", "bf16", "fp64"), VALUE_KINDS,
                                                         ((1, 7), (2, 37), (4, 8, 6), (65, 33)), (False, True)):
        case = BackwardCase("layer_norm", dt, shape, values=kind, dy_values=kind, seed=len(shape) + transpose,
                            transpose=transpose, weight=kind != "zeros")
        dy, x, _, _, w, b = case.make_args("cpu")
        got = (case_inputs.make_grad_out(case, case.seed + DY_SEED_SALT), *case_inputs.make_inputs(case))
        for name, ref, twin in zip(("grad_out", "x", "weight", "bias"), (dy, x, w, b), got):
            assert (ref is None) == (twin is None), (case.id, name)
            if ref is not None:
                ref = as_storage(ref, dt).reshape(twin.shape)
                assert ref.dtype == twin.dtype and ref.tobytes() == twin.tobytes(), (case.id, name)
