"""CPU: LayerNorm's siblings. The BatchNorm and softmax CUDA compiles for sm_90 with no diagnostics;
their launchers choose the stated configurations (on a RecordingRuntime) and refuse bad input before
any launch; the torch-level BatchNorm agrees with torch.nn.BatchNorm1d/2d on the CPU within the
stated bounds (train, eval, momentum None, no running statistics, no affine, torch's messages); the
NumPy model of the (m, d) merge agrees with torch.softmax and follows its -inf / +inf / NaN rules;
and every softmax kernel, dtype and length has a stated bound."""
import re

import numpy as np
import pytest
import torch

from reimpl.checks import siblings_errors as se
from reimpl.device import compile as compile_mod, runtime
from reimpl.ladder import accuracy, batchnorm, softmax


@pytest.mark.parametrize("module", [batchnorm, softmax], ids=["batchnorm", "softmax"])
def test_siblings_compile_for_sm90_without_warnings(module):
    prog = compile_mod.build(module.SOURCE, "sm_90")  # a cached build keeps its log (compile.build)
    assert prog.log == "", prog.log
    assert len(prog.lowered) == len(module._instantiations())


def test_siblings_come_from_the_registry():
    """softmax's kernels, the bench table's order and the sibling entries' run lines are the
    registry's: each run line selects that kernel's GPU tests and nothing of another kernel's."""
    from reimpl.ladder import registry
    from tests.test_ladder_cpu import _selected
    assert list(softmax.KERNELS) == ["three_pass", "online_warp", "online_block", "one_read"]
    from reimpl.docsite import siblings_bench_tables as sbt
    ours = [e.name for e in registry.of_group("softmax")]
    assert [k for k in sbt.ORDER["softmax"] if k in ours] == ours
    assert [k for k in sbt.ORDER["batchnorm"] if k.startswith("bn_")] == [e.name for e in registry.of_group("batchnorm")]
    for e in registry.of_group("softmax"):
        src = (softmax.SOURCE.directory / softmax.SOURCE.main).read_text()
        assert re.search(rf"__global__ void\s+(__\w+__\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\s+)*{e.cuda.template}\(", src), e.name
        assert f"[start:{e.cuda.template}]" in src
    selected = _selected("tests/gpu/test_siblings_gpu.py")
    assert set(selected) == {e.name for e in registry.ENTRIES if e.group != "ladder"}
    for name, ids in selected.items():
        assert ids, name
        key = {"bn_kernel": "kernel", "bn_split": "split"}.get(name, name)
        assert all(key in i and "torch_level" not in i for i in ids), (name, ids)
    # the first BatchNorm kernel's line selects none of the split kernels' tests
    assert not any("split" in i for i in selected["bn_kernel"]), selected["bn_kernel"]
    assert sum("test_softmax_within_its_stated_distance_to_torch" in i for i in selected["online_warp"]) == 12


def _launches(fn):
    with runtime.use(runtime.RecordingRuntime()) as rt:
        fn()
    return [(l.kernel, l.grid, l.block, l.shared) for l in rt.launches]


@pytest.mark.parametrize("name,shape,dtype,expect", [
    ("three_pass", (37, 1000), torch.float32, ("softmax_three_pass<float, float>", (37, 1, 1), (256, 1, 1), 0)),
    ("online_warp", (2, 3, 100), torch.bfloat16,
     ("softmax_online_warp<__nv_bfloat16, float>", (2, 1, 1), (128, 1, 1), 0)),
    ("online_block", (5, 1), torch.float16, ("softmax_online_block<__half, float>", (5, 1, 1), (256, 1, 1), 0)),
])
def test_softmax_launch_configuration(name, shape, dtype, expect):
    assert _launches(lambda: softmax.run(name, torch.zeros(shape, dtype=dtype))) == [expect]


def test_softmax_empty_input_launches_nothing_and_bad_input_names_the_argument():
    assert _launches(lambda: softmax.run("three_pass", torch.zeros(0, 8))) == []
    assert _launches(lambda: softmax.run("three_pass", torch.zeros(8, 0))) == []
    with pytest.raises(TypeError, match="x must be float32"):
        softmax.run("three_pass", torch.zeros(3, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="name must be one of"):
        softmax.run("four_pass", torch.zeros(3, 3))


@pytest.mark.parametrize("shape,dtype,pdtype,kernel", [
    ((8, 3, 5, 5), torch.float32, torch.float32, "bn_train_forward<float, float, float>"),
    ((8, 3), torch.bfloat16, torch.bfloat16, "bn_train_forward<__nv_bfloat16, float, __nv_bfloat16>"),
    ((8, 3, 7), torch.float16, torch.float32, "bn_train_forward<__half, float, float>"),
])
def test_batchnorm_kernel_launch_configuration(shape, dtype, pdtype, kernel):
    C = shape[1]
    x = torch.zeros(shape, dtype=dtype)
    w, rm, rv = (torch.ones(C, dtype=pdtype) for _ in range(3))
    got = _launches(lambda: batchnorm.batch_norm_train_forward(x, w, w, rm, rv, 0.1, 1e-5))
    assert got == [(kernel, (C, 1, 1), (batchnorm.BLOCK, 1, 1), 0)]


def test_batchnorm_kernel_refuses_bad_input_before_any_launch():
    x = torch.zeros(4, 3, 2, 2)
    cases = [
        (lambda: batchnorm.batch_norm_train_forward(x.double()), TypeError, "x must be float32"),
        (lambda: batchnorm.batch_norm_train_forward(x, torch.ones(4)), ValueError, "weight must be"),
        (lambda: batchnorm.batch_norm_train_forward(x, None, None, torch.zeros(3)), ValueError,
         "both running_mean and running_var"),
        (lambda: batchnorm.batch_norm_train_forward(x, torch.ones(3, dtype=torch.float16)), TypeError,
         "parameters must be"),
        (lambda: batchnorm.batch_norm_train_forward(torch.zeros(1, 3)), ValueError,
         r"Expected more than 1 value per channel when training, got input size torch.Size\(\[1, 3\]\)"),
    ]
    for fn, exc, msg in cases:
        def call(fn=fn, exc=exc, msg=msg):
            with pytest.raises(exc, match=msg):
                fn()
        assert _launches(call) == []


def _message(fn) -> tuple[type, str]:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the point is to compare whatever torch raises
        return type(e), str(e)
    return type(None), ""


@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (1, 4)), ("BatchNorm2d", (1, 4, 1, 1)),
                                       ("BatchNorm1d", (4, 4, 5, 5)), ("BatchNorm2d", (4, 4, 5))])
def test_batchnorm_raises_torchs_exception_and_message(cls, shape):
    """One value per channel in training, and input of the wrong rank: torch's type and words. Torch
    counts the batch before refusing it, and so do we."""
    theirs, ours = getattr(torch.nn, cls)(4), getattr(batchnorm, cls)(4)
    x = torch.randn(shape)
    t, o = _message(lambda: theirs(x)), _message(lambda: ours(x))
    assert t[0] is ValueError and o == t
    assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked)


def test_batchnorm_state_dict_matches_torchs():
    for kw in ({}, {"affine": False}, {"track_running_stats": False}):
        assert list(batchnorm.BatchNorm2d(3, **kw).state_dict()) == list(torch.nn.BatchNorm2d(3, **kw).state_dict())


# On the CPU, torch keeps a 16-bit module's batch statistics in that type before normalising (its
# CUDA kernels keep them in float32), so the bfloat16 module gets its own, CPU-only bound here.
CPU_BF16_MODULE_BOUND = 2.0 ** -6  # invstd rounded to bf16 (2^-9 |y|) plus two adjacent roundings of y


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("dtype,pdtype", [("float32", "float32"), ("bfloat16", "float32"), ("bfloat16", "bfloat16")])
def test_torch_level_batchnorm_against_torch_on_cpu(dtype, pdtype, momentum):
    """Three training steps then eval, every shape of the GPU table (C = 1, spatial size 1, 2-D and
    3-D input) and a batch of 1 in eval; outputs and running statistics within the stated bounds."""
    families = ("normal",) if pdtype == "bfloat16" else accuracy.BN_FAMILIES
    for family in families:
        for shape in se.BN_SHAPES + se.BN_EVAL_ONLY:
            for mode in (("eval",) if shape in se.BN_EVAL_ONLY else ("train", "eval")):
                r = se.measure_batchnorm("torch_level", dtype, pdtype, family, shape, mode, steps=3,
                                         momentum=momentum, device="cpu")
                y_bound = CPU_BF16_MODULE_BOUND if pdtype == "bfloat16" else accuracy.batchnorm_bound(dtype, "y")[0]
                assert r["y_rel"] <= y_bound, r
                for k in ("running_mean_rel", "running_var_rel"):
                    assert r[k] <= accuracy.batchnorm_bound(pdtype, "running")[0], r
                assert r["num_batches_tracked"][0] == r["num_batches_tracked"][1], r


@pytest.mark.parametrize("kw", [{"affine": False}, {"track_running_stats": False}, {"momentum": None}])
def test_torch_level_batchnorm_options(kw):
    """No affine parameters; no running statistics (batch statistics in eval too); the cumulative
    average: each module's outputs and buffers as torch's, over train and eval steps."""
    torch.manual_seed(0)
    theirs, ours = torch.nn.BatchNorm2d(5, **kw), batchnorm.BatchNorm2d(5, **kw)
    ours.load_state_dict(theirs.state_dict())
    for train in (True, True, False, True, False):
        theirs.train(train)
        ours.train(train)
        x = torch.randn(6, 5, 4, 3) * 3 + 1
        assert torch.allclose(ours(x), theirs(x), rtol=0, atol=accuracy.batchnorm_bound("float32", "y")[0])
    for (k, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert torch.allclose(a.double(), b.double(), rtol=0, atol=1e-6), k


def test_every_softmax_kernel_has_a_bound_for_every_length():
    for k in softmax.KERNELS.values():
        for dtype in accuracy.STORAGE_ULP:
            for N in se.SOFTMAX_NS:
                limit, why = softmax.bound(k.name, dtype, N)
                assert limit >= 1 and why


@pytest.mark.parametrize("parts", [1, 3, 32])
def test_md_model_against_torch_softmax(parts):
    """The (m, d) merge in float32: any split of the row into parts gives torch.softmax within the
    float32 bound of the block kernels (NumPy's exp is not CUDA's expf, so not the same bits)."""
    x = se.softmax_input("normal", 16, 1000, torch.float32, device="cpu")
    x[3] *= 1e4
    ref = torch.softmax(x, -1)
    got = torch.from_numpy(np.stack([softmax.online_softmax(r, parts) for r in x.numpy()]))
    limit = accuracy.softmax_bound(parts, "float32", 1000)[0]
    assert float(se.ulps(got.double() - ref.double(), ref.double(), "float32").max()) <= limit


@pytest.mark.parametrize("row", [[1.0, 2.0, 3.0], [-np.inf, 5.0], [-np.inf, -np.inf], [np.inf, 1.0],
                                 [np.inf, np.inf], [7.0], [-np.inf], [np.nan, 1.0], [1.0, np.nan, -np.inf],
                                 [3e38, -3e38, 1.0]])
@pytest.mark.parametrize("parts", [1, 2])
def test_md_model_special_values_as_torch(row, parts):
    """-inf adds nothing; a row of -inf only is NaN; a +inf or a NaN makes the whole row NaN."""
    ref = torch.softmax(torch.tensor(row, dtype=torch.float32), 0).numpy()
    got = softmax.online_softmax(row, parts)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), (got, ref)
    ok = ~np.isnan(ref)
    assert np.allclose(got[ok], ref[ok], rtol=1e-6, atol=0), (got, ref)


def test_md_merge_empty_state_is_an_identity():
    s = softmax.md_push(softmax.EMPTY, 2.5)
    assert softmax.md_merge(softmax.EMPTY, s) == s and softmax.md_merge(s, softmax.EMPTY) == s
    assert softmax.md_merge(softmax.EMPTY, softmax.EMPTY) == softmax.EMPTY
    assert softmax.md_push(s, -np.inf) == s


def test_welford_merging_is_not_associative():
    """The demonstration's row: torch's tree and left-to-right merging differ in both bit patterns;
    torch's tree is what the emulator's native_layer_norm (tied to the H100 by the golden vectors)
    returns; the script prints what the module computes now."""
    import json
    import subprocess
    import sys

    from reimpl.emulator import merge_order, native_layer_norm
    from tests.site_helpers import ROOT
    d = merge_order.demo()
    t, lr = d["trees"]["torch"], d["trees"]["left_to_right"]
    assert t["mean"] != lr["mean"] and t["var"] != lr["var"]
    x = np.asarray(d["row"], np.float32)
    assert [merge_order.bits(v) for v in x] == d["row_bits"]
    _, mean, _ = native_layer_norm(x.reshape(1, 16), (16,), None, None, 1e-5)
    assert merge_order.bits(mean.reshape(-1)[0]) == t["mean"]
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "merge_order_demo.py"), "--json"], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout
    assert json.loads(out) == json.loads(json.dumps(d))


def test_pattern_page_shows_the_bits_computed_now():
    from reimpl.docsite import render
    from reimpl.emulator import merge_order
    d = merge_order.demo()
    page = render.expand("{% merge_order %}\n", "ladder/pattern.md", "../")
    for r in d["trees"].values():
        assert f"`{r['mean']}`" in page and f"`{r['var']}`" in page
    assert "| LayerNorm | each row" in render.expand("{% siblings_axes %}\n", "ladder/pattern.md", "../")


def _fixture():
    """A small hand-made results file (not a measurement: it only exercises the renderer)."""
    stamp = {"device": "GPU-X", "torch": "t", "cuda": "c", "date": "d"}
    sm = [{"kernel": "online_warp", "dtype": "float32", "family": "normal", "M": 37, "N": 1000,
           "max_ulp_to_torch": 5.0, "nan_positions_match": True, "nan_rows": 0, "identical_to_torch": 0.5,
           "max_rel_err": 1e-7, "torch_max_rel_err": 2e-7}]
    bn = [{"impl": "kernel", "dtype": "bfloat16", "param_dtype": "float32", "family": "normal", "shape": [8, 3, 5],
           "mode": "train", "steps": 1, "momentum": 0.1, "y_rel": 1e-3, "running_mean_rel": 1e-7,
           "running_var_rel": 2e-7, "num_batches_tracked": [1, 1]}]
    # two cells: 4096 x 4096 fp32 (128 MB of traffic: a big cell) and 4 x 8 (a small one)
    bench = [{"method": m, "op": "softmax", "dtype": "fp32", "shape": list(shape), "kernel": k, "ms": ms,
              "gbps": 2 * 4 * shape[0] * shape[1] / ms / 1e6, "pct_copy": p}
             for m in ("pipelined", "flushed") for shape, scale in (((4096, 4096), 1.0), ((4, 8), 1e-4))
             for k, ms, p in (("copy", 0.05 * scale, 100.0), ("one_read", 0.0625 * scale, 80.0),
                              ("torch_softmax", 0.1 * scale, 50.0))]
    return {**stamp, "softmax": sm, "batchnorm": bn}, {**stamp, "methods": {}, "rows": bench}


def test_sibling_renderers_on_a_fixture_and_without_results():
    from reimpl.docsite import siblings_tables as st
    errors, bench = _fixture()
    limit = accuracy.softmax_bound(32, "float32", 1000)[0]
    assert f"| normal | float32 | 5 | 37x1000 | {limit} | yes | 50.0% |" in st.softmax_errors(errors, "online_warp")
    table = st.batchnorm_errors(errors, "kernel")
    assert "| bfloat16 | float32 | train | 0.001 | 8x3x5 normal |" in table and "Where the bounds" in table
    from reimpl.docsite import siblings_bench_tables as sbt
    verdict = sbt.verdict_table(bench, "softmax")  # the small cell is left out of the verdict
    assert "| | fp32<br>pipelined |" in verdict and "| cells | 1 |" in verdict and "| % of copy | 80.0–80.0 |" in verdict
    assert "| 1 of 1<br>(1.60x) |" in verdict, verdict
    assert "- fp32, flushed: `one_read` at 80.0–80.0% of copy over 1 cells" in sbt.claim(bench, "softmax")
    chart = sbt.bandwidth(bench, "softmax", "fp32")
    assert "<svg" in chart and "| 4096 x 4096 | 128 | 80 / 80 | 50 / 50 |" not in chart  # the table is HTML
    assert ">80 / 80</td>" in chart and ">128</td>" in chart
    assert chart.count("<table>") == 1 and ">#</th>" not in chart  # three kernels fit one table, unnumbered
    assert "GPU-X" in st.stamp(errors, bench)
    for text in (st.softmax_errors(None, "three_pass"), st.batchnorm_errors(None, "kernel"),
                 sbt.bandwidth(None, "softmax", "fp32"), sbt.verdict_table(None, "softmax")):
        assert text.startswith("*Not measured yet: run `python scripts/gpu/siblings_")
    assert st.stamp(None, None) == ""
    with pytest.raises(ValueError):
        st.softmax_errors(errors, "three_pass")  # a kernel with no rows is an error, not an empty table


def test_bandwidth_data_of_every_softmax_kernel_is_cut_into_numbered_tables():
    """Every softmax kernel does not fit one table: the data is two tables that each fit TEXT_CHARS,
    number the same rows, say what they hold, and together hold every cell's pipelined / flushed value once."""
    from reimpl.docsite import siblings_bench_tables as sbt
    stamp, _ = _fixture()
    kernels = sbt.ORDER["softmax"]
    rows = [{"method": m, "op": "softmax", "dtype": "bf16", "shape": [M, 4096], "kernel": k, "ms": 1.0,
             "gbps": 1000.0 + 10 * i + j, "pct_copy": 10.0 * i + j + (m == "flushed") / 2}
            for j, M in enumerate((4096, 8)) for i, k in enumerate(kernels) for m in ("pipelined", "flushed")]
    d = {**stamp, "methods": {}, "rows": rows}
    md = sbt._table(d, "softmax", "bf16")
    heads = [line for line in md.splitlines() if line.startswith("| # |")]
    assert len(heads) == 2 and md.count("\n|--:|") == 2, md
    assert sorted(sum(([c.strip() for c in h.split("|")[2:-1] if "`" in c] for h in heads), [])) == \
        sorted(f"`{k}`" if k != "copy" else "`copy`, GB/s" for k in kernels)
    assert "the table after it gives the three earlier kernels and the copy's own GB/s" in md
    assert "bf16, the same rows by number:" in md
    for table in md.split("\n\n*")[1:]:
        lines = [line for line in table.splitlines() if line.startswith("|")]
        cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[:1] + lines[2:]]
        assert sum(max(map(sbt._chars, col)) + sbt.PAD_CHARS for col in zip(*cells)) <= sbt.TEXT_CHARS
        assert [c[0] for c in cells] == ["#", "1", "2"]
    for i, k in enumerate(kernels):
        for j in (0, 1):
            want = (f"{1000 + 10 * i + j} / {1000 + 10 * i + j}" if k == "copy" else
                    f"{10 * i + j:.0f} / {10 * i + j + 0.5:.0f}")
            assert md.count(f"| {want} |") == 1, (k, j, want)
    html = sbt.bandwidth(d, "softmax", "bf16")
    assert html.count("<table>") == 2 and html.count(">#</th>") == 2


@pytest.mark.parametrize("parts", [1, 2, 16, 128])
@pytest.mark.parametrize("bias", [0.0, 64.0])
def test_one_read_model_against_torch_softmax(parts, bias):
    """The one-read arithmetic (max first, one exp an element, each share rescaled once) in float32,
    the 16-bit storage's 2^64 bias included: torch.softmax within the bound stated for a row split
    into `parts` parts, each summed as one thread sums (NumPy's exp is not CUDA's, so not the same bits)."""
    x = se.softmax_input("normal", 16, 1000, torch.float32, device="cpu")
    x[3] *= 1e4
    x[5, :700] -= 300  # one share's maximum far below the row's: its rescale underflows to 0
    ref = torch.softmax(x, -1)
    got = torch.from_numpy(np.stack([softmax.one_read_softmax(r, parts, bias) for r in x.numpy()]))
    limit = accuracy.softmax_bound(parts, "float32", 1000, parts)[0]
    assert float(se.ulps(got.double() - ref.double(), ref.double(), "float32").max()) <= limit


@pytest.mark.parametrize("row", [[1.0, 2.0, 3.0], [-np.inf, 5.0], [-np.inf, -np.inf], [np.inf, 1.0],
                                 [np.inf, np.inf], [7.0], [-np.inf], [np.nan, 1.0], [1.0, np.nan, -np.inf],
                                 [3e38, -3e38, 1.0], [-np.inf, -np.inf, -200.0, -200.0],
                                 [-np.inf, -np.inf, 1.0, np.inf]])
@pytest.mark.parametrize("parts", [1, 2, 3])
def test_one_read_model_special_values_as_torch(row, parts):
    """torch's rules hold under the split: a share of -inf only adds nothing, even where the row's
    maximum is so low that exp(0 - m) overflows (the rescale's guard); a row of -inf only is NaN; a
    +inf or a NaN anywhere makes the whole row NaN."""
    ref = torch.softmax(torch.tensor(row, dtype=torch.float32), 0).numpy()
    got = softmax.one_read_softmax(row, parts)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), (got, ref)
    ok = ~np.isnan(ref)
    assert np.allclose(got[ok], ref[ok], rtol=1e-5, atol=0), (got, ref)


def test_softmax_waves_has_no_saw_tooth():
    """The softmax page says the long rows' shortfall is not a partial last wave: over every dtype's
    run of row counts in results/softmax_waves.json, one_read's share of the copy never drops by
    more than 1.5 points from one row count to the next (a wave of clusters filling and emptying
    would cost several), and ends higher than it starts; the rendered lines carry those figures."""
    from reimpl.docsite import siblings_tables
    d = siblings_tables.load(siblings_tables.WAVES)
    text = siblings_tables.softmax_waves(d)
    for dtype in ("fp32", "bf16"):
        pct = [r["pct_copy"] for r in d["rows"] if r["dtype"] == dtype]
        assert len(pct) >= 10 and pct[-1] > pct[0]
        drop = max(a - b for a, b in zip(pct, pct[1:]))
        assert drop <= 1.5
        assert f"{min(pct):.1f} to {max(pct):.1f}% of the copy" in text and f"{max(drop, 0):.1f} points" in text
    assert "Not measured yet" in siblings_tables.softmax_waves(None)


def test_softmax_shortfall_prose_holds_to_its_profile():
    """The softmax page's reading of results/softmax_shortfall.json: the cluster-of-16 rows keep as many
    threads an SM as rows of 4096 (by registers) and an achieved occupancy within 2 points, with DRAM
    busy at least 10 points less; the odd width takes the plan, registers and occupancy of the row one
    shorter, more than 1.1 times its instructions and nearly twice its branches (1.7 to 2), and stays
    below it in % of the copy; both shortfalls are under 90%, the references over. The rendered bullets
    carry the figures."""
    from reimpl.docsite import siblings_tables as t
    d = t.load(t.SHORTFALL)
    pairs = t.shortfall_pairs(d)
    ref, wide = pairs["cluster"]
    assert ref["ncu"]["cluster"] == 1 and ref["pct_copy"] >= 90 and len(wide) == 2
    for r in wide:
        n, m = r["ncu"], ref["ncu"]
        assert n["cluster"] == 16 and r["pct_copy"] < 90
        assert n["blocks_per_sm_by_registers"] * n["block"] == m["blocks_per_sm_by_registers"] * m["block"]
        assert n["blocks_per_sm_by_registers"] == 3 and n["block"] == 256 and m["block"] == 128
        assert abs(n["achieved_occupancy_pct"] - m["achieved_occupancy_pct"]) < 2
        assert n["dram_pct"] <= m["dram_pct"] - 10
    ref, odd = pairs["odd"]
    n, m = odd["ncu"], ref["ncu"]
    assert (n["cluster"], n["block"], n["registers"]) == (m["cluster"], m["block"], m["registers"])
    assert abs(n["achieved_occupancy_pct"] - m["achieved_occupancy_pct"]) < 1
    assert n["instructions"] > 1.1 * m["instructions"] and 1.7 <= n["branch_instructions"] / m["branch_instructions"] < 2
    assert odd["pct_copy"] < 90 <= ref["pct_copy"]
    # "only one row in eight of 50257 bf16 values starts on a 16-byte word"
    from reimpl.docsite.ladder_tables import ITEMSIZE
    size = ITEMSIZE[odd["dtype"]]
    starts = [r for r in range(odd["M"]) if r * odd["N"] * size % 16 == 0]
    assert starts == list(range(0, odd["M"], 8)) and odd["dtype"] == "bf16" and odd["N"] == 50257
    assert "Only one row in eight of 50257 bf16 values" in (t.RESULTS.parent / "docs/ladder/softmax.md").read_text()
    text = t.softmax_shortfall(d)
    assert f"{n['branch_instructions'] / m['branch_instructions']:.2f} times the branches, the same occupancy" in text
    assert "Not measured yet" in t.softmax_shortfall(None)
