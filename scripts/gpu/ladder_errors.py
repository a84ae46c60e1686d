"""Measure every rung of the ladder (reimpl/ladder/registry.py, CUDA and Triton) on every input family, dtype and shape
(reimpl.checks.ladder_errors) and write the table as JSON with the environment stamp.
Usage (a CUDA machine): python scripts/gpu/ladder_errors.py results/ladder_errors.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl.checks.ladder_errors import FAMILIES, all_rungs, measure, shapes  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402


def main(out: str) -> None:
    rows = []
    for rung in all_rungs():
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for family in FAMILIES:
                for M, N in shapes():
                    rows.append(measure(rung, dtype, family, M, N))
        print(rung, "done", flush=True)
    Path(out).write_text(json.dumps({**stamp(), "rows": rows}, indent=0) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
