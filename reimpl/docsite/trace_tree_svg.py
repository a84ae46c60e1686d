"""The reduction tree drawn as an inline SVG: leaves on the left, the root on the right, one row per
drawn leaf and one column per merge step (`tree`). Edges and nodes carry data-* attributes (kind,
position in the kernel's steps, threads, bits) that the tests read back.
"""
from __future__ import annotations

import re
from html import escape

import numpy as np

from .trace_collect import WARP, aux_of
from .trace_tables import bits_hex, show
from .trace_trees import Node, build_tree, same_bits


def _walk(node: Node):
    yield node
    for c, _ in node.children:
        yield from _walk(c)


def _layout(root: Node, focus: int | None) -> list[Node]:
    """Classify the nodes and give each drawn one a row, own state first, so the drawing is planar:
    stub = an empty state (nothing merged in), collapsed = a warp's own shuffle tree (one warp, partner
    edges only) outside the focus warp, leaf, inner. Returns the drawn nodes."""
    memo: dict[int, tuple[set, bool]] = {}

    def info(nd: Node):
        if id(nd) not in memo:
            warps, shuffle_only = {nd.thread // WARP}, True
            for c, e in nd.children:
                w, so = info(c)
                warps |= w
                shuffle_only &= so and e in ("own", "partner")
            memo[id(nd)] = (warps, shuffle_only)
        return memo[id(nd)]

    drawn, next_row = [], [0]

    def place(nd: Node, is_root: bool = False):
        warps, shuffle_only = info(nd)
        if nd.empty and not is_root and not root.empty:
            nd.cls = "stub"
            return
        if not nd.children:
            nd.cls = "leaf"
        elif shuffle_only and len(warps) == 1 and nd.thread // WARP != focus and nd.pos >= 0:
            nd.cls = "collapsed"
        else:
            nd.cls = "inner"
        drawn.append(nd)
        if nd.cls != "inner":
            nd.row, next_row[0] = next_row[0], next_row[0] + 1
            return
        for c, _ in nd.children:
            place(c)
        rows = [c.row for c, _ in nd.children if c.cls != "stub"]
        if rows:
            nd.row = rows[0]
        else:
            nd.row, next_row[0] = next_row[0], next_row[0] + 1

    place(root, True)
    return drawn


_ABBR = {"count": "n", "nf": "n", "mean": "μ", "sigma2": "σ2", "m2": "m2", "n": "n"}
_PREFER = ("count", "nf", "mean", "sigma2", "m2")


def _label_fields(nodes: list[Node], limit: int = 2) -> list[str]:
    names = list(nodes[0].values)
    if "nf" in names and "n" in names:
        names.remove("n")  # n is the integer twin of nf (and -1 after a combine)
    live = [k for k in names if any(float(nd.values[k]) != 0 for nd in nodes)] or names[:1]
    live.sort(key=lambda k: _PREFER.index(k) if k in _PREFER else len(_PREFER))
    return live[:limit]


def _short(v, digits: int = 4) -> str:
    """A value as a tree label shows it: `digits` significant digits, integers as integers."""
    a = np.asarray(v)
    if np.issubdtype(a.dtype, np.integer) or (np.isfinite(a) and float(a) == int(float(a)) and abs(float(a)) < 1e7):
        return str(int(float(a)))
    f = float(a)
    if f != 0 and abs(f) < 1e-2:   # 9.56e-4, not 0.000956: the labels must stay short
        m, e = f"{f:.{digits - 1}e}".split("e")
        return f"{m}e{int(e)}"
    return f"{f:.{digits}g}"


def _summary(nd: Node, keys: list[str], digits: int = 4) -> str:
    return " ".join(f"{_ABBR.get(k, k)}={_short(nd.values[k], digits)}" for k in keys)


def _tooltip(nd: Node, source: str = "own elements") -> str:
    if nd.pos >= 0:
        what = f"{nd.step.kind} #{nd.step.index} ({nd.step.detail})"
    elif source == "own elements" or nd.step is None:
        what = "leaf: its own elements"
    else:
        what = f"leaf: {source}, step #{nd.step.index}"
    vals = ", ".join(f"{k} = {show(v)} [{bits_hex(v)}]" for k, v in nd.values.items())
    return f"thread {nd.thread} (warp {nd.thread // WARP}, lane {nd.thread % WARP}) after {what}: {vals}"


def _column_header(step) -> tuple[str, str]:
    """(group label, column label): the kind plus the phase its detail names ("each warp: offset = 16"
    -> "warp_reduce · each warp", "offset 16"); columns with the same group label share one header."""
    m = re.search(r"(offset|delta) = (\d+)", step.detail)
    head, sep, _ = re.sub(r"^\w+, ", "", step.detail).partition(": ")   # "stats_x2, each warp: …": the call's name
    phase = f" · {head}" if sep and "offset" not in head and len(head) <= 16 else ""
    return step.kind + phase, (f"{m.group(1)} {m.group(2)}" if m else f"#{step.index}")


def tree(steps, root: int = 0, focus: int | str | None = "auto", title: str = "", call: int | None = None,
         leaves: str | None = None) -> str:
    """An inline SVG, leaves on the left and the root on the right: one row per leaf (a thread's own
    state), one column per merge step. A shuffle (partner) edge is solid, a shared-memory edge dashed,
    an empty state merged in is a small grey dot, and a warp's whole shuffle tree outside the focus warp
    is one grey box. Nodes whose state did not change (only an empty state came in) carry no label.
    `call`, `leaves`: which reduction call, and where its leaves come from (see build_tree)."""
    top = build_tree(steps, root, call, leaves)
    if top is None:
        return ""
    if focus == "auto":
        focus = root // WARP
    nodes = _layout(top, None if focus is None else int(focus))
    if len(nodes) > 400:   # a picture nobody can read, and megabytes of page
        raise ValueError(f"reduction tree of {len(nodes)} nodes: choose focus=none, stop=KIND, another root= or tree=0")
    cols = sorted({nd.pos for nd in nodes if nd.pos >= 0})
    col_of = {p: k for k, p in enumerate(cols)}
    step_at = {nd.pos: nd.step for nd in nodes if nd.pos >= 0}
    keys = _label_fields(nodes)
    n_rows = 1 + max(nd.row for nd in nodes)
    root_text = f"thread {top.thread} ends with {_summary(top, _label_fields(nodes, 3))}"
    LW, CW, RW, RH, TOP = 108, 78, 26, 16, 46   # fits the 690 px of the page's text column with 7 columns
    leaf_text = {id(nd): f"t{nd.thread}{'' if nd.pos < 0 else f' ({nd.kind})'}  {_summary(nd, keys)}"
                 for nd in nodes if nd.cls == "leaf"}
    LW = max([LW] + [int(len(t) * 6.1) + 10 for t in leaf_text.values()])   # room for the longest leaf label
    xl = LW + 10

    def X(nd: Node) -> float:
        return xl if nd.pos < 0 else xl + (col_of[nd.pos] + 1) * CW

    def Y(nd: Node) -> float:
        return TOP + nd.row * RH + 8

    width = max(xl + len(cols) * CW + RW, 540)
    height = TOP + n_rows * RH + 74
    b = []
    if any(nd.pos < 0 for nd in nodes):
        b.append(f"<text class='trt-h' x='{xl}' y='14' text-anchor='middle'>leaves</text>"
                 f"<text class='trt-s' x='{xl}' y='28' text-anchor='middle'>{escape(top.source)}</text>")
    groups: list[list[int]] = []
    for p in cols:
        if groups and _column_header(step_at[groups[-1][-1]])[0] == _column_header(step_at[p])[0] \
                and step_at[groups[-1][-1]].kind == step_at[p].kind:
            groups[-1].append(p)
        else:
            groups.append([p])
    for g in groups:
        x0, x1 = xl + (col_of[g[0]] + 1) * CW, xl + (col_of[g[-1]] + 1) * CW
        s = step_at[g[0]]
        cls = "trt-hs" if aux_of(s.kind) == "slot" else "trt-h"
        label = _column_header(s)[0] if len(g) > 1 else s.kind   # one column is too narrow for the phase
        if len(g) == 1 and len(label) * 6.1 > CW - 8:            # nor, in bold 10 px, for a long kind name
            cls += " trt-hn"
        b.append(f"<text class='{cls}' x='{(x0 + x1) / 2}' y='12' text-anchor='middle'>{escape(label)}</text>")
        if len(g) > 1:
            b.append(f"<polyline class='trt-grid2' points='{x0 - 30},20 {x0 - 30},17 {x1 + 30},17 {x1 + 30},20'/>")
        for p in g:
            st, x = step_at[p], xl + (col_of[p] + 1) * CW
            b.append(f"<g><title>{escape(st.func)}: {escape(st.kind)} #{st.index}, {escape(st.detail)}</title>"
                     f"<text class='trt-s' x='{x}' y='30' text-anchor='middle'>{escape(_column_header(st)[1])}</text></g>"
                     f"<line class='trt-grid' x1='{x}' y1='35' x2='{x}' y2='{TOP + n_rows * RH}'/>")
    drawn_ids = {id(nd) for nd in nodes}
    edges, marks, labels = [], [], []
    for nd in nodes:
        x, y = X(nd), Y(nd)
        for c, e in nd.children:
            data = (f"data-kind='{nd.kind}' data-index='{nd.step.index}' data-pos='{nd.pos}' "
                    f"data-from='{c.thread}' data-to='{nd.thread}' data-edge='{e}'")
            if id(c) not in drawn_ids:   # a stub: an empty state merged in
                edges.append(f"<g class='trt-edge' {data}><title>thread {c.thread} held an empty state "
                             f"({', '.join(f'{k} = 0' for k in c.values)})</title>"
                             f"<line class='trt-stub' x1='{x - 11}' y1='{y + 7}' x2='{x - 3}' y2='{y + 2}'/>"
                             f"<circle class='trt-empty' cx='{x - 12}' cy='{y + 7.5}' r='2.2'/></g>")
                continue
            cx, cy = X(c), Y(c)
            cls = {"own": "trt-own", "partner": "trt-shfl", "slot": "trt-smem", "hop": "trt-smem"}[e]
            pts = f"{cx},{cy} {x},{y}" if cy == y else f"{cx},{cy} {x - 12},{cy} {x},{y}"
            edges.append(f"<g class='trt-edge' {data}><polyline class='{cls}' points='{pts}'/></g>")
        tip = escape(_tooltip(nd, top.source))
        bits = ";".join(f"{k}:{bits_hex(v)}" for k, v in nd.values.items())
        data = (f"data-thread='{nd.thread}' data-kind='{nd.kind or 'leaf'}' data-pos='{nd.pos}' data-row='{nd.row}' "
                f"data-bits='{bits}'")
        if nd.cls == "collapsed":
            sub = list(_walk(nd))
            lo, hi = min(m.thread for m in sub), max(m.thread for m in sub)
            rounds = len({m.pos for m in sub if m.pos >= 0})
            marks.append(f"<g class='trt-node' {data}><title>{tip}; folded: its own tree of {rounds} rounds "
                         f"over threads {lo}–{hi}</title><rect class='trt-box' x='8' y='{y - 7}' width='{x - 14}' height='14' rx='3'/>"
                         f"<text class='trt-l' x='12' y='{y + 3.5}'>warp {nd.thread // WARP} (t{lo}–{hi})</text>"
                         f"<circle class='trt-n' cx='{x}' cy='{y}' r='4'/></g>")
        else:
            r = 5 if nd is top else 4
            marks.append(f"<g class='trt-node' {data}><title>{tip}</title>"
                         f"<circle class='{'trt-root' if nd is top else 'trt-n'}' cx='{x}' cy='{y}' r='{r}'/></g>")
        drawn_kids = [c for c, _ in nd.children if id(c) in drawn_ids]
        same = len(drawn_kids) == 1 and same_bits(drawn_kids[0].values, nd.values)
        hop = any(e == "hop" for _, e in nd.children)
        if nd.cls == "leaf":   # "(kind)": a fresh state mid-tree that is not empty
            labels.append(f"<text class='trt-l' x='{x - 8}' y='{y + 3.5}' text-anchor='end'>"
                          f"{escape(leaf_text[id(nd)])}</text>")
        elif nd is top:
            pass   # its values go below the tree, where there is room
        elif hop or not same:
            # the label sits above the line, so it may pass over the next node on this row but not
            # into that node's label; shorter forms when it would
            room = min([X(m) - x for m in nodes if m.row == nd.row and X(m) > x], default=10 ** 6) + 2
            for form in (_summary(nd, keys, 3), _summary(nd, keys, 2), _summary(nd, keys[:1], 3)):
                text = (f"t{nd.thread} " if hop else "") + ("" if same else form)
                if len(text.strip()) * 5.3 + 6 <= room:
                    break
            labels.append(f"<text class='trt-s' x='{x + 5}' y='{y - 5}'>{escape(text.strip())}</text>")
    b += edges + marks + labels
    ly = TOP + n_rows * RH + 14
    b.append(f"<text class='trt-r' x='10' y='{ly + 2}'>● {escape(root_text)}</text>")
    ly += 20
    b.append(f"<polyline class='trt-shfl' points='10,{ly} 40,{ly}'/><text class='trt-s' x='46' y='{ly + 3}'>"
             "shuffle: takes the partner's state</text>"
             f"<polyline class='trt-smem' points='235,{ly} 265,{ly}'/><text class='trt-s' x='271' y='{ly + 3}'>"
             "through shared memory</text>"
             f"<circle class='trt-empty' cx='405' cy='{ly}' r='2.2'/><text class='trt-s' x='412' y='{ly + 3}'>"
             "an empty state merged in</text>")
    b.append(f"<text class='trt-s' x='10' y='{ly + 16}'>labels: "
             f"{escape(', '.join(f'{_ABBR.get(k, k)} = {k}' for k in keys))}; t = thread. Hover a node for its "
             "exact values and bits.</text>")
    if any(nd.cls == "collapsed" for nd in nodes):
        b.append(f"<text class='trt-s' x='10' y='{ly + 29}'>grey box: a warp's own shuffle tree, folded "
                 "into one node (hover it for its result).</text>")
    style = ("<style>.trt-h{fill:#3f51b5;font-weight:bold;font-size:10px}.trt-hs{fill:#ef6c00;font-weight:bold;"
             "font-size:10px}.trt-hn{font-size:8.5px}.trt-s{fill:#555;font-size:8.5px}.trt-l{fill:#222;font-size:10px}.trt-r{fill:#1b5e20;"
             "font-size:10.5px;font-weight:bold}.trt-grid{stroke:#eee;stroke-width:1}.trt-grid2{stroke:#bbb;"
             "stroke-width:1;fill:none}.trt-own{stroke:#9e9e9e;stroke-width:1.2;fill:none}"
             ".trt-shfl{stroke:#3f51b5;stroke-width:1.3;fill:none}.trt-smem{stroke:#ef6c00;stroke-width:1.5;"
             "fill:none;stroke-dasharray:4 2}.trt-n{fill:#e8f5e9;stroke:#2e7d32;stroke-width:1.2}"
             ".trt-root{fill:#2e7d32;stroke:#1b5e20}.trt-empty{fill:#bdbdbd}.trt-stub{stroke:#bdbdbd;stroke-width:1}"
             ".trt-box{fill:#f5f5f5;stroke:#bdbdbd;stroke-width:1}</style>")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' class='diagram trace-tree' data-diagram='trace-tree' role='img' "
            f"data-call='{call or 1}' data-root='{top.thread}' data-leaves='{escape(top.source)}' "
            f"viewBox='0 0 {width} {height}' width='{width}' height='{height}' "
            f"style='max-width:none;width:clamp({int(width * 0.85)}px,100%,{width}px)' "
            f"font-family='ui-monospace,SFMono-Regular,Menlo,monospace' font-size='11'>"
            f"<title>{escape(title or 'reduction tree')}</title>{style}{''.join(b)}</svg>")
