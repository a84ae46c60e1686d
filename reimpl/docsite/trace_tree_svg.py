"""The reduction tree drawn as an inline SVG: leaves on the left, the root on the right, one row per
drawn leaf and one column per merge step (`tree`). Edges and nodes carry data-* attributes (kind,
position in the kernel's steps, threads, bits) that the tests read back.

`draw` lays the tree out and writes its elements for both places that show it: the trace pages
(`tree`, with its own stylesheet and legend) and the in-page player (stepper.tree_svg, styled by
docs/assets/stepper.css); a `Look` holds what differs between them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Look:
    """What one drawing of the tree does differently from another: the class prefix its stylesheet keys
    on, and the grid's sizes. The defaults are the trace pages' (LW, CW: 7 columns fit the 690 px of the
    page's text column)."""
    prefix: str = "trt"
    lw: int = 108          # the least room for the leaf labels
    cw: int = 78           # one column
    rh: int = 16           # one row
    top: int = 46          # the headers above the first row
    r: float = 4           # a node's radius; the root's is one more
    reach: int = 30        # how far a group's bracket reaches past its outer columns
    gap: int = 6           # the least room left between a node's label and the next node's
    min_width: int = 540
    root_digits: int = 4   # in the root's values, below the tree


class _Grid:
    """Where a tree's pieces go: one column per merge step, one row per drawn leaf."""

    def __init__(self, top: Node, nodes: list[Node], look: Look):
        self.top, self.nodes, self.look = top, nodes, look
        self.cols = sorted({nd.pos for nd in nodes if nd.pos >= 0})
        self.col_of = {p: k for k, p in enumerate(self.cols)}
        self.step_at = {nd.pos: nd.step for nd in nodes if nd.pos >= 0}
        self.keys = _label_fields(nodes)
        self.n_rows = 1 + max(nd.row for nd in nodes)
        self.leaf_text = {id(nd): f"t{nd.thread}{'' if nd.pos < 0 else f' ({nd.kind})'}  {_summary(nd, self.keys)}"
                          for nd in nodes if nd.cls == "leaf"}
        lw = max([look.lw] + [int(len(t) * 6.1) + 10 for t in self.leaf_text.values()])   # the longest leaf label
        self.xl = lw + 10
        self.width = max(self.xl + len(self.cols) * look.cw + 26, look.min_width)
        self.bottom = look.top + self.n_rows * look.rh

    def col_x(self, p: int) -> int:
        return self.xl + (self.col_of[p] + 1) * self.look.cw

    def X(self, nd: Node) -> int:
        return self.xl if nd.pos < 0 else self.col_x(nd.pos)

    def Y(self, nd: Node) -> int:
        return self.look.top + nd.row * self.look.rh + 8


def _headers(g: _Grid) -> list[str]:
    """The leaves' header and one header per run of columns of one kind and phase, each column with its
    own label and grid line."""
    P, b = g.look.prefix, []
    if any(nd.pos < 0 for nd in g.nodes):
        b.append(f"<text class='{P}-h' x='{g.xl}' y='14' text-anchor='middle'>leaves</text>"
                 f"<text class='{P}-s' x='{g.xl}' y='28' text-anchor='middle'>{escape(g.top.source)}</text>")
    groups: list[list[int]] = []
    for p in g.cols:
        last = g.step_at[groups[-1][-1]] if groups else None
        if last and _column_header(last)[0] == _column_header(g.step_at[p])[0] and last.kind == g.step_at[p].kind:
            groups[-1].append(p)
        else:
            groups.append([p])
    for grp in groups:
        x0, x1 = g.col_x(grp[0]), g.col_x(grp[-1])
        s = g.step_at[grp[0]]
        cls = f"{P}-hs" if aux_of(s.kind) == "slot" else f"{P}-h"
        label = _column_header(s)[0] if len(grp) > 1 else s.kind   # one column is too narrow for the phase
        if len(grp) == 1 and len(label) * 6.1 > g.look.cw - 8:     # nor, in bold 10 px, for a long kind name
            cls += f" {P}-hn"
        b.append(f"<text class='{cls}' x='{(x0 + x1) / 2}' y='12' text-anchor='middle'>{escape(label)}</text>")
        if len(grp) > 1:
            a, z = x0 - g.look.reach, x1 + g.look.reach
            b.append(f"<polyline class='{P}-bracket' points='{a},20 {a},17 {z},17 {z},20'/>")
        for p in grp:
            st, x = g.step_at[p], g.col_x(p)
            b.append(f"<g class='{P}-col' data-pos='{p}'><title>{escape(st.func)}: {escape(st.kind)} #{st.index}, "
                     f"{escape(st.detail)}</title><text class='{P}-s' x='{x}' y='30' text-anchor='middle'>"
                     f"{escape(_column_header(st)[1])}</text>"
                     f"<line class='{P}-grid' x1='{x}' y1='35' x2='{x}' y2='{g.bottom}'/></g>")
    return b


def _edges(g: _Grid, nd: Node, drawn: set[int]) -> list[str]:
    """The edges into `nd`: a solid shuffle, a dashed shared-memory hop, or a grey dot for an empty state."""
    P, x, y, out = g.look.prefix, g.X(nd), g.Y(nd), []
    for c, e in nd.children:
        data = (f"data-kind='{nd.kind}' data-index='{nd.step.index}' data-pos='{nd.pos}' "
                f"data-from='{c.thread}' data-to='{nd.thread}' data-edge='{e}'")
        if id(c) not in drawn:   # a stub: an empty state merged in
            out.append(f"<g class='{P}-edge' {data}><title>thread {c.thread} held an empty state "
                       f"({', '.join(f'{k} = 0' for k in c.values)})</title>"
                       f"<line class='{P}-stub' x1='{x - 11}' y1='{y + 7}' x2='{x - 3}' y2='{y + 2}'/>"
                       f"<circle class='{P}-empty' cx='{x - 12}' cy='{y + 7.5}' r='2.2'/></g>")
            continue
        cx, cy = g.X(c), g.Y(c)
        cls = {"own": "own", "partner": "shfl", "slot": "smem", "hop": "smem"}[e]
        pts = f"{cx},{cy} {x},{y}" if cy == y else f"{cx},{cy} {x - 12},{cy} {x},{y}"
        out.append(f"<g class='{P}-edge' {data}><polyline class='{P}-{cls}' points='{pts}'/></g>")
    return out


def _mark(g: _Grid, nd: Node, pos: int) -> str:
    """A node: a circle, or for a folded warp a grey box; its title holds the exact values and bits."""
    P, x, y, r = g.look.prefix, g.X(nd), g.Y(nd), g.look.r
    tip = escape(_tooltip(nd, g.top.source))
    bits = ";".join(f"{k}:{bits_hex(v)}" for k, v in nd.values.items())
    data = (f"data-thread='{nd.thread}' data-kind='{nd.kind or 'leaf'}' data-pos='{pos}' data-row='{nd.row}' "
            f"data-bits='{bits}'")
    if nd.cls == "collapsed":
        sub = list(_walk(nd))
        lo, hi = min(m.thread for m in sub), max(m.thread for m in sub)
        rounds = len({m.pos for m in sub if m.pos >= 0})
        return (f"<g class='{P}-node' {data}><title>{tip}; folded: its own tree of {rounds} rounds "
                f"over threads {lo}–{hi}</title><rect class='{P}-box' x='8' y='{y - 7}' width='{x - 14}' height='14' "
                f"rx='3'/><text class='{P}-l' x='12' y='{y + 3.5}'>warp {nd.thread // WARP} (t{lo}–{hi})</text>"
                f"<circle class='{P}-n' cx='{x}' cy='{y}' r='{r}'/></g>")
    root = nd is g.top
    return (f"<g class='{P}-node' {data}><title>{tip}</title>"
            f"<circle class='{P}-{'root' if root else 'n'}' cx='{x}' cy='{y}' r='{r + 1 if root else r}'/></g>")


def _label(g: _Grid, nd: Node, drawn: set[int], pos: int) -> str:
    """A node's values next to it, or "" where they would repeat its only input's (or for the root, whose
    values go below the tree, where there is room)."""
    P, x, y = g.look.prefix, g.X(nd), g.Y(nd)
    if nd.cls == "leaf":   # "(kind)": a fresh state mid-tree that is not empty
        return (f"<text class='{P}-l {P}-lab' data-pos='{pos}' x='{x - 8}' y='{y + 3.5}' text-anchor='end'>"
                f"{escape(g.leaf_text[id(nd)])}</text>")
    kids = [c for c, _ in nd.children if id(c) in drawn]
    same = len(kids) == 1 and same_bits(kids[0].values, nd.values)
    hop = any(e == "hop" for _, e in nd.children)
    if nd is g.top or not (hop or not same):
        return ""
    # the label sits above the line, so it may pass over the next node on this row but not into that
    # node's label; shorter forms when it would
    room = min([g.X(m) - x for m in g.nodes if m.row == nd.row and g.X(m) > x], default=10 ** 6) + 2
    for form in (_summary(nd, g.keys, 3), _summary(nd, g.keys, 2), _summary(nd, g.keys[:1], 3)):
        text = (f"t{nd.thread} " if hop else "") + ("" if same else form)
        if len(text.strip()) * 5.3 + g.look.gap <= room:
            break
    return f"<text class='{P}-s {P}-lab' data-pos='{pos}' x='{x + 5}' y='{y - 5}'>{escape(text.strip())}</text>"


def draw(top: Node, nodes: list[Node], look: Look = Look(), pos=None) -> tuple[list[str], int, int]:
    """The SVG elements of a laid-out tree (`_layout`): column headers, edges, nodes, labels, and the root's
    values below the tree. Columns, edges, nodes and labels carry data-pos, the position of the step that
    made them; `pos(node)` gives a node's and its label's (by default its own, -1 for a leaf). Returns
    (elements, width, y of the root's line)."""
    g = _Grid(top, nodes, look)
    pos = pos or (lambda nd: nd.pos)
    drawn = {id(nd) for nd in nodes}
    edges, marks, labels = [], [], []
    for nd in nodes:
        edges += _edges(g, nd, drawn)
        marks.append(_mark(g, nd, pos(nd)))
        labels.append(_label(g, nd, drawn, pos(nd)))
    y = g.bottom + 16
    root_text = f"thread {top.thread} ends with {_summary(top, _label_fields(nodes, 3), look.root_digits)}"
    ends = (f"<text class='{look.prefix}-r {look.prefix}-lab' data-pos='{top.pos}' x='10' y='{y}'>● "
            f"{escape(root_text)}</text>")
    return _headers(g) + edges + marks + labels + [ends], g.width, y


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
    b, width, ly = draw(top, nodes)
    keys = _label_fields(nodes)
    ly += 18
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
    height = ly + 40
    style = ("<style>.trt-h{fill:#3f51b5;font-weight:bold;font-size:10px}.trt-hs{fill:#ef6c00;font-weight:bold;"
             "font-size:10px}.trt-hn{font-size:8.5px}.trt-s{fill:#555;font-size:8.5px}.trt-l{fill:#222;font-size:10px}.trt-r{fill:#1b5e20;"
             "font-size:10.5px;font-weight:bold}.trt-grid{stroke:#eee;stroke-width:1}.trt-bracket{stroke:#bbb;"
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
