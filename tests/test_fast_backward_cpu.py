"""CPU-only: the host side of the backward's routes for dgamma and dbeta. Its GammaBeta tile
(backward.thread_rows) is the one the mirror's host code launches, for M around every threshold and
on the huge-M partial path; the fused plan takes the rows it is built for; the finish takes the
place of exactly the GammaBeta launch that follows a fused one on the same tensors; elsewhere the
chains kernel and the finish take the place of the GammaBeta launches they are built for, with the
launch shape and copy width the kernel expects; and every kernel compiles for sm_90 without spills."""
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
    monkeypatch.setattr(backward, "MIN_ROW_BYTES", 0)
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
    monkeypatch.setattr(backward, "MIN_ROW_BYTES", 8192)
    assert backward.plan(K.float_, False, True, 4096, 2044, SMS) is None  # rows under MIN_ROW_BYTES
    assert backward.plan(K.float_, False, True, 4096, 2048, SMS) is not None
    assert backward.plan(K.BFloat16, False, True, 4096, 4092, SMS) is None
    assert backward.plan(K.BFloat16, False, True, 4096, 4096, SMS) is not None
    monkeypatch.setattr(backward, "ENABLED", False)
    assert backward.plan(K.float_, False, True, 4096, 4096, SMS) is None  # the route switched off


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("M", [40, 100, 200, 4096])
def test_finish_replaces_the_gamma_beta_launch_that_follows(monkeypatch, op, M):
    """On the mirror's recorded launches: the dX launch becomes the fused kernel with the chains'
    scratch; the GammaBeta launch becomes the finish, reading that scratch and writing torch's
    dgamma and dbeta pointers; a GammaBeta launch on other tensors keeps torch's kernel."""
    monkeypatch.setattr(backward, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(backward, "MIN_ROW_BYTES", 0)
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
    prog = compile_mod.build(backward.SOURCE, "sm_90")  # a cached build keeps its log (compile.build)
    assert "warning" not in prog.log.lower()
    want = {k.expr for k in backward.SOURCE.default_kernels()}
    per_type = (len(backward.REGISTER_VECTORS) + len(backward.THREAD_ROWS)
                + len(backward.CHAIN_STAGES) * len(backward.CHAIN_PIECES))
    assert want == set(prog.lowered) and len(want) == 3 * 2 * per_type


def _gamma_beta(M, N, op="layer_norm", dtype="fp32"):
    return next((k, launch, args) for k, launch, args in _calls(M, N, op, dtype)
                if k.template is K.GammaBetaBackwardCUDAKernelTemplate)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype, M, N", [("fp32", 40, 1024), ("bf16", 100, 770), ("fp16", 200, 64),
                                         ("bf16", 4096, 768), ("fp32", 65536, 1000), ("fp16", 300, 2)])
def test_chains_replace_the_gamma_beta_launches_they_are_built_for(monkeypatch, op, dtype, M, N):
    """On the mirror's recorded GammaBeta launch: the chains kernel (a block per chain row and slab of
    32 words, a warp per column of a word; the ring's depth by the grid's size, both sizes among the
    shapes here) reading torch's dY, X, mean and rstd into the scratch, then
    the finish from the scratch into torch's dgamma and dbeta pointers, with the launch's own Y."""
    monkeypatch.setattr(backward, "CHAINS_MIN_ELEMENTS", 0)
    CHAINS = 0x7F00_0000_2000
    gk, gl, gargs = _gamma_beta(M, N, op, dtype)
    Y = backward.thread_rows(M, N, SMS)
    asked = []
    chains, finish = backward.gamma_beta_launches(gk, gl.grid, gargs, SMS, lambda n: asked.append(n) or CHAINS)
    T = gk.targs[0]
    words = N * K.sizeof(T) // 4
    V = 4 if (N * K.sizeof(T)) % 16 == 0 else 1  # the mirror's stand-in tensors are 16-byte aligned
    blocks = -(-words // 32) * Y
    # the deepest ring where the grid is at most DEEP_RING_BLOCKS_PER_SM blocks an SM
    S = backward.CHAIN_STAGES[-1] if blocks <= backward.DEEP_RING_BLOCKS_PER_SM * SMS else backward.CHAIN_STAGE
    assert chains[0] is backward.CHAINS_TEMPLATE[(T, K.float_, op == "rms_norm", S, V)]
    assert chains[1:4] == ((blocks,), (32 * 4 // K.sizeof(T),), 0)
    assert chains[4] == (*gargs[2:6], N, M, Y, CHAINS)
    assert finish[0] is backward.FINISH_TEMPLATE[(T, K.float_, op == "rms_norm", Y)]
    assert finish[4] == (CHAINS, gargs[6], gargs[7], N)
    assert asked == [2 * Y * N * 4]


def test_chains_leave_the_launches_they_are_not_built_for(monkeypatch):
    monkeypatch.setattr(backward, "CHAINS_MIN_ELEMENTS", 0)
    gk, gl, gargs = _gamma_beta(70000, 64)  # torch's huge-M partial path: partial sums for .sum(0)
    assert gl.grid[1] > 1 and backward.gamma_beta_launches(gk, gl.grid, gargs, SMS, lambda n: 0) is None
    gk, gl, gargs = _gamma_beta(4096, 771, dtype="bf16")  # a 16-bit row of odd length: no 32-bit words
    assert backward.gamma_beta_launches(gk, gl.grid, gargs, SMS, lambda n: 0) is None
    gk, gl, gargs = _gamma_beta(4096, 1024, dtype="bf16")
    M, N, dY, X = gargs[:4]
    assert backward.gamma_beta_launches(gk, gl.grid, (M, N, dY + 2, *gargs[3:]), SMS, lambda n: 0) is None
    four = backward.gamma_beta_launches(gk, gl.grid, (M, N, dY + 4, *gargs[3:]), SMS, lambda n: 0)
    assert four[0][0].targs[-1] == 1  # 4-byte aligned only: copies of a word
    gk, gl, gargs = _gamma_beta(4096, 1024, dtype="fp64")  # double: its chains are double, torch's kernel
    assert backward.gamma_beta_launches(gk, gl.grid, gargs, SMS, lambda n: 0) is None
    gk, gl, gargs = _gamma_beta(512, 8192 + 4)  # a float row past TORCH_TILE_FLOAT_BYTES
    assert backward.gamma_beta_launches(gk, gl.grid, gargs, SMS, lambda n: 0) is None
    gk, gl, gargs = _gamma_beta(512, 8192 + 4, dtype="bf16")  # a 16-bit one takes the chains kernel
    assert backward.gamma_beta_launches(gk, gl.grid, gargs, SMS, lambda n: 0) is not None
    monkeypatch.setattr(backward, "CHAINS_MIN_ELEMENTS", 1 << 22)
    gk, gl, gargs = _gamma_beta(4095, 1024)
    assert backward.gamma_beta_launches(gk, gl.grid, gargs, SMS, lambda n: 0) is None  # under the floor
    gk, gl, gargs = _gamma_beta(4096, 1024)
    assert backward.gamma_beta_launches(gk, gl.grid, gargs, SMS, lambda n: 0) is not None


def test_chains_kernels_use_no_stack_and_fit_their_launch():
    """Each chains kernel: no spills (STACK 0), and its static ring within the 48 KB a launch gets
    without asking for more."""
    from reimpl.upstream.releases import resource_usage
    prog = compile_mod.build(backward.SOURCE, "sm_90")
    found = [f for f in resource_usage(prog.cubin) if "chains_kernel" in f[0]]
    assert len(found) == 3 * 2 * len(backward.CHAIN_STAGES) * len(backward.CHAIN_PIECES)
    for name, _, stack, shared, local in found:
        assert stack == "0" and local == "0" and int(shared) <= 48 * 1024, name
