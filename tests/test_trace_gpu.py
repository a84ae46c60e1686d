"""The GPU's step trace equals the emulator's, record for record, bit for bit (NaN by position).

The CUDA mirror built with -DREIMPL_TRACING writes every step (each thread's Welford state after each
online update, each shuffle round with the lane it read, each shared-memory round, the statistics
and the outputs) to a buffer; the emulator records the same steps. Both are compared whole, and the
traced build's outputs must still equal torch's.
"""
import numpy as np
import pytest
import torch

from reimpl import emulator
from reimpl.cases import Case
from reimpl.emulator import trace
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
    from reimpl.gpu_trace import compare, trace_gpu
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
    for got, ref in zip(outs, want):
        g, r = got.reshape(-1), ref.detach().cpu().reshape(-1)
        nan = torch.isnan(g.float())
        assert torch.equal(nan, torch.isnan(r.float()))
        width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[g.element_size()]
        assert torch.equal(g[~nan].view(width), r[~nan].view(width))
