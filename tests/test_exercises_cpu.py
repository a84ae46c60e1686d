"""CPU: the ladder's exercises (reimpl/testing/exercises.py). `python -m reimpl exercise --list` lists
every one; each steps from a registry rung to the next one (or, torch_bits, to torch's restated
kernel); each starter is written by `exercise NAME`, carries its TODO and compiles with NVRTC for
sm_90 as it is; each reference solution (the rung's own file) passes `exercise check`'s compile
stage, which says in one line what it could not check without a GPU; a broken file gets NVRTC's
error, readable, and a nonzero exit; the check launches FILE through the rung's own launcher (on a
RecordingRuntime here); and each exercise closes its chapter of docs/ladder/rungs.md.
The GPU half (accuracy against the bound, torch's bits, GB/s): tests/gpu/test_exercises_gpu.py."""
import re
import subprocess
import sys

import pytest
import torch

from reimpl import cli
from reimpl.device import runtime
from reimpl.ladder import registry, rungs
from reimpl.testing import exercises as X
from tests.site_helpers import ROOT

NAMES = X.names()


@pytest.fixture
def no_gpu(monkeypatch):
    """The CPU path of `exercise check`, whatever machine runs this."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def _run(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reimpl", "exercise", *argv], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_list_lists_every_exercise():
    out = _run("--list")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split()[0] for line in lines] == NAMES
    for ex, line in zip(X.EXERCISES, lines):
        assert f"{ex.start} -> " in line, line


def test_every_exercise_steps_from_a_rung_to_the_next():
    """Start and target exist in the registry; a ladder exercise's target is the LayerNorm CUDA rung
    declared right after its start, and its launcher's template is the one in the target's file."""
    climb = [e.name for e in registry.CUDA_RUNGS if not e.rms_norm]
    assert len(set(NAMES)) == len(NAMES) and NAMES[-1] == "torch_bits"
    for ex in X.EXERCISES:
        assert ex.start in registry.BY_NAME and registry.BY_NAME[ex.start].cuda is not None, ex
        assert (ROOT / ex.reference).is_file(), ex
        if ex.bits:
            assert re.search(rf"__global__ void {X.BITS_TEMPLATE}\(", (ROOT / ex.reference).read_text())
            continue
        assert ex.name in registry.BY_NAME, ex
        assert climb.index(ex.name) == climb.index(ex.start) + 1, ex
        assert ex.template in rungs.TEMPLATES and ex.reference == registry.BY_NAME[ex.name].source


@pytest.mark.parametrize("name", NAMES)
def test_starter_is_written_and_compiles_for_sm90(name, tmp_path, capsys):
    out = tmp_path / f"{name}.cu"
    assert cli.main(["exercise", name, "--out", str(out)]) == 0
    assert f"python -m reimpl exercise check {name} {out}" in capsys.readouterr().out
    text = out.read_text()
    ex = X.get(name)
    assert len(re.findall(rf"__global__ void {ex.template}\(", text)) == 1
    assert f"TODO(exercise {name})" in text and "--8<--" not in text
    prog, _, kernels = X.compile_file(ex, out, "sm_90")
    assert set(prog.lowered) == {k.expr for k in kernels.values()} and len(kernels) == 3
    assert prog.log == "", prog.log
    # written once; a second time only with --force
    with pytest.raises(SystemExit, match="exists"):
        cli.main(["exercise", name, "--out", str(out)])
    assert cli.main(["exercise", name, "--out", str(out), "--force"]) == 0


@pytest.mark.parametrize("name", NAMES)
def test_reference_solution_passes_the_compile_stage(name, no_gpu, capsys):
    ex = X.get(name)
    assert cli.main(["exercise", "check", name, str(ROOT / ex.reference)]) == 0
    out = capsys.readouterr().out
    assert "compile: ok for sm_90" in out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("not checked:")]
    assert "CUDA GPU" in line and ("torch's bits" in line if ex.bits else f"{name}'s error bound" in line)


def test_broken_file_gives_a_readable_compile_error_and_a_nonzero_exit(tmp_path):
    good = X.starter_text(X.get("block_cached"))
    broken = tmp_path / "broken.cu"
    broken.write_text(good.replace("s = block_merge(s, smem);", "s = block_merge(s, smem)"))
    lineno = next(i for i, ln in enumerate(broken.read_text().splitlines(), 1) if "s = block_merge(s, smem)" in ln)
    out = _run("check", "block_cached", str(broken))
    assert out.returncode != 0
    assert "compile: FAILED for sm_90" in out.stdout
    assert re.search(rf"broken\.cu\({lineno + 1}\): error: expected a \";\"", out.stdout), out.stdout


def test_missing_kernel_is_named_not_nvrtcs_name_map(tmp_path, no_gpu, capsys):
    wrong = tmp_path / "wrong.cu"
    wrong.write_text((ROOT / registry.BY_NAME["block_vec"].source).read_text())  # the wrong rung's file
    assert cli.main(["exercise", "check", "apex", str(wrong)]) == 1
    out = capsys.readouterr().out
    assert "NVRTC cannot instantiate ladder::ln_apex<T, float>" in out and "__nv_name_map" not in out


def test_unknown_exercise_and_bad_arguments_exit_nonzero(tmp_path):
    for argv in (["exercise", "nope"], ["exercise", "check", "nope", "x.cu"], ["exercise", "check", "apex"]):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code not in (0, None), argv
    assert cli.main(["exercise", "check", "apex", str(tmp_path / "absent.cu")]) == 1


@pytest.mark.parametrize("name", ["block_cached", "apex", "warp_sums"])
def test_check_launches_the_file_through_the_rungs_launcher(name, tmp_path):
    """While `in_place_of` is open the rung's launcher launches FILE's kernel, with the rung's own
    grid, block and shared memory; afterwards the rung's own again."""
    ex = X.get(name)
    path = tmp_path / "mine.cu"
    path.write_text(X.starter_text(ex))
    source, kernels = X.program_source(ex, path)
    x = torch.zeros(5, 1000, dtype=torch.bfloat16)
    w = torch.ones(1000, dtype=torch.bfloat16)
    with runtime.use(runtime.RecordingRuntime()) as rt:
        with X.in_place_of(ex, source, kernels):
            rungs.run(name, x, w, w)
        rungs.run(name, x, w, w)
    (mine, launch_mine, _), (theirs, launch_theirs, _) = rt.calls
    assert mine is kernels["bfloat16"] and mine.source is source and mine.name == theirs.name
    assert theirs.source is rungs.SOURCES[ex.reference]
    assert launch_mine == launch_theirs


def test_accuracy_shapes_are_those_where_the_launcher_takes_the_rung():
    from reimpl.checks import ladder_errors
    run, skipped = X._shapes(X.get("block_cached"), "float32", quick=False)
    assert {(M, N) for M, N, _ in run} | {(M, N) for M, N, _ in skipped} == set(ladder_errors.shapes())
    assert skipped and {fb for _, _, fb in skipped} == {"block_welford"}
    quick, _ = X._shapes(X.get("block_cached"), "float32", quick=True)
    assert quick and all(M < max(ladder_errors.MS) for M, _, _ in quick)


def test_the_gb_s_shape_runs_each_rung_itself():
    """The GB/s line's shape is one where each exercise's launcher takes the rung, not a fallback."""
    dname, M, N = X.BENCH
    for ex in X.EXERCISES:
        if not ex.bits:
            assert rungs.choose(ex.target, N, X._types()[dname].itemsize, True) is ex.target, ex.name


def _sections(page: str) -> dict[str, str]:
    """Each `## ` chapter of the page by its anchor, with its subsections."""
    out = {}
    for part in re.split(r"^(?=## )", page, flags=re.M):
        m = re.match(r"## .*\{ #([\w-]+) \}", part)
        if m:
            out[m.group(1)] = part
    return out


def test_each_exercise_closes_its_chapter_of_the_rungs_page():
    sections = _sections((ROOT / "docs" / "ladder" / "rungs.md").read_text())
    for ex in X.EXERCISES:
        body = sections[ex.chapter]
        tail = body[body.index(f"### Exercise"):]
        assert f"{{ #exercise_{ex.name} }}" in tail and "\n## " not in tail, ex.name
        flat = " ".join(tail.split())
        assert f"`python -m reimpl exercise {ex.name}`" in flat, ex.name
        assert f"`python -m reimpl exercise check {ex.name} exercise_{ex.name}.cu`" in flat, ex.name
        # the page's chapters of ladder rungs are their start rung's
        assert ex.bits or ex.chapter == ex.start
