"""CPU-only: the fused backward route's host side. Its GammaBeta tile (backward.thread_rows) is the
one the mirror's host code launches, for M around every threshold and on the huge-M partial path;
its plan takes the rows it is built for; the finish takes the place of exactly the GammaBeta launch
that follows a fused one on the same tensors; and every kernel compiles for sm_90."""
import pytest

from reimpl.checks.cases_backward import BackwardCase
from reimpl.device import compile as compile_mod, runtime
from reimpl.fast import backward
from reimpl.fast.runtime import swap
from reimpl.mirror import kernel_table as K

SMS = 132  # the recording runtime's device (H100 properties)


def _calls(M, N, op="layer_norm", dtype="fp32"):
    """(kernel, launch, args) of each launch the mirror makes for the backward of M x N."""
    case = BackwardCase(op, dtype, (M, N), bias=op == "layer_norm")
    args = case.make_args("cpu", values=False)
    with runtime.use(runtime.RecordingRuntime()) as rt:
        case.run_host(*args)
    return rt.calls


SHAPES = [(M, N) for M in (1, 7, 8, 63, 64, 65, 127, 128, 129, 255, 256, 257, 5000) for N in (64, 1024, 4096)] + \
    [(65536, 64), (65537, 64), (65537, 2112), (65537, 4224)]  # around the partial path (M > 65536, N < 2112)


@pytest.mark.parametrize("M, N", SHAPES)
def test_thread_rows_is_the_tile_the_mirror_launches(M, N):
    gb = [(k, launch) for k, launch, _ in _calls(M, N) if k.template is K.GammaBetaBackwardCUDAKernelTemplate]
    assert len(gb) == 1
    kernel, launch = gb[0]
    _, _, _, block_y, rows, partial, _, _ = kernel.targs
    Y = backward.thread_rows(M, N, SMS)
    if Y is None:
        assert (block_y, rows) == (1, 32) and launch.grid[1] > 1  # the huge-M partial path
    else:
        assert (block_y, rows) == (Y, 8 * Y)


def test_plan_takes_the_rows_it_is_built_for(monkeypatch):
    assert backward.ENABLED  # on by default
    assert backward.plan(K.float_, False, True, 64, 4096, SMS) is None  # under MIN_ELEMENTS
    monkeypatch.setattr(backward, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(backward, "MIN_WIDTH", 0)
    # bf16 blocks an SM by registers (2 R * 2 bytes + 88, rounded up to 8): 5 for R <= 2, 4 for 4 and 8,
    # 3 for 16; the grid is every resident block of the 132 SMs
    for N, R, blocks in ((4, 1, 660), (512, 1, 660), (516, 2, 660), (2048, 4, 528), (2052, 8, 528), (4096, 8, 528),
                         (8192, 16, 396)):
        p = backward.plan(K.BFloat16, False, True, 4096, N, SMS)
        assert p.kernel.targs == (K.BFloat16, K.float_, False, R)
        assert p.block == (128,) and p.grid == (blocks,) and p.shared == 0 and p.Y == 32
    # fewer rows than resident blocks: a block a row
    assert backward.plan(K.float_, False, True, 300, 1024, SMS).grid == (300,)
    # fewer resident blocks than the chains need (8 SMs of 2 fp32 R = 16 blocks; N = 8192 has 64 slabs
    # x 32 chains = 2048 warp-units, two a warp, four warps a block): 256 blocks
    assert backward.plan(K.float_, False, True, 4096, 8192, 8).grid == (256,)
    assert backward.plan(K.float_, False, True, 4096, 8196, SMS) is None  # longer than 512 R
    assert backward.plan(K.float_, False, False, 4096, 4096, SMS) is None  # no weight
    assert backward.plan(K.float_, False, True, 70000, 1024, SMS) is None  # torch's partial path
    monkeypatch.setattr(backward, "MIN_WIDTH", 1536)
    assert backward.plan(K.float_, False, True, 4096, 1532, SMS) is None  # narrower than MIN_WIDTH
    assert backward.plan(K.float_, False, True, 4096, 1536, SMS) is not None
    monkeypatch.setattr(backward, "ENABLED", False)
    assert backward.plan(K.float_, False, True, 4096, 4096, SMS) is None  # the route switched off


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("M", [40, 100, 200, 4096])
def test_finish_replaces_the_gamma_beta_launch_that_follows(monkeypatch, op, M):
    """On the mirror's recorded launches: the dX launch becomes the fused kernel with the chains'
    scratch; the GammaBeta launch becomes the finish, reading that scratch and writing torch's
    dgamma and dbeta pointers; a GammaBeta launch on other tensors keeps torch's kernel."""
    monkeypatch.setattr(backward, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(backward, "MIN_WIDTH", 0)
    N, CHAINS = 1024, 0x7F00_0000_2000
    (dk, dl, dargs), (gk, _, gargs) = _calls(M, N, op)
    assert dk.template is K.layer_norm_grad_input_kernel_vectorized
    fused = swap(dk, dl.grid, dl.block, dl.shared, dargs, SMS, lambda nbytes: CHAINS)
    assert fused[0].template is backward.FUSED_TEMPLATE and fused[4][-1] == CHAINS
    Y = fused[4][-2]
    assert Y == backward.thread_rows(M, N, SMS) == gk.targs[3]
    finish = backward.finish_launch(fused[0], fused[4], gk, gargs)
    assert finish[0] is backward.FINISH_TEMPLATE[(K.float_, K.float_, op == "rms_norm", Y)]
    assert finish[4] == (CHAINS, gargs[6], gargs[7], N)
    other = (gargs[0], gargs[1], gargs[2] + 4096, *gargs[3:])
    assert backward.finish_launch(fused[0], fused[4], gk, other) is None


def test_fused_kernels_compile_for_sm90_without_warnings():
    prog = compile_mod.build(backward.SOURCE, "sm_90", use_cache=False)
    assert "warning" not in prog.log.lower()
    want = {k.expr for k in backward.SOURCE.default_kernels()}
    assert want == set(prog.lowered) and len(want) == 3 * 2 * (len(backward.REGISTER_VECTORS) + len(backward.THREAD_ROWS))
