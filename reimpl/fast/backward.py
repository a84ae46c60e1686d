"""dgamma and dbeta with torch's bits (reimpl/fast/cuda/fast_backward.cu). Two routes, each ending in
the chains' finish kernel:
  fused: dX and the dgamma/dbeta chains in one pass over X and dY. Torch's vectorized grad-input
    launch becomes the fused kernel, and the GammaBetaBackwardCUDAKernelTemplate launch that follows
    it becomes the finish kernel.
  chains: where dX ran in a kernel of its own, the GammaBeta launch becomes the chains kernel (the
    chains alone, spread over every SM) followed by the finish kernel.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..device.compile import CudaSource
from ..device.runtime import dim3
from ..device.kernel_types import KernelTemplate
from ..mirror import kernel_table as K
from . import grad_input

REGISTER_VECTORS = grad_input.REGISTER_VECTORS  # R: the fast dX row's vectors a thread (rows: N <= 512 R)
WARPS = grad_input.THREADS // 32  # warps of a block: torch's 128-thread dX block
CHAIN_UNITS = 2  # fast_backward.cu's CHAIN_UNITS: warp-units (a chain over 32 vectors) a warp holds at most
SLAB = 32 * 4  # columns of a warp-unit: 32 lanes of a vector of 4
THREAD_ROWS = (1, 8, 16, 32)  # Y: thread rows of torch's GammaBeta tiles <32, Y, 8 Y>
MIN_ELEMENTS = 1 << 22  # smaller inputs keep the two-kernel route (see `plan`)
MIN_ROW_BYTES = 8192  # and so do shorter rows: the chains kernel is faster there (see `plan`)
FINISH_THREADS = 256  # the finish kernel's block: a thread a column
ENABLED = True  # False: no fused kernel; every backward takes two kernels (fast dX, then chains or GammaBeta)
CHAIN_REGS = 48  # fast_backward.cu's CHAIN_REGS: registers for the chains' work beside the dX row's
CHAIN_STAGES = (4, 8, 16)  # S: the chains kernel's ring of shared-memory stages, its chain's run of a tile each
CHAIN_STAGE = 4  # the S the plan takes, but for small grids:
DEEP_RING_BLOCKS_PER_SM = 4  # grids of at most this many blocks an SM take the deepest ring (gamma_beta_launches)
CHAIN_PIECES = (1, 4)  # V: 32-bit words a copy moves (4 where a row is whole 16-byte pieces, 16-byte aligned)
CHAINS_MIN_ELEMENTS = 1 << 22  # smaller inputs keep torch's GammaBeta launch (see `gamma_beta_launches`)
TORCH_TILE_FLOAT_BYTES = 32768  # float rows longer than this keep it too (see `gamma_beta_launches`)


def thread_rows(M: int, N: int, sms: int) -> int | None:
    """Y of the GammaBeta tile torch launches for M x N (mirror: LaunchGammaBetaBackwardCUDAKernel),
    None on its huge-M partial path, which ends in torch's .sum(0) and is left to the mirror. The
    finish swap checks the launch it replaces against this Y, so a disagreement costs speed, never
    bits (and tests/test_fast_backward_cpu.py holds the two together)."""
    if M > 64 * 1024 and N // 32 < sms // 2:
        return None
    return 1 if M < 64 else 8 if M < 128 else 16 if M < 256 else 32


@dataclass(frozen=True)
class FusedPlan:
    kernel: object
    grid: tuple
    block: tuple
    shared: int
    Y: int

    def chains_bytes(self, N: int) -> int:
        return 2 * self.Y * N * 4  # dgamma's Y chains, then dbeta's, in float


def resident_blocks(T, R: int) -> int:
    """Blocks an SM holds at least: fast_grad_input.cu's grad_min_blocks with CHAIN_REGS more, which
    the kernel's launch bounds make the compiler fit (the row's R vectors of X and dY in registers,
    40 for the rest of the row, CHAIN_REGS for the chains' work)."""
    regs = 2 * R * K.sizeof(T) + 40 + CHAIN_REGS
    return max(1, min(16, 65536 // (grad_input.THREADS * (-(-regs // 8) * 8))))


def grid_blocks(T, R: int, M: int, N: int, Y: int, sms: int) -> int:
    """The fused kernel's grid: every resident block (the sweep is one wave, so its blocks keep
    pace), no more than the rows, and at least enough warps for the chain units."""
    units = -(-N // SLAB) * Y
    least = -(-units // (WARPS * CHAIN_UNITS))
    return max(least, min(M, sms * resident_blocks(T, R)))


def plan(T, rms: bool, has_gamma: bool, M: int, N: int, sms: int) -> FusedPlan | None:
    """The fused kernel for dX of M x N where a GammaBeta tile <32, Y, 8 Y> may follow, or None.
    Taken with a weight (torch launches GammaBeta for dgamma and dbeta; a call that asks for neither
    still gets dX right, the chains unread), rows of MIN_ROW_BYTES to 512 R elements, and inputs of
    at least MIN_ELEMENTS: below that the call's GPU time is a few microseconds and two kernels are
    as fast. Shorter rows have too few chains to spread (a column's 32 chains, each walking M / 32
    rows in order) for a kernel that also holds a row: measured (results/chains_probe.json), the
    fast dX kernel followed by the chains kernel was the fastest route, or within a few percent of
    it, on rows under 8 KB (float N <= 1536, 16-bit N <= 3072), and the fused kernel from there up."""
    if not ENABLED or not has_gamma or M * N < MIN_ELEMENTS or N * K.sizeof(T) < MIN_ROW_BYTES:
        return None
    Y = thread_rows(M, N, sms)
    R = next((r for r in REGISTER_VECTORS if 512 * r >= N), None)
    if Y is None or R is None:
        return None
    return FusedPlan(FUSED_TEMPLATE[(T, K.float_, rms, R)], (grid_blocks(T, R, M, N, Y, sms),),
                     (grad_input.THREADS,), 0, Y)


def finish_launch(fused, fused_args: tuple, gamma_beta, args: tuple):
    """The finish kernel's launch in place of torch's GammaBeta launch (`gamma_beta` with `args`) that
    follows the fused launch (`fused` with `fused_args`): when it reads the same dY, X, mean, rstd, M
    and N and its tile has the fused launch's Y thread rows; else None (torch's GammaBeta runs)."""
    dY, X, mean, rstd, _, _, N, M, Y, chains = fused_args
    if gamma_beta.targs[3:5] != (Y, 8 * Y) or tuple(args[:6]) != (M, N, dY, X, mean, rstd):
        return None  # another tile, or torch's huge-M partial path (<32, 1, 32>)
    T, _, rms, _ = fused.targs
    dg, db = args[6:8]
    return FINISH_TEMPLATE[(T, K.float_, rms, Y)], (-(-N // FINISH_THREADS),), (FINISH_THREADS,), 0, (chains, dg, db, N)


def gamma_beta_tile(gamma_beta, grid) -> int | None:
    """Y of a GammaBeta launch whose tile <32, Y, 8 Y> reduces each column in one block (grid.y = 1),
    else None (torch's huge-M partial path, whose thread rows write partial sums for .sum(0))."""
    _, _, _, Y, rows, _, _, _ = gamma_beta.targs
    return Y if rows == 8 * Y and dim3(grid)[1] == 1 else None


def gamma_beta_launches(gamma_beta, grid, args: tuple, sms: int, chains) -> list | None:
    """The chains kernel and the finish in place of torch's GammaBeta launch (`gamma_beta` on `grid`
    with `args`), or None (torch's runs). `chains(nbytes)` is the scratch buffer's address. Taken for
    float, half and bfloat16 (float chains; double keeps torch's), tiles that reduce each column in
    one block, X and dY in 32-bit words (16-bit rows of even length, 4-byte aligned), on inputs of
    at least CHAINS_MIN_ELEMENTS, except float rows longer than TORCH_TILE_FLOAT_BYTES: there torch's tile has blocks enough for every SM and its loads from
    registers measured faster on most probed shapes (results/chains_probe.json). The ring has
    CHAIN_STAGE stages, or the most (CHAIN_STAGES[-1]) where the grid has at most
    DEEP_RING_BLOCKS_PER_SM blocks an SM: so few threads hide DRAM's latency only with many tiles in
    flight (measured faster there: 16-bit rows of 768 and 1024), while larger grids need the smaller
    ring to keep more blocks resident."""
    M, N, dY, X, mean, rstd, dg, db = args
    T, T_ACC, _, _, _, _, _, rms = gamma_beta.targs
    Y = gamma_beta_tile(gamma_beta, grid)
    row_bytes = N * K.sizeof(T)
    if (T_ACC is not K.float_ or Y is None or M * N < CHAINS_MIN_ELEMENTS or row_bytes % 4 or dY % 4 or X % 4
            or (K.sizeof(T) == 4 and row_bytes > TORCH_TILE_FLOAT_BYTES)):
        return None
    slabs = -(-(row_bytes // 4) // 32)  # of 32 words
    V = 4 if row_bytes % 16 == 0 and dY % 16 == 0 and X % 16 == 0 else 1
    scratch = chains(2 * Y * N * 4)
    S = CHAIN_STAGES[-1] if slabs * Y <= DEEP_RING_BLOCKS_PER_SM * sms else CHAIN_STAGE
    return [(CHAINS_TEMPLATE[(T, K.float_, rms, S, V)], (slabs * Y,), (32 * 4 // K.sizeof(T),), 0,
             (dY, X, mean, rstd, N, M, Y, scratch)),
            (FINISH_TEMPLATE[(T, K.float_, rms, Y)], (-(-N // FINISH_THREADS),), (FINISH_THREADS,), 0,
             (scratch, dg, db, N))]


def _instantiations() -> list:
    out = []
    for T in (K.float_, K.Half, K.BFloat16):
        for rms in (False, True):
            out += [FUSED_TEMPLATE[(T, K.float_, rms, R)] for R in REGISTER_VECTORS]
            out += [FINISH_TEMPLATE[(T, K.float_, rms, Y)] for Y in THREAD_ROWS]
            out += [CHAINS_TEMPLATE[(T, K.float_, rms, S, V)] for S in CHAIN_STAGES for V in CHAIN_PIECES]
    return out


SOURCE = CudaSource(Path(__file__).parent / "cuda", "fast_backward.cu", lambda: _instantiations(),
                    include_dirs=(K.SOURCE.directory,))
FUSED_TEMPLATE = KernelTemplate("fast_backward_fused_kernel",
                                ("ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "int", "int64", "int", "ptr"),
                                SOURCE, "reimpl_fast")
FINISH_TEMPLATE = KernelTemplate("fast_backward_finish_kernel", ("ptr", "ptr", "ptr", "int"), SOURCE, "reimpl_fast")
CHAINS_TEMPLATE = KernelTemplate("fast_gamma_beta_chains_kernel",
                                 ("ptr", "ptr", "ptr", "ptr", "int", "int64", "int", "ptr"), SOURCE, "reimpl_fast")
