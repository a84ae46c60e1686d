"""Reading a trace: tables for one block, warp or thread, and stopping in pdb inside a device function.

`python -m reimpl trace` (reimpl/cli.py) is built from these:
  format_trace(tr, block=0, warp=0)      one table per step: each selected thread that took part,
                                         its partner / slot / element, its values and their bits
  break_in("cuWelfordCombine", 3)        a context manager: pdb stops at the 3rd call of that
                                         emulated device function, in its frame (its arguments in scope)
"""
from __future__ import annotations

import contextlib
import pdb
import sys
from pathlib import Path

import numpy as np

from . import trace as T

EMULATOR_DIR = str(Path(__file__).parent)


def _fmt(v) -> str:
    if isinstance(v, (np.integer, int)):
        return str(int(v))
    return np.format_float_positional(v, unique=True, trim="-") if abs(float(v)) >= 1e-4 or v == 0 \
        else np.format_float_scientific(v, unique=True, trim="-")


def _hex(v) -> str:
    b = int(T._bits(np.asarray([v]))[0])
    return f"{b:016x}" if np.asarray(v).dtype.itemsize == 8 else f"{b:08x}"


def select(tr: T.Trace, block: int | None = 0, kinds=None, kernel: str | None = None) -> list[T.Step]:
    return [s for s in tr.steps
            if (block is None or s.block == block) and (not kinds or s.kind in kinds)
            and (kernel is None or kernel in s.kernel)]


def format_step(s: T.Step, threads: np.ndarray, block_x: int = 32) -> str:
    """One step as a table: rows are the chosen threads that executed it."""
    names = T.KINDS[s.kind][3]
    aux_name = T.KINDS[s.kind][2]
    rows = [t for t in threads if t < len(s.active) and s.active[t]]
    head = f"{s.kernel} · block {s.block} · {s.func} · {s.kind} #{s.index} · {s.detail}"
    if not rows:
        return head + "\n  (none of the chosen threads took part)\n"
    cols = ["thread", "(x,y)", "lane"] + ([aux_name] if aux_name != "none" else [])
    cols += [f"{n}" for n in names] + [f"{n} bits" for n in names]
    table = []
    for t in rows:
        r = [str(t), f"({t % block_x},{t // block_x})", str(t % 32)]
        if aux_name != "none":
            a = int(s.aux[t])
            r.append("-" if a == T.AUX_NONE else str(a))
        r += [_fmt(s.values[n][t]) for n in names] + [_hex(s.values[n][t]) for n in names]
        table.append(r)
    width = [max(len(c), *(len(r[i]) for r in table)) for i, c in enumerate(cols)]
    line = lambda r: "  " + "  ".join(x.rjust(w) for x, w in zip(r, width))  # noqa: E731
    return "\n".join([head, line(cols), *(line(r) for r in table)]) + "\n"


def threads_of(nthreads: int, warp: int | None = None, thread: int | None = None) -> np.ndarray:
    if thread is not None:
        return np.array([thread])
    if warp is not None:
        return np.arange(warp * 32, min((warp + 1) * 32, nthreads))
    return np.arange(nthreads)


def format_trace(tr: T.Trace, block: int = 0, warp: int | None = None, thread: int | None = None,
                 kinds=None, kernel: str | None = None, block_x: dict | None = None) -> str:
    """(x, y) labels use each kernel's blockDim.x from the trace's meta (or `block_x`: name -> blockDim.x)."""
    dims = {k: v[0] for k, v in tr.meta.get("blockDim", {}).items()}
    dims.update(block_x or {})
    out = []
    for s in select(tr, block, kinds, kernel):
        bx = dims.get(s.kernel, 32)
        out.append(format_step(s, threads_of(len(s.active), warp, thread), bx))
    return "\n".join(out)


def device_functions() -> list[str]:
    """Names the emulator defines for device functions and kernels (what break_in accepts)."""
    import inspect
    from . import block_reduce, layer_norm_backward, layer_norm_kernel, warp, welford
    mods = [layer_norm_kernel, welford, warp, block_reduce, layer_norm_backward]
    names = set()
    for m in mods:
        for n, obj in vars(m).items():
            if inspect.isfunction(obj) and obj.__module__ == m.__name__ and not n.startswith("_"):
                names.add(n)
            if inspect.isclass(obj) and obj.__module__ == m.__name__:
                names.update(f"{n}::{k}" for k, v in vars(obj).items()
                             if inspect.isfunction(v) and not k.startswith("_"))
    return sorted(names)


@contextlib.contextmanager
def break_in(name: str, nth: int = 1, debugger: pdb.Pdb | None = None):
    """Stop in pdb at the `nth` call of the emulated device function `name` ("cuWelfordCombine",
    "WelfordOps::reduce"), with its frame current, so `p dataB.mean`, `n`, `s` work as usual."""
    known = device_functions()
    if name not in known:
        raise ValueError(f"no emulated device function {name!r}; known: {', '.join(known)}")
    qual = name.replace("::", ".")
    calls = 0

    def tracer(frame, event, arg):
        nonlocal calls
        code = frame.f_code
        if event == "call" and code.co_filename.startswith(EMULATOR_DIR) and code.co_qualname == qual:
            calls += 1
            if calls == nth:
                dbg = debugger or pdb.Pdb()
                dbg.set_trace(frame)       # replaces this tracer with pdb's
                return dbg.trace_dispatch  # and makes pdb this frame's local tracer
        return None if calls >= nth else tracer

    sys.settrace(tracer)
    try:
        yield
    finally:
        if sys.gettrace() is tracer:
            sys.settrace(None)
