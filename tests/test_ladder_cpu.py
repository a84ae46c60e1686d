"""CPU: the ladder's CUDA compiles for sm_90 through the mirror's NVRTC path with no warnings, every
rung has a kernel for each storage type, and the launcher picks each rung's fallback where its
condition fails (checked on a RecordingRuntime, which needs no GPU)."""
import pytest
import torch

from reimpl.device import compile as compile_mod, runtime
from reimpl.ladder import accuracy, rungs


def test_ladder_compiles_for_sm90_without_warnings():
    prog = compile_mod.build(rungs.SOURCE, "sm_90", use_cache=False)
    assert prog.log == "", prog.log
    assert len(prog.lowered) == len(rungs._instantiations()) == 3 * 8


def _launched(name, M, N, dtype=torch.float32, offset=0):
    x = torch.zeros(M * N + offset, dtype=dtype)[offset:].view(M, N)
    w = torch.ones(N, dtype=dtype)
    with runtime.use(runtime.RecordingRuntime()) as rt:
        rungs.run(name, x, w, None if rungs.RUNGS[name].rms_norm else w, 1e-5)
    return rt.launches


@pytest.mark.parametrize("name,M,N,dtype,offset,kernel,grid,block,smem", [
    ("naive", 300, 10, torch.float32, 0, "ln_naive_two_pass<float, float>", (3, 1, 1), (128, 1, 1), 0),
    ("warp_sums", 37, 768, torch.float32, 0, "ln_warp_sums<float, float, false>", (10, 1, 1), (128, 1, 1), 0),
    ("block_cached", 5, 1000, torch.bfloat16, 0, "ln_block_cached<__nv_bfloat16, float>", (5, 1, 1),
     (256, 1, 1), 2000),
    # 12288 floats (48 KiB) plus the 384 static bytes exceed the default limit: block_welford
    ("block_cached", 5, 12288, torch.float32, 0, "ln_block_welford<float, float>", (5, 1, 1), (256, 1, 1), 0),
    ("block_vec", 5, 1024, torch.float16, 0, "ln_block_vec<__half, float>", (5, 1, 1), (256, 1, 1), 2048),
    # a row start not 16-byte aligned: the vector rung falls back to the scalar cached one
    ("block_vec", 5, 1024, torch.float32, 1, "ln_block_cached<float, float>", (5, 1, 1), (256, 1, 1), 4096),
    ("block_vec", 5, 1000, torch.float16, 0, "ln_block_vec<__half, float>", (5, 1, 1), (256, 1, 1), 2000),
    ("apex", 70000, 64, torch.float32, 0, "ln_apex<float, float>", (1, 65535, 1), (32, 4, 1), 0),
    ("rms_warp_sumsq", 8, 64, torch.float32, 0, "ln_warp_sums<float, float, true>", (2, 1, 1), (128, 1, 1), 0),
])
def test_launch_configuration_and_fallbacks(name, M, N, dtype, offset, kernel, grid, block, smem):
    (launch,) = _launched(name, M, N, dtype, offset)
    assert (launch.kernel, launch.grid, launch.block, launch.shared) == (kernel, grid, block, smem)


def test_every_rung_and_family_has_a_stated_bound():
    from reimpl.checks.ladder_errors import FAMILIES
    for rung in rungs.RUNGS:
        for dtype in accuracy.STORAGE_ROUNDING:
            for family in FAMILIES:
                limit, why = accuracy.bound(rung, dtype, family)
                assert limit > 0 and why
