"""Running a test's work in several threads at once, with their host calls interleaved."""
from __future__ import annotations

import sys
import threading


def run_together(work, n: int) -> list[tuple[int, str]]:
    """work(k, barrier) in n threads (k = 0 .. n-1) that switch often, so that their Python
    interleaves; returns (k, repr(exception)) for each thread that raised."""
    barrier = threading.Barrier(n)
    errors: list[tuple[int, str]] = []

    def run(k):
        try:
            work(k, barrier)
        except BaseException as e:  # reported to the test, with the thread's index
            errors.append((k, repr(e)))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    return errors
