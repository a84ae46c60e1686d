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
from reimpl.ladder.launch import REGS_CLUSTERS, REGS_MAX_BLOCK, REGS_WARP_MOST, SMEM_MAX, WIDE_CLUSTER, regs_plan, regs_table

WIDTHS = sorted({1, 2, 3, 7, 8, 31, 100, 127, 128, 129, 768, 1000, 1024, 1025, 1536, 4095, 5120, 12288, 32000,
                 50257, 65536, 65537, 128256, 131072, 262143, 262144})


def _elements(plan, N, lead):
    """The row elements each (block rank, thread) holds, as the kernel computes them, for a row whose
    first element sits `lead` elements into a 16-byte word: block `rank` holds window positions
    [rank * S, (rank + 1) * S), thread `lane` the words k * lanes + lane (registers) or lane, lane +
    lanes, ... (shared memory), and position q is element q - lead."""
    lanes = plan.lanes or plan.block
    S = plan.share if plan.smem else lanes * plan.vecs * plan.vec
    seen, words = [], []
    for rank in range(plan.cluster):
        first = rank * S - lead
        for lane in range(lanes):
            if plan.smem:
                ps = range(lane * plan.vec, min(S, N - first), lanes * plan.vec)
            else:
                ps = [(k * lanes + lane) * plan.vec for k in range(plan.vecs)]
            for p in ps:
                held = [first + p + j for j in range(plan.vec) if 0 <= first + p + j < N]
                seen += held
                words += [first + p + lead] if held else []
    return np.array(seen), np.array(words)


@pytest.mark.parametrize("itemsize", [4, 2])
@pytest.mark.parametrize("N", WIDTHS)
def test_plan_covers_the_row_once(N, itemsize):
    plan = regs_plan(N, itemsize, True)
    assert plan is not None
    if plan.smem:
        assert plan.share * itemsize <= SMEM_MAX and plan.cluster in REGS_CLUSTERS and plan.share % plan.vec == 0
    else:
        assert plan.targs in regs_table(itemsize)
    assert plan.block <= REGS_MAX_BLOCK and plan.block % 32 == 0
    for lead in range(plan.vec if N % plan.vec else 1):  # where in a word a row may start
        got, words = _elements(plan, N, lead)
        assert np.array_equal(np.sort(got), np.arange(N)), (N, lead, plan)
        assert (words % plan.vec == 0).all()  # every load is of a whole 16-byte word


def test_plan_is_the_smallest_that_holds_the_row_and_none_past_the_largest():
    assert regs_plan(10**6, 4) is None and regs_plan(10**6, 2) is None  # past what 8 blocks stage
    reach = WIDE_CLUSTER * REGS_MAX_BLOCK * 64  # 16 blocks of 512 threads at 64 elements each
    assert regs_plan(reach, 4).cluster == WIDE_CLUSTER and not regs_plan(reach, 4).smem
    assert regs_plan(reach + 4, 4) is None and regs_plan(reach + 8, 2).smem  # float32 stages no more
    for N, itemsize in [(128, 4), (128, 2), (200, 4), (512, 2)]:  # the fewest lanes at most REGS_WARP_MOST words
        p = regs_plan(N, itemsize)
        assert p.vecs <= REGS_WARP_MOST[itemsize] and p.lanes * p.vecs * p.vec >= N
        assert p.lanes == 4 or -(-N // (p.lanes // 2 * p.vec)) > REGS_WARP_MOST[itemsize]
    assert regs_plan(8192, 4).cluster == 1 and regs_plan(8196, 4).cluster == 2  # one block of 256 first
    assert regs_plan(8192, 2).cluster == 1 and regs_plan(8200, 2).cluster == 2  # 16-bit rows too
    assert not regs_plan(262144, 2).smem and not regs_plan(262144, 2, aligned=False).smem
    assert regs_plan(4096, 4, aligned=False).vec == 1 and regs_plan(4096, 4).vec == 4
    assert regs_plan(50257, 2).vec == 8  # rows off the word boundary still take 16-byte words


def _launches(fn):
    with runtime.use(runtime.RecordingRuntime()) as rt:
        fn()
    return [(l.kernel, l.grid, l.block, l.shared) for l in rt.launches]


def test_launches_follow_the_plan():
    assert _launches(lambda: softmax.run("one_read", torch.zeros(5, 262144))) == [
        ("softmax_online_regs<float, float, 4u, 16u, 0u, 16u, true>", (80, 1, 1), (256, 1, 1), 0)]
    assert _launches(lambda: softmax.run("one_read", torch.zeros(5, 262148))) == [
        ("softmax_online_regs<float, float, 4u, 16u, 0u, 16u, true>", (80, 1, 1), (288, 1, 1), 0)]
    assert _launches(lambda: softmax.run("one_read", torch.zeros(5, 600000, dtype=torch.bfloat16))) == [
        ("softmax_online_smem<__nv_bfloat16, float, 8u, 8u>", (40, 1, 1), (512, 1, 1), 150000)]
    assert _launches(lambda: softmax.run("one_read", torch.zeros(5, 8192))) == [
        ("softmax_online_regs<float, float, 4u, 8u, 0u, 1u, true>", (5, 1, 1), (256, 1, 1), 0)]
    assert _launches(lambda: softmax.run("one_read", torch.zeros(37, 128, dtype=torch.bfloat16))) == [
        ("softmax_online_regs<__nv_bfloat16, float, 8u, 4u, 4u, 1u, true>", (2, 1, 1), (128, 1, 1), 0)]
    assert _launches(lambda: cross_entropy.loss_and_grad(torch.zeros(4, 50257), torch.zeros(4, dtype=torch.int64))) == [
        ("cross_entropy_smem<float, float, 4u, 4u>", (16, 1, 1), (512, 1, 1), 12568 * 4)]
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


def test_cross_entropy_past_the_scalar_plans_copies_to_words_and_past_every_plan_refuses():
    """Logits off the 16-byte boundary whose rows the scalar plans cannot hold are copied to an aligned
    buffer and take 16-byte words; rows longer than any plan holds are refused before any launch."""
    N = 16 * 512 * 32 + 8  # one word past what 16 blocks of 512 threads hold at 32 scalars each
    base = torch.zeros(2 * N + 1, dtype=torch.bfloat16)
    x = base[1:].view(2, N)
    assert regs_plan(N, 2, softmax.aligned(x)) is None and regs_plan(N, 2, True) is not None
    ((kernel, *_),) = _launches(lambda: cross_entropy.loss_and_grad(x, torch.zeros(2, dtype=torch.int64)))
    assert kernel.startswith("cross_entropy_regs<__nv_bfloat16, float, 8u,"), kernel
    with runtime.use(runtime.RecordingRuntime()) as rt:
        with pytest.raises(ValueError, match="logits' rows of 1000000 classes are longer"):
            cross_entropy.loss_and_grad(torch.zeros(2, 10**6), torch.zeros(2, dtype=torch.int64))
    assert rt.launches == []


def test_row_layout_constants_match_the_launcher():
    """row.cuh's block sizes are launch.py's: the kernels' __launch_bounds__ and the plans agree."""
    import re
    from reimpl.ladder import launch
    src = (launch.ROOT / "reimpl/ladder/cuda/row.cuh").read_text()
    for name in ("REGS_MAX_BLOCK", "REGS_WARP_BLOCK"):
        assert int(re.search(rf"constexpr unsigned {name} = (\d+);", src).group(1)) == getattr(launch, name)


def _probe_name(plan) -> str:
    """The name scripts/gpu/softmax_plans.py gives a plan."""
    if plan.smem:
        return f"smem_c{plan.cluster}_b{plan.block}"
    if plan.lanes:
        return f"warp_l{plan.lanes}_v{plan.vecs}"
    return f"regs_ept{plan.vecs * plan.vec}_c{plan.cluster}_b{plan.block}"


def test_regs_plan_picks_a_fastest_probed_plan():
    """At every width of the committed probe (results/softmax_plans.json, pipelined), the plan
    regs_plan picks now was timed there and came within 3 points of copy bandwidth of the fastest
    (KNOWN_GAPS: where it may trail by more, and why)."""
    import json
    from pathlib import Path
    rows = json.loads((Path(__file__).resolve().parents[1] / "results" / "softmax_plans.json").read_text())["rows"]
    cells: dict = {}
    for r in rows:
        if r["method"] == "pipelined" and r["plan"] not in ("copy", "default"):
            cells.setdefault((r["dtype"], r["N"]), {})[r["plan"]] = r["pct_copy"]
    assert len(cells) >= 40
    for (dtype, N), pct in cells.items():
        name = _probe_name(regs_plan(N, 4 if dtype == "fp32" else 2))
        gap = KNOWN_GAPS.get((dtype, N), 3)
        assert name in pct and pct[name] >= max(pct.values()) - gap, (dtype, N, name, pct.get(name), max(pct.values()))


# The one probed width where the plan trails the fastest by more than 3 points, and by how much it may:
# float32 rows of 100000 (336 rows), 87% of a copy in the registers of 8 blocks of 224 threads, 92%
# staged in shared memory, where rows of 65536, 128256 and 131072 are faster in registers; not
# explained by a profile yet.
KNOWN_GAPS = {("fp32", 100000): 6}


def test_register_caps_are_the_faster_settings_of_the_probe():
    """softmax.cu's register caps for 64 elements a thread (80 for 16-bit rows, 128 for float32 rows
    of up to 8 blocks, 80 for float32 rows of 16) are, for the plans each applies to, the faster of
    the settings timed in results/softmax_caps.json."""
    import json
    import re
    from reimpl.ladder import launch
    src = (launch.ROOT / "reimpl/ladder/cuda/softmax.cu").read_text()
    caps = {k: int(v) for k, v in re.findall(r"#define (ONE_READ_REGS_\w+) (\d+)", src)}
    assert caps == {"ONE_READ_REGS_16_64": 80, "ONE_READ_REGS_32_64": 128, "ONE_READ_REGS_32_64_WIDE": 80}
    d = json.loads((launch.ROOT / "results" / "softmax_caps.json").read_text())
    pct = {(r["setting"], r["dtype"], r["N"], r["plan"]): r["pct_copy"] for r in d["rows"]}

    def setting(r16, r32, wide):
        (name,) = [k for k, v in d["settings"].items()
                   if v == {"ONE_READ_REGS_16_64": r16, "ONE_READ_REGS_32_64": r32, "ONE_READ_REGS_32_64_WIDE": wide}]
        return name

    # float32, a cluster of 16: 80 registers (three blocks of 256 an SM) over 128
    wide = [(N, p) for (s, dt, N, p) in pct if dt == "fp32" and p.endswith(("c16_b256", "c16_b128"))]
    assert wide and all(pct[(setting(80, 80, 80), "fp32", N, p)] > pct[(setting(80, 128, 128), "fp32", N, p)]
                        for N, p in set(wide))
    # float32, clusters of up to 8 blocks of 128 threads or more: 128 over 80 (which spills)
    narrow = {(N, p) for (s, dt, N, p) in pct if dt == "fp32" and re.search(r"_c[48]_b(128|2\d\d)$", p)}
    assert narrow and all(pct[(setting(80, 128, 128), "fp32", N, p)] > pct[(setting(80, 80, 80), "fp32", N, p)]
                          for N, p in narrow)
    # 16-bit rows in blocks of 256: 80 over 72 and 64
    b256 = {(N, p) for (s, dt, N, p) in pct if dt == "bf16" and p.endswith("_b256")}
    assert b256 and all(pct[(setting(80, 128, 128), "bf16", N, p)] >= max(pct[(setting(r, 128, 128), "bf16", N, p)]
                                                                          for r in (72, 64)) for N, p in b256)


def test_the_page_names_the_known_gaps():
    """softmax.md names every width KNOWN_GAPS excuses."""
    from reimpl.ladder import launch
    text = " ".join((launch.ROOT / "docs" / "ladder" / "softmax.md").read_text().split())
    names = {"fp32": "float32", "bf16": "bf16"}
    for dtype, N in KNOWN_GAPS:
        assert f"the one width where it trails by more, {names[dtype]} rows of {N}, is named in the test" in text
