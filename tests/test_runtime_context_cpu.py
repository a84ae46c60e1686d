"""CPU-only: the runtime the host mirror launches through belongs to the calling context
(reimpl/device/runtime.py). Eight threads run the host mirror at once, each under a recording
runtime of its own, and each records exactly the launches that the same cases make when run one at
a time, and none of another thread's; a thread that sets no runtime sees none set."""
import json
import threading
from pathlib import Path

from reimpl.checks.cases import Case
from reimpl.checks.cases_backward import BackwardCase
from reimpl.checks.plan import host_launches
from reimpl.device import runtime

from .thread_helpers import run_together

REF = Path(__file__).resolve().parents[1] / "reference"
FORWARD = json.loads((REF / "torch_launches_forward.json").read_text())["cases"][:48]
BACKWARD = json.loads((REF / "torch_launches_backward.json").read_text())["cases"][:48]
THREADS = 8


def _cases():
    return ([Case.from_dict(c["case"]) for c in FORWARD] + [BackwardCase.from_dict(c["case"]) for c in BACKWARD])


def test_threads_record_only_their_own_launches():
    cases = _cases()
    alone = [host_launches(c) for c in cases]  # one at a time
    got: dict[int, list] = {}

    def work(k, start):
        mine = cases[k::THREADS]
        start.wait()
        got[k] = [host_launches(c) for c in mine]

    errors = run_together(work, THREADS)
    assert not errors, errors
    for k in range(THREADS):
        assert got[k] == alone[k::THREADS], f"thread {k} recorded other launches than its cases make alone"


def test_a_runtime_set_in_one_thread_is_not_seen_in_another():
    mine = runtime.RecordingRuntime()
    seen = []
    inside, done = threading.Event(), threading.Event()

    def other():
        inside.wait()
        seen.append(runtime.current())
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with runtime.use(mine):
        assert runtime.get() is mine
        inside.set()
        done.wait()
    t.join()
    assert seen == [None]
    assert runtime.current() is None  # and `use` put back what was there
