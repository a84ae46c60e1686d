"""CPU: the fast kernel compiles for sm_90 with torch's numerics and no warnings (including the
mirror's sources it reuses), and its launch plan: one warp per row up to N = 2048, then one
(32, 4) block per row holding its share in registers up to N = 8192 (RMSNorm: 16384), streaming beyond."""
import pytest

from reimpl import kernels as K
from reimpl.device import compile as compile_mod
from reimpl.fast import kernel as F


def test_fast_kernel_compiles_for_sm90_without_warnings():
    prog = compile_mod.build(F.SOURCE, "sm_90", use_cache=False)
    assert prog.log == "", prog.log
    assert len(prog.lowered) == len(F._instantiations()) == 120
    assert "-ftz=false" in compile_mod.compile_options(F.SOURCE, "sm_90")
    assert f"-I{K.SOURCE.directory}" in compile_mod.compile_options(F.SOURCE, "sm_90")


@pytest.mark.parametrize("N,template,targs_tail,grid,block", [
    (4, "fast_layer_norm_warp_kernel", (1, 4), (250,), (32, 4)),
    (768, "fast_layer_norm_warp_kernel", (2, 4), (250,), (32, 4)),
    (2048, "fast_layer_norm_warp_kernel", (4, 4), (250,), (32, 4)),
    (2052, "fast_layer_norm_kernel", (8, 1), (1000,), (32, 4, 1)),
    (8192, "fast_layer_norm_kernel", (16, 1), (1000,), (32, 4, 1)),
    (16384, "fast_layer_norm_kernel", (0, 1), (1000,), (32, 4, 1)),  # LayerNorm keeps at most 16
    (16388, "fast_layer_norm_kernel", (0, 1), (1000,), (32, 4, 1)),
])
def test_plan(N, template, targs_tail, grid, block):
    kernel, g, b = F.plan(K.BFloat16, False, True, True, 1000, N)
    assert kernel.template.name == template and kernel.targs[-2:] == targs_tail
    assert (g, b) == (grid, block)
    assert kernel in F._instantiations()


def test_rms_norm_keeps_up_to_32_vectors():
    kernel, _, _ = F.plan(K.float_, True, True, False, 10, 16384)
    assert kernel.targs[-2:] == (32, 1)


def test_bias_without_weight_stays_with_the_mirror():
    assert not F.takes(has_gamma=False, has_beta=True, rms=False)
    assert F.takes(True, True, False) and F.takes(True, False, False) and F.takes(False, False, False)
    assert F.takes(True, False, True) and F.takes(False, False, True)


def test_reciprocal_table_covers_the_largest_count():
    # torch's vectorized path takes N <= 2^24: a thread's count reaches 4 * ceil(N / 4 / 128)
    assert F.MAX_COUNT >= 4 * -(-(2 ** 24 // 4) // 128)
