"""The trace directive's step tables: one per step kind, the chosen threads' aux (partner, slot,
element) and values, each value printed as the shortest decimal that reads back to it and its bits in
hex. Rows carry data-* attributes (kind, index, position in the kernel's steps, thread, bits) that
the tests read back.
"""
from __future__ import annotations

from html import escape

import numpy as np

from .trace_collect import WARP, aux_of, thread_list


def bits_hex(v) -> str:
    a = np.asarray(v)
    if a.dtype.itemsize == 8:
        return f"{int(a.reshape(1).view(np.uint64)[0]):016x}"
    if a.dtype.itemsize == 4:
        return f"{int(a.reshape(1).view(np.uint32)[0]):08x}"
    return f"{int(a.reshape(1).view(np.uint16)[0]):04x}"


def show(v) -> str:
    """The shortest decimal that reads back to the same value (integers as integers)."""
    a = np.asarray(v)
    if np.issubdtype(a.dtype, np.integer):
        return str(int(a))
    f = a[()]
    if not np.isfinite(f):
        return str(float(f))
    if f != 0 and not 1e-4 <= abs(f) < 1e7:
        return np.format_float_scientific(f, unique=True, trim="-")
    return np.format_float_positional(f, unique=True, trim="-")


def _default_threads(kind: str, steps) -> list[int]:
    """partner: lanes 0..7 (each with the lane it read); slot: the first 8 threads that wrote or read
    a slot; none: thread 0 (the result every thread holds); anything else: threads 0 and 1."""
    from ..emulator.trace import AUX_NONE
    aux = aux_of(kind)
    if aux == "partner":
        return list(range(8))
    if aux == "slot":
        seen = sorted({int(t) for s in steps for t in np.flatnonzero(s.active & (s.aux != AUX_NONE))})
        return seen[:8]
    if aux == "none":
        return [0]
    return [0, 1]


def table_threads(opts: dict, kind: str, steps) -> list[int]:
    """The threads a kind's table shows: threads.KIND=, else threads=, else the kind's default."""
    spec = opts.get(f"threads.{kind}", opts.get("threads"))
    return thread_list(spec) if spec else _default_threads(kind, steps)


def _aux_header(aux: str) -> str:
    return {"partner": "partner thread", "slot": "slot", "element": "element"}.get(aux, aux)


def table(kind: str, steps, threads: list[int], block_dim, max_steps: int = 16, positions=None) -> str:
    """`positions`: each step's index in the kernel's step list (data-pos, which tells apart two steps
    of one kind and index, such as WarpReduce's two calls)."""
    from ..emulator.trace import AUX_NONE, KINDS
    _, func, aux, names = KINDS[kind]
    two_d = block_dim[1] > 1
    head = ["step", "thread"] + (["(x, y)"] if two_d else []) + ["lane"] + ([_aux_header(aux)] if aux != "none" else [])
    head += list(names)
    rows = []
    shown = steps[:max_steps]
    positions = positions or list(range(len(steps)))
    for s, pos in zip(shown, positions):
        ts = [t for t in threads if t < len(s.active) and s.active[t]]
        for k, t in enumerate(ts):
            cells = []
            if k == 0:
                cells.append(f'<td rowspan="{len(ts)}">#{s.index}<br><small>{escape(s.detail)}</small></td>')
            cells.append(f"<td>{t}</td>")
            if two_d:
                cells.append(f"<td>({t % block_dim[0]}, {t // block_dim[0]})</td>")
            cells.append(f"<td>{t % WARP}</td>")
            if aux != "none":
                a = int(s.aux[t])
                cells.append(f"<td>{'–' if a == AUX_NONE else a}</td>")
            for n in names:
                v = s.values[n][t]
                cells.append(f'<td data-field="{n}" data-bits="{bits_hex(v)}"><code>{escape(show(v))}</code>'
                             f'<span class="trace-bits">{bits_hex(v)}</span></td>')
            rows.append(f'<tr data-kind="{kind}" data-index="{s.index}" data-pos="{pos}" data-thread="{t}">'
                        + "".join(cells) + "</tr>")
    more = len(steps) - len(shown)
    note = f"<p><small>… and {more} more step(s) of this kind.</small></p>" if more > 0 else ""
    return ('<div class="trace-table"><table><thead><tr>' + "".join(f"<th>{escape(h)}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>" + note)
