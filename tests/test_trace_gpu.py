"""The GPU's step trace equals the emulator's, record for record, bit for bit (NaN by position).

The CUDA mirror built with -DREIMPL_TRACING writes every step (each thread's Welford state after each
online update, each shuffle round with the lane it read, each shared-memory round, the statistics
and the outputs) to a buffer; the emulator records the same steps. Both are compared whole, and the
traced build's outputs must still equal torch's. The backward cases do the same for both grad-input
kernels (their sums, the two BlockReduceSums, dX) and the GammaBeta tiles (column sums per tile, the
shared-memory transpose, the XOR tree, the outputs; the partial path's grid numbered linearly).
"""
import numpy as np
import pytest
import torch

from reimpl import emulator
from reimpl.checks.cases import Case
from reimpl.checks.cases_backward import BackwardCase
from reimpl.emulator import trace
from reimpl.emulator.api import run_backward_case
from tests.conftest import record

pytestmark = pytest.mark.gpu

CASES = [
    # vectorized path: block (32, 4), 2 shared-memory rounds; rows shorter and longer than one stride
    *(Case(op, dt, (3, n), weight=w, bias=b and op == "layer_norm", seed=40 + n)
      for op in ("layer_norm", "rms_norm") for dt in ("fp32", "fp16", "bf16")
      for n, w, b in ((64, True, True), (512, True, False), (1028, False, True), (4096, False, False))),
    # fallback path: RowwiseMoments (512 threads, BlockReduce) then LayerNormForward
    *(Case(op, dt, (2, n), seed=50 + n, x_offset=xo)
      for op in ("layer_norm", "rms_norm") for dt in ("fp32", "fp64", "bf16")
      for n, xo in ((254, 0), (1030, 0), (256, 1))),
    # value kinds through both paths
    *(Case(op, "fp32", (2, n), values=kind, seed=60)
      for op in ("layer_norm", "rms_norm") for kind in ("subnormal", "inf", "nan", "zeros", "large")
      for n in (256, 254)),
    Case("layer_norm", "fp32", (2, 3, 8, 16), norm_ndim=2, seed=70),
]


def _ids(c):
    return c.id


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_gpu_trace_equals_emulator_trace(case):
    from reimpl.checks.gpu_trace import compare, trace_gpu
    (x, w, b), outs, gpu = trace_gpu(case)
    with trace.recording() as tr:
        emulator.run_case(case, *(None if t is None else t.cpu() for t in (x, w, b)))
    emu = tr.records()
    assert len(gpu) > 0 and len(emu) == len(gpu)
    kinds = {trace.KIND_OF[int(c) >> 16] for c in gpu[:, 1]}
    assert ("online" in kinds) or ("reduce" in kinds)
    diff = compare(gpu, emu, double=case.dtype == "fp64")
    record("trace_steps", len(gpu), 0 if diff is None else 1)  # elements = records compared
    assert diff is None, diff
    # tracing must not change the results: the traced build's outputs are torch's
    with torch.no_grad():
        want = case.run_torch(x, w, b)  # the same CUDA views: same alignment, same path
    _assert_bits_equal(outs, want)


def _assert_bits_equal(outs, want):
    for got, ref in zip(outs, want, strict=True):
        assert (got is None) == (ref is None)
        if got is None:
            continue
        g, r = got.reshape(-1), ref.detach().cpu().reshape(-1)
        assert g.dtype == r.dtype and g.shape == r.shape
        nan = torch.isnan(g.float())
        assert torch.equal(nan, torch.isnan(r.float()))
        width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[g.element_size()]
        assert torch.equal(g[~nan].view(width), r[~nan].view(width))


# M picks the GammaBeta tile: < 64 <32,1,8> (no reduction across threads), < 128 <32,8,64>,
# < 256 <32,16,128>, else <32,32,256>; aligned_grid when M % rows_per_block_y == 0 and N % 32 == 0.
# The grad-input kernel is the vectorized one for float/Half/BFloat16 with N % 4 == 0 and aligned
# buffers, else the plain one. Traces stay small: rows past ~64 mostly leave dX out of the mask.
LN, RMS = "layer_norm", "rms_norm"
BWD_CASES = [
    # grad-input kernels (M < 64: tile <32,1,8>, each thread writes its own column sum)
    BackwardCase(LN, "fp32", (4, 1024), seed=80),                                   # vectorized; <32,1,8> unaligned
    BackwardCase(LN, "fp32", (5, 1022), seed=81),                                   # plain (N % 4); check_x block
    BackwardCase(LN, "fp16", (8, 64), seed=82),                                     # vectorized; <32,1,8> aligned
    BackwardCase(LN, "fp16", (3, 260), x_offset=1, seed=83),                        # plain (X misaligned)
    BackwardCase(RMS, "bf16", (3, 512), bias=False, mask=(True, True, False), seed=84),                # vectorized
    BackwardCase(RMS, "bf16", (3, 512), bias=False, mask=(True, True, False), dy_offset=1, seed=85),  # plain (dY)
    BackwardCase(LN, "fp64", (3, 256), seed=86),                                    # double: always the plain kernel
    BackwardCase(RMS, "fp64", (3, 130), bias=False, mask=(True, True, False), seed=87),               # plain, double
    BackwardCase(LN, "fp32", (4, 384), weight=False, bias=False, mask=(True, False, False), seed=88),  # no gamma
    BackwardCase(RMS, "fp32", (2, 200), weight=False, bias=False, mask=(True, False, False), seed=89),
    BackwardCase(LN, "bf16", (60, 33), seed=90),                                    # <32,1,8>: 8 tiles, last partial
    # GammaBeta tiles <32,8,64>, <32,16,128>, <32,32,256>: aligned and unaligned grids
    BackwardCase(LN, "fp32", (64, 64), mask=(False, True, True), seed=91),          # <32,8,64> aligned
    BackwardCase(LN, "fp32", (70, 33), seed=92),                                    # <32,8,64> unaligned, with dX
    BackwardCase(RMS, "fp16", (100, 33), bias=False, mask=(False, True, False), seed=93),
    BackwardCase(LN, "bf16", (128, 64), mask=(False, True, True), seed=94),         # <32,16,128> aligned
    BackwardCase(LN, "fp16", (200, 40), mask=(False, True, True), seed=95),         # <32,16,128> unaligned
    BackwardCase(LN, "fp64", (130, 40), mask=(False, True, True), seed=96),
    BackwardCase(LN, "fp32", (256, 32), mask=(False, True, True), seed=97),         # <32,32,256> aligned
    BackwardCase(LN, "fp32", (300, 50), mask=(False, True, True), seed=98),         # <32,32,256>: 2 tiles, unaligned
    BackwardCase(RMS, "bf16", (256, 64), bias=False, mask=(False, True, False), seed=99),
    BackwardCase(RMS, "fp64", (260, 33), bias=False, mask=(False, True, False), seed=100),
    # output masks
    BackwardCase(LN, "fp32", (70, 40), mask=(True, False, True), seed=101),         # dbeta without dgamma
    BackwardCase(LN, "bf16", (300, 40), mask=(False, True, False), seed=102),       # dgamma alone
    BackwardCase(LN, "fp16", (40, 96), mask=(True, False, False), seed=103),        # dX alone
    # NaN and inf
    BackwardCase(LN, "fp32", (70, 40), values="nan", seed=104),
    BackwardCase(RMS, "fp32", (6, 252), bias=False, mask=(True, True, False), dy_values="inf", seed=105),
    BackwardCase(LN, "fp16", (130, 33), mask=(False, True, True), dy_values="nan", seed=106),
    # partial path (grid.y = 2049): blocks are numbered blockIdx.x + blockIdx.y * gridDim.x
    BackwardCase(RMS, "bf16", (65537, 8), bias=False, mask=(False, True, False), seed=107),
]


def _trace_gpu_backward(case: BackwardCase):
    """(the CUDA arguments, the outputs on the CPU, the GPU's records), the op run with tracing on."""
    from reimpl.device import runtime
    from reimpl.checks.gpu_trace import TracingRuntime
    args = case.make_args("cuda")        # torch's own forward makes mean and rstd, outside the trace
    rt = TracingRuntime()
    with runtime.use(rt):
        rt.start()
        with torch.no_grad():
            outs = case.run_ours(*args)
        rec = rt.records()
    return args, [None if o is None else o.detach().cpu() for o in outs], rec


@pytest.mark.parametrize("case", BWD_CASES, ids=_ids)
def test_gpu_backward_trace_equals_emulator_trace(case):
    from reimpl.checks.gpu_trace import compare
    args, outs, gpu = _trace_gpu_backward(case)
    with trace.recording() as tr:
        run_backward_case(case, *(None if t is None else t.cpu() for t in args))
    emu = tr.records()
    assert len(gpu) > 0 and len(emu) == len(gpu)
    kinds = {trace.KIND_OF[int(c) >> 16] for c in np.unique(gpu[:, 1])}
    if case.output_mask[0]:
        assert {"gi_sums", "sum_shfl_down", "sum_smem_write", "sum_smem_read", "gi_stats", "gi_dx"} <= kinds
    if any(case.output_mask[1:]):
        assert {"gb_sums", "gb_out"} <= kinds
    diff = compare(gpu, emu, double=case.dtype == "fp64")
    record("bwd_trace_steps", len(gpu), 0 if diff is None else 1)  # elements = records compared
    assert diff is None, diff
    # tracing must not change the results: the traced build's outputs are torch's
    with torch.no_grad():
        want = case.run_torch(*args)
    _assert_bits_equal(outs, want)
