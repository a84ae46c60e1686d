"""Measure the rungs of the ladder (reimpl/ladder/registry.py, CUDA and Triton) on every input family, dtype and
shape (reimpl.checks.ladder_errors) and write the table as JSON with the environment stamp.
With rung names after the path, only those rungs are measured and their rows replace theirs in the
file, the others' kept; every row names its run (`run` indexes `runs`, each with its stamp).
Usage (a CUDA machine): python scripts/gpu/ladder_errors.py results/ladder_errors.json [RUNG ...]"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl.checks.ladder_errors import FAMILIES, all_rungs, measure, shapes  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402


def main(out: str, *only: str) -> None:
    path = Path(out)
    old = json.loads(path.read_text()) if only and path.is_file() else {}
    # a file from before runs were recorded: its stamp is its one run
    runs = old.get("runs") or ([{k: v for k, v in old.items() if k != "rows"}] if old else [])
    kept = [{**r, "run": r.get("run", 0)} for r in old.get("rows", []) if r["rung"] not in only]
    run = len(runs)
    runs.append(stamp())
    rows = []
    for rung in only or all_rungs():
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for family in FAMILIES:
                for M, N in shapes():
                    rows.append({**measure(rung, dtype, family, M, N), "run": run})
        # written after every rung: a run cut short keeps what it measured
        path.write_text(json.dumps({**runs[-1], "runs": runs, "rows": kept + rows}, indent=0) + "\n")
        print(rung, "done", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
