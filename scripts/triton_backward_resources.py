"""What the compiler makes of the Triton backward rungs' dX program (reimpl/ladder/triton_rungs.py,
`ln_bwd_dx`): Triton compiles it for sm_90 at the warps the rung uses for each tile (`bwd_plan`), and
cuobjdump -res-usage reads each cubin's registers a thread and stack frame (local memory) a thread.
No GPU is needed: Triton compiles for a named target, and cuobjdump comes from PyPI
(reimpl.upstream.releases.cuobjdump).

Usage (Triton importable, e.g. `pip install --no-deps triton==3.6.0` into a virtual environment):
    python scripts/triton_backward_resources.py results/triton_backward_resources.json"""
import datetime
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from reimpl.ladder import triton_rungs  # noqa: E402
from reimpl.upstream.releases import cuobjdump  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
DTYPES = {"fp32": 4, "bf16": 2}
BLOCKS = tuple(1 << k for k in range(6, 15))  # tiles of 64 to 16384 columns: every row the rung holds


def resources(cubin: bytes, tool: Path) -> tuple[int, int]:
    """(registers, stack bytes) a thread of the one kernel in `cubin`."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([str(tool), "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"REG:(\d+)", out).group(1)), int(re.search(r"STACK:(\d+)", out).group(1))


def main(out: str) -> None:
    _, _, ln_bwd_dx, _ = triton_rungs._kernels()
    tool = cuobjdump()
    version = subprocess.run([str(tool), "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    rows = []
    for dtype in DTYPES:
        p = "*fp32" if dtype == "fp32" else "*bf16"
        for block in BLOCKS:
            N = block  # bwd_plan's tile for rows of block // 2 + 1 to block
            _, warps = triton_rungs.bwd_plan(N)
            for kernel, rms in (("triton_ln", False), ("triton_rms", True)):
                sig = {"X": p, "DY": p, "DX": p, "W": p, "Mean": "*fp32", "Rstd": "*fp32", "DW_part": "*fp32",
                       "DB_part": "*fp32", "stride": "i32", "M": "i32", "N": "i32", "rows_per_prog": "i32",
                       "BLOCK": "constexpr", "HAS_W": "constexpr", "HAS_B": "constexpr", "RMS": "constexpr"}
                src = ASTSource(ln_bwd_dx, sig, constexprs={"BLOCK": block, "HAS_W": True, "HAS_B": not rms,
                                                             "RMS": rms})
                compiled = triton.compile(src, target=TARGET, options={"num_warps": warps})
                regs, stack = resources(compiled.asm["cubin"], tool)
                rows.append({"kernel": kernel, "dtype": dtype, "block": block, "num_warps": warps,
                             "registers": regs, "stack_bytes": stack})
                print(kernel, dtype, block, warps, regs, stack, flush=True)
    Path(out).write_text(json.dumps({
        "what": "registers and stack frame a thread of the Triton backward's dX program (ln_bwd_dx) for each "
                "tile, compiled for sm_90 at the rung's warps, read by cuobjdump -res-usage",
        "triton": triton.__version__, "target": "sm_90", "cuobjdump": version,
        "date": datetime.date.today().isoformat(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
