"""Turn one GPU suite run ($OUT of scripts/gpu/gpu_suite.sh) into the committed summaries
results/gpu_suite_forward.json and results/gpu_suite_backward.json (groups named bwd_* are the
backward's). Usage: python scripts/summarize_gpu_suite.py OUT_DIR "what was run" [NAME]
NAME (default gpu_suite) names the files (a run with no parity group, hence no gpu_summary.json,
writes results/NAME.json with pytest's line alone): a partial run, such as a smoke run after a refactor, is
written as results/NAME_{forward,backward}.json beside the full suite's, not over it.
A re-run of some groups after a change that touches only them (say tests/gpu/test_fast_gpu.py after a
fast-kernel change) replaces those groups in the forward summary and says so:
    python scripts/summarize_gpu_suite.py --rerun OUT_DIR "what was re-run" (OUT_DIR: gpu_summary.json, pytest.log)"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"
KEYS = ("cases", "mismatched_cases", "elements_compared", "mismatched_elements")


def main(out_dir: str, what: str, name: str = "gpu_suite") -> None:
    out = Path(out_dir)
    env = json.loads((out / "env.json").read_text())
    tail = (out / "pytest.log").read_text().strip().splitlines()[-1]
    pytest_line = re.sub(r"^=+ | =+$", "", tail)
    # the process's exit status as gpu_suite.sh saw it: a crash at exit, after pytest's last line
    status_file = out / "pytest_exit"
    process_status = int(status_file.read_text()) if status_file.exists() else None
    if not (out / "gpu_summary.json").exists():
        # tests that compare no parity group write no summary: one file with pytest's line
        failed = re.search(r"\b(failed|error|errors)\b", pytest_line) is not None
        doc = {"what": what, **env, "pytest": pytest_line,
               "pytest_exitstatus": int(failed) if process_status is None else process_status}
        (RESULTS / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(name, pytest_line)
        return
    summary = json.loads((out / "gpu_summary.json").read_text())
    for part, pick in (("forward", lambda g: not g.startswith("bwd_")), ("backward", lambda g: g.startswith("bwd_"))):
        # a group that compared no element is a counter (e.g. fast_kernel_cases), kept apart from parity
        counters = {g: r["cases"] for g, r in summary["groups"].items() if pick(g) and not r["elements_compared"]}
        groups = {g: r for g, r in summary["groups"].items()
                  if pick(g) and not g.endswith("trace_steps") and g not in counters}
        # step traces count records (GPU trace vs emulator trace), not output elements: kept apart
        traces = {g: r for g, r in summary["groups"].items() if pick(g) and g.endswith("trace_steps")}
        if not groups and not counters and not traces:  # a run of one direction's tests only
            continue
        totals = {k: sum(r[k] for r in groups.values()) for k in KEYS}
        status = summary["exitstatus"] if process_status is None else process_status
        doc = {"what": what, **env, "pytest": pytest_line, "pytest_exitstatus": status,
               "parity_groups": groups, "totals": totals, **({"counters": counters} if counters else {})}
        for g, r in traces.items():
            doc["step_trace"] = {"cases": r["cases"], "mismatched_cases": r["mismatched_cases"],
                                 "records_compared": r["elements_compared"]}
        (RESULTS / f"{name}_{part}.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(part, totals)


def rerun(out_dir: str, what: str) -> None:
    out = Path(out_dir)
    summary = json.loads((out / "gpu_summary.json").read_text())
    tail = (out / "pytest.log").read_text().strip().splitlines()[-1]
    path = RESULTS / "gpu_suite_forward.json"
    doc = json.loads(path.read_text())
    assert summary["exitstatus"] == 0, "a failed re-run replaces nothing"
    for g, r in summary["groups"].items():
        if g.startswith("bwd_"):
            raise ValueError(f"{g}: re-runs replace forward groups only")
        if r["elements_compared"]:
            doc["parity_groups"][g] = r
        else:
            doc.setdefault("counters", {})[g] = r["cases"]
    doc["totals"] = {k: sum(r[k] for r in doc["parity_groups"].values()) for k in KEYS}
    doc.setdefault("reruns", []).append({"what": what, "groups": sorted(summary["groups"]),
                                         "pytest": re.sub(r"^=+ | =+$", "", tail)})
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print("forward", doc["totals"])


if __name__ == "__main__":
    if sys.argv[1] == "--rerun":
        rerun(*sys.argv[2:4])
    else:
        main(*sys.argv[1:4])
