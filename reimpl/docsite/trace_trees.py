"""The reduction tree of a traced kernel, built from the trace's own aux fields: which thread's state
merged into which, step by step, up to the state one thread ends with.

Generic over reimpl.emulator.trace.KINDS: the tree understands the aux meanings "partner" (a shuffle:
the thread merges the partner thread's state) and "slot" (a shared-memory round: a "slot" step whose
threads write, then a "slot" step with the same index whose threads read and merge, or take the state
as is). Drawing it is reimpl.docsite.trace_tree_svg's job.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .trace_collect import aux_of, fields_of
from .trace_tables import bits_hex


@dataclass(eq=False)
class Node:
    thread: int
    pos: int                    # index of the step that made this state in the kernel's step list; -1: leaf
    step: object                # that Step (for a leaf: the step its values come from, or None)
    values: dict                # field -> numpy scalar
    children: list = field(default_factory=list)   # [(Node, "own" | "partner" | "slot" | "hop")]
    row: int = -1
    cls: str = ""               # "leaf", "inner", "collapsed", "stub" (after layout)
    source: str = "own elements"   # the root's: where the leaves came from (see _leaf_source)

    @property
    def empty(self) -> bool:
        return all(float(v) == 0 for v in self.values.values())

    @property
    def kind(self) -> str | None:
        return None if self.pos < 0 or self.step is None else self.step.kind


def same_bits(a: dict, b: dict) -> bool:
    """The same fields, each with the same bits (-0.0 and 0.0 differ, NaNs compare by payload)."""
    return a.keys() == b.keys() and all(bits_hex(a[k]) == bits_hex(b[k]) for k in a)


def merges(kind: str) -> bool:
    """Whether a step of this kind merges another thread's state into a thread's."""
    return aux_of(kind) in ("partner", "slot")


def calls(steps) -> list[tuple[int, int]]:
    """The reduction calls among `steps`: (first, last) positions of each one's merge steps ("partner"
    and "slot" kinds). A call ends where the next merge step starts afresh, which the trace shows by
    its own fields: a step with other value fields, or a shuffle round that does not come after the
    previous one (its kind's index is not above the last round's, with no shared-memory step in
    between). So BlockReduceSum called twice in a row (compute_gI's stats_x1, then stats_x2) is two
    calls, while BlockReduce's second WarpReduce (after the shared-memory hop) and GammaBeta's columns
    (a shared-memory read before each) stay one."""
    out: list[list[int]] = []
    prev = None
    for i, s in enumerate(steps):
        if not merges(s.kind):
            continue
        p = steps[prev] if prev is not None else None
        fresh = (p is None or fields_of(p.kind) != fields_of(s.kind)
                 or (aux_of(s.kind) == "partner" and p.kind == s.kind and p.index >= s.index))
        if fresh:
            out.append([i, i])
        out[-1][1] = i
        prev = i
    return [(f, l) for f, l in out]


def _leaf_source(steps, first: int, leaves: str | None):
    """Where the leaves of the call starting at `first` come from: (step, {tree field: step field},
    description). In order: `leaves=KIND` or `leaves=KIND.FIELD[,FIELD]` (the latest step of KIND
    before the call, its fields in order); the latest earlier step that merges nothing and has the
    call's fields (the forward's per-thread Welford states); one whose field the call's detail names
    first ("stats_x2, each warp: ..."); one with as many fields, taken in order (GammaBeta's dg_sum,
    db_sum for dg, db); the call's own first step when it is a shared-memory write (the states as
    written). Else a ValueError that asks for leaves=."""
    names = fields_of(steps[first].kind)
    before = [steps[i] for i in range(first - 1, -1, -1) if not merges(steps[i].kind)]
    if leaves:
        kind, _, spec = leaves.partition(".")
        base = next((s for s in before if s.kind == kind), None)
        fields = spec.split(",") if spec else list(fields_of(kind)) if base is not None else []
        if base is None or len(fields) != len(names) or not set(fields) <= set(base.values):
            raise ValueError(f"leaves={leaves}: need a {kind} step before the reduction with {len(names)} "
                             f"field(s) for {list(names)}")
        return base, dict(zip(names, fields)), leaves
    base = next((s for s in before if fields_of(s.kind) == names), None)
    if base is not None:
        own = aux_of(base.kind) == "element"
        return base, {k: k for k in names}, "own elements" if own else base.kind
    m = re.match(r"(\w+), ", steps[first].detail)
    if m and len(names) == 1:
        base = next((s for s in before if m.group(1) in s.values), None)
        if base is not None:
            return base, {names[0]: m.group(1)}, f"{base.kind}.{m.group(1)}"
    base = next((s for s in before if len(fields_of(s.kind)) == len(names)), None)
    if base is not None:
        return base, dict(zip(names, fields_of(base.kind))), base.kind
    if aux_of(steps[first].kind) == "slot":
        return steps[first], {k: k for k in names}, f"{steps[first].kind} (as written)"
    raise ValueError(f"no step before {steps[first].kind} #{steps[first].index} tells the reduction's "
                     "inputs: say leaves=KIND.FIELD")


def build_tree(steps, root: int = 0, call: int | None = None, leaves: str | None = None) -> Node | None:
    """The merge tree of one reduction call (see `calls`; call=None: the only one) that ends in thread
    `root`'s state, from the steps' own aux fields.

    Leaves are each thread's state just before the call (see `_leaf_source`). A "partner" step makes,
    for each active thread t, a node with children t's previous state and the partner's (aux[t];
    aux[t] == t means the shuffle gave t its own value back). Shared memory is followed slot by slot:
    the call's first "slot" kind writes (each active thread w puts its state in slot aux[w]), its
    other "slot" kinds read: a thread that read slot aux[t] gets a node whose children are its
    previous state and the slot's writer's, or only the writer's when its values equal the writer's
    bit for bit (the state moved unchanged: a hop); a thread with no slot (aux -1), or one whose slot
    nothing in the call wrote, starts afresh from what it holds (an identity leaf). The root carries
    `source`, where the leaves came from."""
    from ..emulator.trace import AUX_NONE
    cs = calls(steps)
    if not cs:
        return None
    if call is None:
        if len(cs) > 1:
            raise ValueError(f"{len(cs)} reduction calls in these steps: choose call=1 … {len(cs)}")
        call = 1
    if not 1 <= call <= len(cs):
        raise ValueError(f"call={call}: these steps hold {len(cs)} reduction call(s)")
    first, last = cs[call - 1]
    names = fields_of(steps[first].kind)
    base, fmap, source = _leaf_source(steps, first, leaves)
    n = len(steps[first].active)

    def vals(s, t, m=None):
        return {k: s.values[(m or {}).get(k, k)][t] for k in names}

    cur = [Node(t, -1, base, vals(base, t, fmap)) for t in range(n)]
    write_kind = next((steps[i].kind for i in range(first, last + 1) if aux_of(steps[i].kind) == "slot"), None)
    shared: dict[int, Node] = {}
    for i in range(first, last + 1):
        s = steps[i]
        if not merges(s.kind) or fields_of(s.kind) != names:
            continue
        if aux_of(s.kind) == "partner":
            prev = list(cur)
            for t in np.flatnonzero(s.active):
                p = int(s.aux[t])
                kids = [(prev[t], "own")] + ([(prev[p], "partner")] if p != t and 0 <= p < n else [])
                cur[t] = Node(int(t), i, s, vals(s, t), kids)
        elif s.kind == write_kind:
            for w in np.flatnonzero(s.active):
                shared[int(s.aux[w])] = cur[w]
        else:
            prev = list(cur)
            for t in np.flatnonzero(s.active):
                sl, v = int(s.aux[t]), vals(s, t)
                src = shared.get(sl) if sl != AUX_NONE else None
                if src is None:
                    cur[t] = Node(int(t), i, s, v)
                else:
                    kids = [(src, "hop")] if same_bits(v, src.values) else [(prev[t], "own"), (src, "slot")]
                    cur[t] = Node(int(t), i, s, v, kids)
    top = cur[root]
    top.source = source
    return top

