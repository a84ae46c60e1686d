"""Shared test plumbing: the GPU skip with its reason, bitwise comparison, and the GPU summary.

GPU tests are marked `gpu` and skip on machines without CUDA (CI), saying so. With
REIMPL_GPU_SUMMARY=path set, a session writes per-group case and mismatch counts there.
"""
from __future__ import annotations

import json
import os
from collections import defaultdict

import pytest

pytest_plugins = ["pytester"]  # tests/test_testing_cpu.py runs a user's test file through the plugin
import torch


_RESULTS: dict[str, dict[str, int]] = defaultdict(lambda: {"cases": 0, "mismatched_cases": 0,
                                                           "elements_compared": 0, "mismatched_elements": 0})


def cuda_skip_reason() -> str | None:
    if not torch.cuda.is_available():
        return ("no CUDA device here (torch.cuda.is_available() is False); the GPU suite runs on a GPU "
                "machine: scripts/gpu/gpu_suite.sh")
    try:
        import cupy  # noqa: F401
    except ImportError:
        return "CuPy is not installed (pip install '.[gpu]')"
    return None


def pytest_collection_modifyitems(config, items):
    reason = cuda_skip_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def record(group: str, elements: int, mismatches: int) -> None:
    r = _RESULTS[group]
    r["cases"] += 1
    r["elements_compared"] += elements
    r["mismatched_elements"] += mismatches
    r["mismatched_cases"] += int(mismatches > 0)


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("REIMPL_GPU_SUMMARY")
    if path and _RESULTS:
        with open(path, "w") as f:
            json.dump({"groups": dict(_RESULTS), "exitstatus": int(exitstatus)}, f, indent=1)
