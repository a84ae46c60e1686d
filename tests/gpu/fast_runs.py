"""Parity cases run under reimpl.fast's runtime, shared by the forward and dX test files."""
import torch

from reimpl.checks.parity import compare_case
from reimpl.device import runtime
from tests.conftest import record


def run_fast(group: str, counter: str, launches: str, cs) -> tuple[list[str], int]:
    """Compare each case with torch under the fast runtime, recording elements under `group` and,
    once per case that raised the runtime's `launches` count (a fast kernel ran), a `counter` entry.
    Returns (messages of differing outputs, cases that launched a fast kernel)."""
    from reimpl.fast import fast_runtime
    rt = fast_runtime()
    bad, fast_cases = [], 0
    for c in cs:
        before = getattr(rt, launches)
        with runtime.use(rt), torch.no_grad():
            elements, n, msgs = compare_case(c)
        fast_cases += getattr(rt, launches) > before
        record(group, elements, n)
        bad += msgs
    for _ in range(fast_cases):
        record(counter, 0, 0)
    return bad, fast_cases
