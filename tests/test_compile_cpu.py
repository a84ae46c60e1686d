"""CPU-only: every CUDA source compiles for sm_90 through NVRTC, warning-free, and the kernels it
instantiates have exactly the signatures of torch 2.11's own (demangled names from libtorch_cuda.so)."""
from pathlib import Path

import pytest

from reimpl.device import compile as compile_mod
from reimpl.device import cubin
from reimpl.mirror.kernel_table import SOURCE, all_instantiations

REFERENCE = Path(__file__).resolve().parents[1] / "reference"


@pytest.fixture(scope="module")
def program():
    return compile_mod.build(SOURCE, "sm_90")  # a cached build keeps its log (compile.build)


def test_compiles_for_sm90_without_warnings(program):
    assert program.cubin[:4] == b"\x7fELF"
    assert program.log == "", "NVRTC printed diagnostics (warnings count as errors):\n" + program.log


def test_numerics_options_exclude_flush_to_zero():
    opts = compile_mod.compile_options(SOURCE, "sm_90")
    assert "-ftz=false" in opts and "-prec-div=true" in opts and "-fmad=true" in opts
    assert not any(o.startswith("--use_fast_math") or o == "-ftz=true" for o in opts)


def test_every_instantiation_has_a_symbol(program):
    exprs = {k.expr for k in all_instantiations()}
    assert set(program.lowered) == exprs
    assert all(v.startswith("_ZN2at6native") for v in program.lowered.values())


def _torch_signatures() -> set[str]:
    """Every kernel libtorch_cuda.so (2.11.0+cu130) holds from layer_norm_kernel.cu, demangled."""
    mangled = [l.strip() for l in (REFERENCE / "torch_kernel_symbols.txt").read_text().splitlines()
               if l.startswith("_Z") and "layer_norm_kernel_cu" in l]
    return {n for n in cubin.demangle(mangled) if n.startswith("void at::native::")}  # kernels, not cuda::std objects


def test_signatures_equal_torch_2_11(program):
    # forward 24 (3 kernels x 4 dtypes x rms_norm) + backward 160 (2 grad-input kernels x 8, and
    # 18 GammaBeta <tile, partial_reduction, aligned_grid> combinations x 8)
    ours = set(cubin.demangle(list(program.lowered.values())))
    theirs = _torch_signatures()
    assert len(theirs) == 184
    assert ours == theirs


def test_static_shared_memory_matches_profiler_records(program):
    # torch's profiler reported 768 B (float) and 1024 B (double) for RowwiseMomentsCUDAKernel:
    # 32 WelfordData<T_ACC, int64_t> of 24 and 32 bytes.
    ss = cubin.static_shared_bytes(program.cubin)
    by_name = dict(zip(cubin.demangle(list(program.lowered.values())), program.lowered.values()))
    rowwise = {n: ss[m] for n, m in by_name.items() if "RowwiseMomentsCUDAKernel<" in n}
    assert all(v == (1024 if "<double" in n else 768) for n, v in rowwise.items()), rowwise
    others = {n: ss.get(m, 0) for n, m in by_name.items() if "RowwiseMomentsCUDAKernel<" not in n}
    assert set(others.values()) == {0}


def test_a_cached_build_keeps_the_compilers_log(tmp_path, monkeypatch):
    """The no-warning tests read a build's log from the cache where it is there: the cache keeps the
    log of the compile it holds, and a change to any file of the tree compiles afresh."""
    monkeypatch.setenv("REIMPL_CACHE_DIR", str(tmp_path / "cache"))
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    (src_dir / "k.cu").write_text('#warning "a line for the log"\nextern "C" __global__ void k(float* p) { p[0] = 1.f; }\n')
    (src_dir / "h.cuh").write_text("// an include\n")
    source = compile_mod.CudaSource(src_dir, "k.cu", lambda: [])
    fresh = compile_mod.build(source, "sm_90")
    assert "a line for the log" in fresh.log and not fresh.from_cache
    again = compile_mod.build(source, "sm_90")
    assert again.from_cache and again.log == fresh.log and again.cubin == fresh.cubin
    (src_dir / "h.cuh").write_text("// another include\n")
    assert not compile_mod.build(source, "sm_90").from_cache
