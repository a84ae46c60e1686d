"""Emulator speed (a benchmark, not a test): wall time to emulate small cases on one CPU core.

Usage: OMP_NUM_THREADS=1 taskset -c 0 python scripts/bench_emulator.py [results/bench_emulator.md]

Rows: one row of N = 4096 through the vectorized forward (the issue's target: under 1 s), the same
with the step trace recorded, and the fallback path; each the median of 7 runs after one warm-up
(the warm-up loads the rsqrt table and imports torch for the host mirror's plan). Then the golden
check as CI runs it (pytest on tests/test_emulator_golden*_cpu.py, one run, wall time).
"""
from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reimpl import emulator  # noqa: E402
from reimpl.checks.cases import Case  # noqa: E402
from reimpl.checks.cases_backward import BackwardCase  # noqa: E402
from reimpl.emulator import trace  # noqa: E402

CASES = [
    ("vectorized LN fp32 1x4096", Case("layer_norm", "fp32", (1, 4096)), False),
    ("vectorized LN bf16 1x4096", Case("layer_norm", "bf16", (1, 4096)), False),
    ("vectorized RMS fp32 1x4096", Case("rms_norm", "fp32", (1, 4096)), False),
    ("vectorized LN fp32 1x4096, traced", Case("layer_norm", "fp32", (1, 4096)), True),
    ("fallback LN fp32 1x4094", Case("layer_norm", "fp32", (1, 4094)), False),
    ("fallback LN fp32 1x4094, traced", Case("layer_norm", "fp32", (1, 4094)), True),
]


BACKWARD = [
    ("backward LN fp32 1x4096 (vectorized grad input, GammaBeta <32,1,8>)", BackwardCase("layer_norm", "fp32", (1, 4096))),
    ("backward LN bf16 64x1024 (GammaBeta <32,8,64>)", BackwardCase("layer_norm", "bf16", (64, 1024))),
]


def _runner(case):
    if not isinstance(case, BackwardCase):
        x, w, b = case.make_inputs("cpu")
        return lambda: emulator.run_case(case, x, w, b)
    args = emulator.backward_args(case)
    return lambda: emulator.run_backward_case(case, *args)


def _time(case: Case, traced: bool, runs: int = 7) -> float:
    run = _runner(case)
    run()  # warm-up
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        if traced:
            with trace.recording():
                run()
        else:
            run()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(out: str | None) -> None:
    lines = [f"# Emulator speed ({date.today().isoformat()})", "",
             f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores on the machine; "
             f"run on one core (`OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}`, "
             f"affinity {sorted(os.sched_getaffinity(0))}). Python {platform.python_version()}, "
             f"NumPy {__import__('numpy').__version__}.", "",
             "| case | median of 7 (s) |", "|---|---|"]
    for name, case, traced in CASES:
        lines.append(f"| {name} | {_time(case, traced):.4f} |")
    for name, case in BACKWARD:
        lines.append(f"| {name} | {_time(case, False):.4f} |")
    t = time.perf_counter()
    tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_emulator_golden*_cpu.py"))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                         cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    summary = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr[-200:]
    lines += ["", f"Golden check as CI runs it ({', '.join(tests)}): {wall:.1f} s wall, `{summary}`."]
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        Path(out).write_text(text)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
