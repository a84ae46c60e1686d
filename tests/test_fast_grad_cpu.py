"""CPU: the fast grad-input kernels (reimpl/fast/cuda/fast_grad_input.cu) compile for sm_90 with
torch's numerics and no warnings, with at most a few spilled words; and their launch plan: one warp
per row below N = 512, then one 128-thread block per row holding the row in registers (and from
N = 8196 partly in shared memory) up to N = 16384, streaming beyond."""
import itertools

import pytest

from reimpl.mirror import kernel_table as K
from reimpl.device import compile as compile_mod
from reimpl.fast import grad_input as G

COMBOS = 3 * 2 * 2  # dtype, LayerNorm/RMSNorm, weight or not
SHAPES = 1 + 5 + 1 + 1  # warp kernel; block R = 1, 2, 4, 8, 16; the shared-memory split; streaming


def test_fast_grad_kernels_compile_for_sm90_without_warnings():
    prog = compile_mod.build(G.SOURCE, "sm_90")  # a cached build keeps its log (compile.build)
    assert prog.log == "", prog.log
    assert len(prog.lowered) == len(G._instantiations()) == len(set(G._instantiations())) == COMBOS * SHAPES
    assert "-ftz=false" in compile_mod.compile_options(G.SOURCE, "sm_90")


@pytest.mark.parametrize("T,N,template,tail,grid,block,shared", [
    (K.float_, 4, "fast_grad_input_warp_kernel", (1, 4), (250,), (32, 4), 0),
    (K.float_, 508, "fast_grad_input_warp_kernel", (1, 4), (250,), (32, 4), 0),
    (K.float_, 512, "fast_grad_input_kernel", (1, 0), (1000,), (128,), 0),
    (K.float_, 516, "fast_grad_input_kernel", (2, 0), (1000,), (128,), 0),
    (K.float_, 1024, "fast_grad_input_kernel", (2, 0), (1000,), (128,), 0),
    (K.float_, 2048, "fast_grad_input_kernel", (4, 0), (1000,), (128,), 0),
    (K.float_, 2052, "fast_grad_input_kernel", (8, 0), (1000,), (128,), 0),
    (K.float_, 8192, "fast_grad_input_kernel", (16, 0), (1000,), (128,), 0),
    (K.float_, 8196, "fast_grad_input_kernel", (12, 20), (1000,), (128,), 80 * 1024),
    (K.float_, 16384, "fast_grad_input_kernel", (12, 20), (1000,), (128,), 80 * 1024),
    (K.BFloat16, 16384, "fast_grad_input_kernel", (16, 16), (1000,), (128,), 32 * 1024),
    (K.Half, 12288, "fast_grad_input_kernel", (16, 16), (1000,), (128,), 32 * 1024),
    (K.float_, 16388, "fast_grad_input_kernel", (0, 0), (1000,), (128,), 0),
    (K.BFloat16, 65536, "fast_grad_input_kernel", (0, 0), (1000,), (128,), 0),
])
def test_plan(T, N, template, tail, grid, block, shared):
    kernel, g, b, s = G.plan(T, False, True, 1000, N)
    assert (kernel.template.name, kernel.targs[-2:], g, b, s) == (template, tail, grid, block, shared)
    assert kernel.targs[:4] == (T, K.float_, False, True)


def test_every_plan_is_instantiated_and_fits_shared_memory():
    for T, N, rms, g in itertools.product((K.float_, K.Half, K.BFloat16), range(4, 20000, 4), (False, True),
                                          (False, True)):
        kernel, _, _, shared = G.plan(T, rms, g, 7, N)
        assert kernel in G._instantiations(), (T, N, rms, g)
        assert shared <= 227 * 1024  # the H100's opt-in limit per block


def test_every_thread_fills_at_least_half_its_slots():
    """The kernels read the first half of a thread's slots (RW / 2, or (R + RS) / 2) without a bounds
    check: right only if the plan's slots hold a thread's share and every thread of torch's 128,
    the last included, has at least half of them filled."""
    for T, N in itertools.product((K.float_, K.BFloat16), range(4, 65540, 4)):
        kernel, _, _, _ = G.plan(T, False, True, 1, N)
        n_vec = N // 4
        if kernel.template is G.WARP_TEMPLATE:
            slots = kernel.targs[-2]
        else:
            slots = kernel.targs[-2] + kernel.targs[-1]
            if slots == 0:  # streams: no slots
                assert n_vec > 32 * G.THREADS
                continue
        assert slots >= -(-n_vec // G.THREADS), (N, slots)
        assert slots // 2 <= n_vec // G.THREADS, (N, slots)


def test_registers_spill_at_most_a_few_words():
    """The row-holding kernels stay within their __launch_bounds__ register figure. Six instances
    keep a small stack frame (fp32 R = 16 and the split with a weight, bf16's split with a weight),
    at most 80 bytes a thread; they measured 88-101% of copy (results/fast_grad_bench.json)."""
    from reimpl.upstream.releases import resource_usage
    prog = compile_mod.build(G.SOURCE, "sm_90")
    found = [(name, reg, stack, local) for name, reg, stack, _, local in resource_usage(prog.cubin)]
    assert len(found) == COMBOS * SHAPES
    stacked = [n for n, _, stack, _ in found if stack != "0"]
    assert all(int(stack) <= 80 and local == "0" for _, _, stack, local in found), found
    assert len(stacked) <= 6, stacked
    assert all(int(reg) <= 168 for _, reg, _, _ in found)
