"""Turn a GPU test run's JUnit XML (pytest --junitxml) into a committed summary: what was run, the
environment stamp of the run, and per run the command, counts, seconds and every test's name. With an
existing summary, the run is added to its `runs`.
The stamp is given, not read: the XML may come back from the GPU machine to one without a GPU.
Usage: python scripts/junit_summary.py JUNIT.xml OUT.json "COMMAND" "WHAT" DEVICE DATE TORCH CUDA
(an empty WHAT keeps an existing summary's)"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from xml.etree import ElementTree


def summarize(junit: str) -> dict:
    suite = ElementTree.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    cases = suite.findall("testcase")

    def status(c):
        return "failed" if c.find("failure") is not None or c.find("error") is not None else \
            "skipped" if c.find("skipped") is not None else "passed"
    return {"passed": sum(status(c) == "passed" for c in cases), "failed": sum(status(c) == "failed" for c in cases),
            "skipped": sum(status(c) == "skipped" for c in cases), "seconds": round(float(suite.get("time", 0)), 1),
            "tests": [c.get("name") for c in cases if status(c) == "passed"]}


def main(junit: str, out: str, command: str, what: str, device: str, date: str, torch: str, cuda: str) -> None:
    path = Path(out)
    old = json.loads(path.read_text()) if path.is_file() else {}
    rec = {**old, "what": what or old.get("what", ""), "torch": torch, "cuda": cuda, "device": device, "date": date}
    rec["runs"] = old.get("runs", []) + [{"command": command, "device": device, "date": date, "torch": torch,
                                          "cuda": cuda, **summarize(junit)}]
    path.write_text(json.dumps(rec, indent=0) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
