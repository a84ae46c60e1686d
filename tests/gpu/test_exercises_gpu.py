"""GPU: `python -m reimpl exercise check` (reimpl/testing/exercises.py) passes each exercise's reference
solution, the rung's own file (torch_bits: the planted kernel with nothing planted), and fails each
starter that is not yet correct under the next rung's launch; a starter the exercise declares correct
already (`starter_passes`: the step adds speed, not accuracy) passes. Each check runs in a process of
its own: a starter may raise a CUDA error, which no later launch in that process survives. The
accuracy shapes are the --quick ones (every family, storage type and N; M below the largest)."""
import subprocess
import sys

import pytest

from reimpl.testing import exercises as X
from tests.site_helpers import ROOT

pytestmark = pytest.mark.gpu


def _check(name: str, path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reimpl", "exercise", "check", name, str(path), "--quick"],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)


@pytest.mark.parametrize("name", X.names())
def test_reference_solution_passes(name):
    out = _check(name, ROOT / X.get(name).reference)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "GB/s on " in out.stdout and out.stdout.rstrip().endswith("PASSED"), out.stdout


@pytest.mark.parametrize("name", X.names())
def test_starter_fails_until_it_is_written(name, tmp_path):
    ex = X.get(name)
    path = tmp_path / f"exercise_{name}.cu"
    path.write_text(X.starter_text(ex))
    out = _check(name, path)
    assert "compile: ok" in out.stdout, out.stdout + out.stderr  # a failure is the check's, not the compiler's
    if ex.starter_passes:
        assert out.returncode == 0, out.stdout + out.stderr
    else:
        assert out.returncode != 0 and "FAILED" in out.stdout, out.stdout + out.stderr
