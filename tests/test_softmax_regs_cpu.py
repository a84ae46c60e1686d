"""CPU: the one-read plans (launch.regs_plan). Every width up to the largest cluster's reach gets an
instantiated plan that holds it, the plan's element layout (registers: thread lane of block rank r
holds vectors k * lanes + lane of its share; shared memory: block r stages its share 16 bytes a
copy) covers a row exactly once, the launches the
softmax and cross-entropy launchers make are the plan's, and bad input is refused before any launch."""
import numpy as np
import pytest
import torch

from reimpl.device import runtime
from reimpl.ladder import cross_entropy, softmax
from reimpl.ladder.launch import REGS_CLUSTERS, REGS_MAX_BLOCK, SMEM_MAX, regs_plan, regs_table

WIDTHS = sorted({1, 2, 3, 7, 8, 31, 100, 127, 128, 129, 768, 1000, 1024, 1025, 1536, 4095, 5120, 12288, 32000,
                 50257, 65536, 65537, 128256, 131072, 262143, 262144})


def _elements(plan, N):
    """The element indices each (block rank, thread) holds, as the kernel computes them."""
    if plan.smem:  # block `rank` stages [rank * share, (rank + 1) * share) of the row, 16 bytes a copy
        seen = []
        for rank in range(plan.cluster):
            first = rank * plan.share
            n = min(N - first, plan.share)
            for lane in range(plan.block):
                for i in range(lane * plan.vec, max(n, 0), plan.block * plan.vec):
                    seen += [first + i + j for j in range(plan.vec)]
        return np.array(seen)
    lanes = plan.lanes or plan.block
    chunk = plan.vecs * plan.vec
    seen = []
    for rank in range(plan.cluster):
        first = rank * plan.block * chunk if not plan.lanes else 0
        for lane in range(lanes):
            for k in range(plan.vecs):
                i = (k * lanes + lane) * plan.vec
                for j in range(plan.vec):
                    if i < N - first:
                        seen.append(first + i + j)
    return np.array(seen)


@pytest.mark.parametrize("itemsize", [4, 2])
@pytest.mark.parametrize("N", WIDTHS)
def test_plan_covers_the_row_once(N, itemsize):
    plan = regs_plan(N, itemsize, True)
    assert plan is not None
    if plan.smem:
        assert plan.share * itemsize <= SMEM_MAX and plan.cluster in REGS_CLUSTERS
    else:
        assert plan.targs in regs_table(itemsize)
    assert plan.block <= REGS_MAX_BLOCK and plan.block % 32 == 0
    got = _elements(plan, N)
    assert np.array_equal(np.sort(got), np.arange(N)), (N, plan)
    assert N % plan.vec == 0


def test_plan_is_the_smallest_that_holds_the_row_and_none_past_the_largest():
    assert regs_plan(10**6, 4) is None and regs_plan(10**6, 2) is None  # past what 8 blocks stage
    assert regs_plan(262148, 4).smem and regs_plan(262148, 4, aligned=False) is None
    assert regs_plan(128, 4).lanes == 32 and regs_plan(128, 2).lanes == 16
    assert regs_plan(32768, 4).cluster == 1 and regs_plan(32769, 4).cluster == 2
    assert regs_plan(12288, 2).smem and not regs_plan(12288, 4).smem and not regs_plan(12288, 2, aligned=False).smem
    assert regs_plan(4096, 4, aligned=False).vec == 1 and regs_plan(4096, 4).vec == 4


def _launches(fn):
    with runtime.use(runtime.RecordingRuntime()) as rt:
        fn()
    return [(l.kernel, l.grid, l.block, l.shared) for l in rt.launches]


def test_launches_follow_the_plan():
    assert _launches(lambda: softmax.run("one_read", torch.zeros(5, 262144))) == [
        ("softmax_online_smem<float, float, 4u, 8u>", (40, 1, 1), (256, 1, 1), 131072)]
    assert _launches(lambda: softmax.run("one_read", torch.zeros(5, 8192))) == [
        ("softmax_online_regs<float, float, 4u, 8u, 0u, 1u>", (5, 1, 1), (256, 1, 1), 0)]
    assert _launches(lambda: softmax.run("one_read", torch.zeros(37, 128, dtype=torch.bfloat16))) == [
        ("softmax_online_regs<__nv_bfloat16, float, 8u, 1u, 16u, 1u>", (5, 1, 1), (128, 1, 1), 0)]
    assert _launches(lambda: cross_entropy.loss_and_grad(torch.zeros(4, 50257), torch.zeros(4, dtype=torch.int64))) == [
        ("cross_entropy_regs<float, float, 1u, 64u, 0u, 2u>", (8, 1, 1), (416, 1, 1), 0)]
    assert _launches(lambda: softmax.run("one_read", torch.zeros(2, 10**6))) == [
        ("softmax_online_block<float, float>", (2, 1, 1), (256, 1, 1), 0)]


def test_cross_entropy_refuses_bad_input_before_any_launch():
    x, t = torch.zeros(4, 10), torch.zeros(4, dtype=torch.int64)
    for args, err, msg in [((x[0], t), ValueError, "logits must be 2-D"), ((x, t[:3]), ValueError, "target must be 1-D"),
                           ((x, t.int()), TypeError, "target must be int64"),
                           ((x.double(), t), TypeError, "x must be float32")]:
        with pytest.raises(err, match=msg):
            _launches(lambda: cross_entropy.loss_and_grad(*args))
    with pytest.raises(ValueError, match="reduction must be one of"):
        _launches(lambda: cross_entropy.loss_and_grad(x, t, reduction="none"))
