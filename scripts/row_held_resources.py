"""Registers and stack frame of ln_row_held's block-plan instantiations, compiled by NVRTC for sm_90
and read by `cuobjdump -res-usage`, for the kernel file as committed and as it was at a given git
revision (the file of that revision, with today's headers). No GPU needed: NVRTC and cuobjdump (PyPI's
nvidia-cuda-cuobjdump, with nvidia-cuda-nvdisasm beside it) run anywhere.
Usage: python scripts/row_held_resources.py OUT.json REV CUOBJDUMP"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reimpl.device import compile as compile_mod  # noqa: E402
from reimpl.device.compile import CudaSource  # noqa: E402
from reimpl.ladder import rungs  # noqa: E402
from reimpl.ladder.launch import STORAGE, held_plan  # noqa: E402

FILE = "reimpl/ladder/cuda/ln_row_held.cu"
# widths whose rows take block plans (one block, or a cluster), per storage type
WIDTHS = {"float32": (4096, 8192, 12288, 16384, 32768), "bfloat16": (4096, 8192, 12288, 16384, 32768),
          "float16": (4096, 8192, 12288, 16384, 32768)}


def resources(text: str, cuobjdump: str) -> dict:
    """(rung, dtype, N) -> {"registers", "stack"} for the block-plan instantiations compiled from `text`."""
    src = rungs.SOURCES[FILE]
    tmp = Path(tempfile.mkdtemp())
    for f in src.directory.iterdir():
        if f.suffix in (".cu", ".cuh"):
            shutil.copy(f, tmp / f.name)
    (tmp / src.main).write_text(text)
    cells = [(name, dt, N) for dt, Ns in WIDTHS.items() for N in Ns for name in ("row_held", "rms_row_held")]
    kernels = [rungs.kernel_for(rungs.RUNGS[name], STORAGE[dt], N) for name, dt, N in cells]
    prog = compile_mod.build(CudaSource(tmp, src.main, src.default_kernels, src.include_dirs, src.numerics), "sm_90",
                             kernels, use_cache=False)
    (tmp / "k.cubin").write_bytes(prog.cubin)
    usage = subprocess.run([cuobjdump, "-res-usage", str(tmp / "k.cubin")], capture_output=True, text=True,
                           check=True).stdout
    found = {m.group(1): (int(m.group(2)), int(m.group(3)))
             for m in re.finditer(r"Function (\S+):\n\s*REG:(\d+) STACK:(\d+)", usage)}
    out = {}
    for (name, dt, N), k in zip(cells, kernels):
        reg, stack = found[prog.lowered[k.expr]]
        out[(name, dt, N)] = {"registers": reg, "stack": stack, "plan": list(held_plan(N, STORAGE[dt].itemsize).targs),
                              "block": held_plan(N, STORAGE[dt].itemsize).block}
    return out


def main(out: str, rev: str, cuobjdump: str) -> None:
    old = subprocess.run(["git", "show", f"{rev}:{FILE}"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    rows = []
    for which, text in (("before", old), ("now", (ROOT / FILE).read_text())):
        for (name, dt, N), r in resources(text, cuobjdump).items():
            rows.append({"kernel_file": which, "rung": name, "dtype": dt, "N": N, **r})
    Path(out).write_text(json.dumps({"what": "registers and stack bytes a thread of ln_row_held's block plans, "
                                     "sm_90, NVRTC, cuobjdump -res-usage", "before": rev, "rows": rows},
                                    indent=0) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
