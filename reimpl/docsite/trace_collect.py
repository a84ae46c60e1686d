"""The trace directive's data: its options parsed into a case, the case run through the CPU emulator
with the trace on, and the steps of the kernel and block it names. What a step kind holds (its aux
meaning and value fields) is read from reimpl.emulator.trace.KINDS, so a new kind needs nothing here.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

WARP = 32

_CASE_KEYS = {"op", "dtype", "shape", "weight", "bias", "x_offset", "w_offset", "b_offset", "values", "seed", "eps",
              "norm_ndim"}
_BACKWARD_KEYS = {"backward", "mask", "dy_offset", "dy_values"}
_VIEW_KEYS = {"kernel", "block", "kinds", "threads", "tree", "focus", "root", "stop", "open", "tables", "call", "leaves"}


def aux_of(kind: str) -> str:
    """What a step kind's aux field means: "partner", "slot", "element" or "none"."""
    from ..emulator.trace import KINDS
    return KINDS[kind][2]


def fields_of(kind: str) -> tuple:
    """The value fields a step kind records."""
    from ..emulator.trace import KINDS
    return KINDS[kind][3]


@dataclass
class Example:
    case: object
    trace: object
    outputs: tuple
    launches: list


@functools.lru_cache(maxsize=32)
def emulate(case) -> Example:
    """Emulate `case` with the trace on; cached for the build. A reimpl.checks.cases.Case runs the forward;
    a reimpl.checks.cases_backward.BackwardCase runs the backward (see `emulate_backward`)."""
    from .. import emulator
    from ..checks.cases_backward import BackwardCase
    from ..emulator import trace as T
    from ..checks.plan import host_launches
    if isinstance(case, BackwardCase):
        tr, outs = emulate_backward(case)
        return Example(case, tr, tuple(outs), host_launches(case))
    x, w, b = case.make_inputs("cpu")
    with T.recording(meta={"case": case.as_dict()}) as tr:
        outs = emulator.run_case(case, x, w, b)
    return Example(case, tr, tuple(outs), host_launches(case))


def emulate_backward(case):
    """(trace, outputs) of a BackwardCase's backward on the emulator, only the backward recorded.

    grad_out, x, weight and bias are the case's own (BackwardCase.make_args on the CPU, so grad_out
    has its seed stream and storage offset). mean and rstd are not the case's (torch's CPU forward,
    whose bits may depend on the CPU): they come from the emulated forward on the same x, weight and
    bias, i.e. the bits the H100's forward hands to the backward, the same on every machine."""
    from ..emulator import api
    from ..emulator import trace as T
    args = api.backward_args(case)                         # the forward is not recorded
    with T.recording(meta={"case": case.as_dict(), "backward": True}) as tr:
        outs = api.run_backward_case(case, *args)
    return tr, outs


def parse_directive(args: str) -> dict[str, str]:
    opts = {}
    for item in args.split():
        key, eq, value = item.partition("=")
        if not eq:
            value = "1"
        if key in opts or not (key in _CASE_KEYS or key in _BACKWARD_KEYS or key in _VIEW_KEYS
                               or key.startswith("threads.")):
            raise ValueError(f"trace directive: unknown or repeated option {key!r}")
        opts[key] = value
    if not _is_backward(opts) and _BACKWARD_KEYS & set(opts) - {"backward"}:
        raise ValueError(f"trace directive: {sorted(_BACKWARD_KEYS & set(opts) - {'backward'})} need backward=1")
    for key in ("op", "dtype", "shape", "kernel"):
        if key not in opts:
            raise ValueError(f"trace directive: {key}= is required ({args!r})")
    return opts


def _is_backward(opts: dict) -> bool:
    return opts.get("backward", "0") not in ("0", "no", "false")


def case_of(opts: dict):
    """A reimpl.checks.cases.Case, or with backward=1 a reimpl.checks.cases_backward.BackwardCase (mask=1,1,0:
    output_mask, default every gradient that exists; dy_offset, dy_values: grad_out's)."""
    from ..checks.cases import Case
    from ..checks.cases_backward import BackwardCase
    kw = {"shape": tuple(int(s) for s in opts["shape"].split(","))}
    for key in ("x_offset", "w_offset", "b_offset", "seed", "norm_ndim"):
        if key in opts:
            kw[key] = int(opts[key])
    for key in ("weight", "bias"):
        if key in opts:
            kw[key] = opts[key] not in ("0", "no", "false")
    if "values" in opts:
        kw["values"] = opts["values"]
    if "eps" in opts:
        kw["eps"] = float(opts["eps"])
    if not _is_backward(opts):
        return Case(opts["op"], opts["dtype"], **kw)
    if "mask" in opts:
        kw["mask"] = tuple(m not in ("0", "no", "false") for m in opts["mask"].split(","))
    else:   # every gradient that exists (asking for a missing weight's is an error)
        kw["mask"] = (True, kw.get("weight", True), kw.get("bias", True) and opts["op"] == "layer_norm")
    if "dy_offset" in opts:
        kw["dy_offset"] = int(opts["dy_offset"])
    if "dy_values" in opts:
        kw["dy_values"] = opts["dy_values"]
    return BackwardCase(opts["op"], opts["dtype"], **kw)


def thread_list(spec: str) -> list[int]:
    """threads=0,1,4-7 as a list."""
    out = []
    for part in spec.split(","):
        a, dash, b = part.partition("-")
        out += list(range(int(a), int(b) + 1)) if dash else [int(a)]
    return out


def kernel_steps(ex: Example, opts: dict, page: str = ""):
    """The steps of the directive's kernel (its template name before `<`) and block."""
    kernel, block = opts["kernel"], int(opts.get("block", 0))
    steps = [s for s in ex.trace.steps if s.kernel.split("<")[0] == kernel and s.block == block]
    if not steps:
        raise ValueError(f"{page}: trace directive: {ex.case.id} runs no {kernel} (block {block}); it runs "
                         f"{sorted({s.kernel for s in ex.trace.steps})}")
    return steps
