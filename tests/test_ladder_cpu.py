"""CPU: the ladder's CUDA compiles for sm_90 through the mirror's NVRTC path with no warnings, one
program per rung file, every rung has a kernel for each storage type, and the launcher picks each
rung's fallback where its condition fails (checked on a RecordingRuntime, which needs no GPU). The
registry (reimpl/ladder/registry.py) holds together: every entry's file holds its kernel and page
section, its bound rule exists, its run line selects its GPU tests, the committed results are
within the bounds stated now, and every table lists what the results hold."""
import json
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from reimpl.device import compile as compile_mod, runtime
from reimpl.ladder import accuracy, launch, registry, rungs
from tests.site_helpers import ROOT


@pytest.mark.parametrize("source", list(rungs.SOURCES))
def test_each_rung_file_compiles_for_sm90_without_warnings(source):
    prog = compile_mod.build(rungs.SOURCES[source], "sm_90")  # a cached build keeps its log (compile.build)
    assert prog.log == "", prog.log
    entries = [e for e in registry.CUDA_RUNGS if e.source == source]
    assert len(prog.lowered) == len(rungs._instantiations(source)) == len(launch.STORAGE) * sum(map(_shapes, entries))


def _shapes(e) -> int:
    """Instantiations a rung has per storage type: one, or (a rung with a plan) one per plan shape of
    16-byte words, the same number for every storage size."""
    if e.cuda.plan is None:
        return 1
    counts = {len([t for t in launch.regs_table(i, launch.REGS_CLUSTERS) if t[0] == 16 // i]) for i in (4, 2)}
    assert len(counts) == 1
    return counts.pop()


def test_one_kernel_file_per_rung_template():
    """A CUDA rung's file is named after its one `__global__` template and holds the page's section
    of the same name; two rungs share a file only where they share a template."""
    assert sum(len(rungs._instantiations(s)) for s in rungs.SOURCES) == 3 * sum(map(_shapes, registry.CUDA_RUNGS))
    for e in registry.CUDA_RUNGS:
        text = (ROOT / e.source).read_text()
        assert (ROOT / e.source).name == f"{e.cuda.template}.cu", e
        # the kernel's name, after any launch attributes (__launch_bounds__(...), __cluster_dims__(...))
        assert re.findall(r"__global__ void\s+(?:__\w+__\([^)]*\)\s+)*(\w+)\(", text) == [e.cuda.template], e
        assert f"--8<-- [start:{e.cuda.template}]" in text and f"--8<-- [end:{e.cuda.template}]" in text


def test_registry_entries_are_whole():
    names = [e.name for e in registry.ENTRIES]
    assert len(set(names)) == len(names)
    for e in registry.ENTRIES:
        assert e.group in registry.GROUPS and e.bound_family in registry.BOUND_FAMILIES, e
        assert (ROOT / e.source).is_file(), e
        assert e.idea and e.credit and e.run.startswith("pytest tests/gpu/"), e
        assert callable(e.launch_fn()), e
        if e.cuda is not None and e.cuda.fallback is not None:
            assert registry.BY_NAME[e.cuda.fallback].cuda is not None, e


def _launched(name, M, N, dtype=torch.float32, offset=0):
    x = torch.zeros(M * N + offset, dtype=dtype)[offset:].view(M, N)
    w = torch.ones(N, dtype=dtype)
    with runtime.use(runtime.RecordingRuntime()) as rt:
        rungs.run(name, x, w, None if rungs.RUNGS[name].rms_norm else w, 1e-5)
    return rt.launches


@pytest.mark.parametrize("name,M,N,dtype,offset,kernel,grid,block,smem", [
    ("naive", 300, 10, torch.float32, 0, "ln_naive_two_pass<float, float>", (3, 1, 1), (128, 1, 1), 0),
    ("warp_sums", 37, 768, torch.float32, 0, "ln_warp_sums<float, float, false>", (10, 1, 1), (128, 1, 1), 0),
    ("block_cached", 5, 1000, torch.bfloat16, 0, "ln_block_cached<__nv_bfloat16, float>", (5, 1, 1),
     (256, 1, 1), 2000),
    # 12288 floats (48 KiB) plus the 384 static bytes exceed the default limit: block_welford
    ("block_cached", 5, 12288, torch.float32, 0, "ln_block_welford<float, float>", (5, 1, 1), (256, 1, 1), 0),
    ("block_vec", 5, 1024, torch.float16, 0, "ln_block_vec<__half, float>", (5, 1, 1), (256, 1, 1), 2048),
    # a row start not 16-byte aligned: the vector rung falls back to the scalar cached one
    ("block_vec", 5, 1024, torch.float32, 1, "ln_block_cached<float, float>", (5, 1, 1), (256, 1, 1), 4096),
    ("block_vec", 5, 1000, torch.float16, 0, "ln_block_vec<__half, float>", (5, 1, 1), (256, 1, 1), 2000),
    ("apex", 70000, 64, torch.float32, 0, "ln_apex<float, float>", (1, 65535, 1), (32, 4, 1), 0),
    ("rms_warp_sumsq", 8, 64, torch.float32, 0, "ln_warp_sums<float, float, true>", (2, 1, 1), (128, 1, 1), 0),
    # row_held: the plan by width (a block, a warp's 32 lanes, a cluster of 8), and its fallbacks
    ("row_held", 37, 4096, torch.float32, 0, "ln_row_held<float, float, false, 4u, 8u, 0u, 1u>", (37, 1, 1),
     (128, 1, 1), 0),
    ("row_held", 37, 768, torch.bfloat16, 0, "ln_row_held<__nv_bfloat16, float, false, 8u, 4u, 32u, 1u>",
     (10, 1, 1), (128, 1, 1), 0),
    # 16-bit rows of 1536 take a warp's 32 lanes at 8 words each (6 of them the row's), not a block
    ("row_held", 37, 1536, torch.float16, 0, "ln_row_held<__half, float, false, 8u, 8u, 32u, 1u>",
     (10, 1, 1), (128, 1, 1), 0),
    ("row_held", 4, 131072, torch.float32, 0, "ln_row_held<float, float, false, 4u, 8u, 0u, 8u>", (32, 1, 1),
     (512, 1, 1), 0),
    ("row_held", 5, 1001, torch.float32, 0, "ln_block_cached<float, float>", (5, 1, 1), (256, 1, 1), 4004),
    ("row_held", 5, 1024, torch.float32, 1, "ln_block_cached<float, float>", (5, 1, 1), (256, 1, 1), 4096),
    ("rms_row_held", 8, 64, torch.float32, 0, "ln_row_held<float, float, true, 4u, 4u, 4u, 1u>", (1, 1, 1),
     (128, 1, 1), 0),
    ("rms_row_held", 8, 63, torch.float32, 0, "ln_warp_sums<float, float, true>", (2, 1, 1), (128, 1, 1), 0),
])
def test_launch_configuration_and_fallbacks(name, M, N, dtype, offset, kernel, grid, block, smem):
    (launch_,) = _launched(name, M, N, dtype, offset)
    assert (launch_.kernel, launch_.grid, launch_.block, launch_.shared) == (kernel, grid, block, smem)


def test_bad_input_is_refused_before_any_launch():
    with runtime.use(runtime.RecordingRuntime()) as rt:
        with pytest.raises(TypeError, match="ladder rung naive: x must be float32"):
            rungs.run("naive", torch.zeros(3, 3, dtype=torch.float64))
        with pytest.raises(ValueError, match="RMSNorm takes no bias"):
            rungs.run("rms_warp_sumsq", torch.zeros(3, 3), None, torch.zeros(3))
    assert rt.launches == []


def test_every_rung_and_family_has_a_stated_bound():
    from reimpl.checks.ladder_errors import FAMILIES
    for e in registry.RUNGS:
        for dtype in accuracy.STORAGE_ROUNDING:
            for family in FAMILIES:
                limit, why = accuracy.bound(e.name, dtype, family)
                assert limit > 0 and why


def test_rms_rungs_are_bound_by_their_sum_of_squares_on_every_family():
    """RMSNorm subtracts no mean: no input family, offset rows included, takes it to a mean rule."""
    from reimpl.checks.ladder_errors import FAMILIES
    for e in registry.RUNGS:
        assert (e.bound_family == "sum_of_squares") == e.rms_norm, e
        for family in FAMILIES:
            assert accuracy.bound(e.name, "float32", family)[1] == "a sum of squares cannot cancel: a few u" \
                or not e.rms_norm


def test_committed_errors_are_within_the_bounds_stated_now():
    """results/ladder_errors.json (measured on the GPU) against today's rules: a rule change that the
    measurement does not support fails here, without a GPU."""
    d = json.loads((ROOT / "results" / "ladder_errors.json").read_text())
    measured = {r["rung"] for r in d["rows"]}
    # no rows of a rung that is gone; a rung added since the last GPU run has none yet (the GPU test
    # holds it to its bound, and its page says it is not measured)
    assert measured <= {e.name for e in registry.RUNGS}
    for r in d["rows"]:
        assert r["rel_err"] <= accuracy.bound(r["rung"], r["dtype"], r["family"])[0], r


def test_tables_and_measurements_list_every_rung():
    from reimpl.checks import ladder_errors
    from reimpl.docsite import ladder_tables
    assert ladder_errors.all_rungs() == [e.name for e in registry.RUNGS]
    bench = json.loads((ROOT / "results" / "ladder_bench.json").read_text())
    assert {r["kernel"] for r in bench["rows"]} <= set(ladder_tables.ORDER + ladder_tables.PEERS)
    # LayerNorm's rungs in the registry's climbing order, then RMSNorm's
    names = [e.name for e in registry.RUNGS]
    assert ladder_tables.ORDER[:len(names)] == tuple([n for n in names if not ladder_errors.is_rms(n)]
                                                     + [n for n in names if ladder_errors.is_rms(n)])


def test_rung_index_renders_every_rung():
    from reimpl.docsite import ladder_tables, render
    page = (ROOT / "docs" / "ladder" / "rungs.md").read_text()
    assert "{% rung_index %}" in page
    table = render.expand("{% rung_index %}\n" + page, "ladder/rungs.md", "../")
    for e in registry.RUNGS:
        # linked where the page has a section for it, plain where not (yet)
        row = next(line for line in table.splitlines()
                   if f"[`{e.name}`](#{e.name})" in line or f">`{e.name}`<" in line)
        assert e.run.startswith(ladder_tables.RUN_PREFIX)
        assert e.idea in row and f"`-k {e.run.removeprefix(ladder_tables.RUN_PREFIX)}`" in row and e.bound_family in row, row
    assert f"`{ladder_tables.RUN_PREFIX}...`" in table
    assert "median" in table and "ladder_bench.json" in table


def _selected(test_file: str) -> dict[str, list[str]]:
    """The tests each entry's run line selects, by pytest's own -k matching on one collection."""
    from _pytest.mark.expression import Expression
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                          test_file], capture_output=True, text=True, cwd=ROOT)
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    assert ids, out.stdout + out.stderr
    got = {}
    for e in registry.ENTRIES:
        if e.run.split()[1] != test_file:
            continue
        expr = Expression.compile(e.run.split(" -k ", 1)[1].strip('"'))
        # a name matches as pytest's -k does: a substring of the test's name (its parameters included)
        got[e.name] = [i for i in ids if expr.evaluate(lambda sub, i=i: sub in i.split("::", 1)[1])]
    return got


def test_each_rung_run_line_selects_its_own_gpu_tests():
    for name, ids in _selected("tests/gpu/test_ladder_gpu.py").items():
        assert ids, name
        bound = [i for i in ids if "test_rung_within_its_stated_bound" in i]
        assert len(bound) == 15 and all(f"[{name}-" in i for i in bound), (name, ids)
        assert all(f"[{name}" in i for i in ids), (name, ids)


@pytest.mark.parametrize("itemsize", [4, 2])
@pytest.mark.parametrize("N", [8, 64, 768, 1024, 1280, 1536, 2048, 4096, 5120, 12288, 32768, 65536, 131072, 262144])
def test_row_held_plan_holds_the_row_once(N, itemsize):
    """row_held's plan keeps the row in registers at every width it takes (no shared-memory staging)
    and covers each element exactly once, as the one-read softmax's layout does."""
    from tests.test_softmax_regs_cpu import _elements
    plan = launch.held_plan(N, itemsize)
    if plan is None:  # past a cluster's registers: the launcher falls back
        assert not launch.held_applies(N, itemsize, True)
        return
    assert not plan.smem and plan.targs in launch.regs_table(itemsize, launch.REGS_CLUSTERS)
    got, _ = _elements(plan, N, 0)
    assert np.array_equal(np.sort(got), np.arange(N)), (N, plan)
