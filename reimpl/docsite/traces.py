"""Build-time step traces for the docs: tiny examples run through the CPU emulator while the site is
built, shown as tables and as a reduction tree drawn from the trace itself (nothing is pasted).

Directives, each alone on its line (expanded by on_page_markdown before reimpl.docsite.render's):

    <!-- trace: op=layer_norm dtype=fp32 shape=1,512 kernel=vectorized_layer_norm_kernel kinds=online,shfl_down -->
        Emulates a reimpl.checks.cases.Case (op, dtype, shape; optional weight=0, bias=0, x_offset, w_offset,
        b_offset, values, seed, eps, norm_ndim) with reimpl.emulator.trace recording, keeps the steps of
        one kernel (the template name before `<`) and one block (block=0), and renders:
          - a caption: the case, the launch (from the host mirror), and how to rerun it with the CLI;
          - one collapsible table per step kind (kinds=a,b; default every kind the kernel emitted),
            the chosen threads' aux (partner, slot, element) and values with their bits in hex.
            Threads: threads=0,1,4-7 for every kind, threads.KIND=... for one; by default the
            threads that make sense for the kind's aux (see _default_threads). open=KIND,... opens tables;
          - an inline SVG of the reduction tree (tree=0 to leave it out; focus=W picks the warp drawn
            lane by lane, focus=none collapses every warp's shuffle tree; root=T the thread that ends
            with the block's result, default 0; stop=KIND draws the tree as it stands before the first
            step of that kind, e.g. one WarpReduce call). See `tree`. A kernel with several reduction
            calls (see `calls`: compute_gI's BlockReduceSum of stats_x1, then of stats_x2) gets one tree
            per call, each from its own leaves; call=N draws only the N-th (and keeps the tables of
            the reduction's own kinds to that call's steps); leaves=KIND[.FIELD,...] says where a
            call's leaves come from when the default (see `_leaf_source`) cannot tell. A kernel whose
            steps merge nothing (GammaBeta's <32,1,8> tile) gets a note saying so instead of a tree.
    <!-- trace: backward=1 op=layer_norm dtype=fp32 shape=64,32 kernel=GammaBetaBackwardCUDAKernelTemplate stop=gb_out -->
        The same for the backward: a reimpl.checks.cases_backward.BackwardCase (the options above plus mask=1,1,0,
        the output_mask, by default every gradient that exists; dy_offset; dy_values), its backward run on
        the emulator with the trace on (`emulate_backward`: mean and rstd from the emulated forward,
        which is not recorded). The kernels: layer_norm_grad_input_kernel, ..._vectorized,
        GammaBetaBackwardCUDAKernelTemplate (blocks numbered blockIdx.x + blockIdx.y * gridDim.x). The
        caption's command is `python -m reimpl trace ... [--backward --mask ...]`, which prints the same
        steps; `python -m reimpl.docsite.traces '<directive>'` (`main`) does too, from the directive itself.
        Rows and tree edges carry data-* attributes (kind, index, position in the kernel's steps,
        threads, bits) that tests/test_docs_traces_cpu.py reads back. The tables and the tree are kept
        out of the search index (data-search-exclude). A directive line is expanded wherever it
        stands, inside a fenced code block too: show the syntax indented, as here.
    <!-- code: reimpl/emulator/welford.py WarpReduce -->
    <!-- code: reimpl/mirror/cuda/trace.cuh "#define REIMPL_TRACE(kind" "#endif" -->
        Our code, included by pymdownx.snippets by line range. The range is found now, when the site
        is built (a Python def or class by its dotted name, or from the first line containing the first
        text through the next line that starts with the second), so it cannot drift. A link to the file's
        generated source page sits above it.

Everything is generic over reimpl.emulator.trace.KINDS: a new kind renders as a table with its own
field names and aux meaning; the tree understands the aux meanings "partner" (a shuffle: the thread
merges the partner thread's state) and "slot" (a shared-memory round: a "slot" step whose threads
write, then a "slot" step with the same index whose threads read and merge, or take the state as is).

Also here: the generated source pages of the emulator and the trace tools (`extra_source_files`,
`render_extra_source`), one heading per top-level definition, so `source/reimpl/emulator/welford.py/#WarpReduce`
is a stable link like the ones docs_hooks makes for the mirror.
"""
from __future__ import annotations

import ast
import functools
import re
import shlex
from dataclasses import dataclass, field
from html import escape

import numpy as np

from ..upstream import manifest as manifest_mod
from .render import LANG, rel, source_page

ROOT = manifest_mod.ROOT
TRACE = re.compile(r"^<!-- trace: (.*?) -->$", re.M)
CODE = re.compile(r"^<!-- code: (.*?) -->$", re.M)
ANY = re.compile(r"^<!-- (trace|code)\b.*$", re.M)
WARP = 32

_CASE_KEYS = {"op", "dtype", "shape", "weight", "bias", "x_offset", "w_offset", "b_offset", "values", "seed", "eps",
              "norm_ndim"}
_BACKWARD_KEYS = {"backward", "mask", "dy_offset", "dy_values"}
_VIEW_KEYS = {"kernel", "block", "kinds", "threads", "tree", "focus", "root", "stop", "open", "tables", "call", "leaves"}


# ---- source pages for the emulator and the trace tools -------------------------------------------------

def extra_source_files() -> list[str]:
    """Our files that have a generated source page besides the manifest's: the emulator, the CUDA
    trace header and the GPU trace reader (found now, so a new emulator module gets a page too)."""
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "reimpl" / "emulator").glob("*.py")
                   if p.name != "__init__.py")
    tracers = ("reimpl/mirror/cuda/trace.cuh", "reimpl/checks/gpu_trace.py")
    return ["reimpl/emulator/__init__.py"] + files + [f for f in tracers if (ROOT / f).exists()]


def _py_blocks(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of each top-level def/class, its decorators and the comment
    lines right above it included (1-based)."""
    lines = text.splitlines()
    out = []
    try:
        body = ast.parse(text).body
    except SyntaxError:   # a file being edited: the page shows it whole, without headings
        return []
    for node in body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        while start > 1 and lines[start - 2].startswith("#"):
            start -= 1
        out.append((node.name, start, node.end_lineno))
    return out


def render_extra_source(file: str) -> str:
    """A generated page with the whole file, in order; each top-level def/class of a Python file
    under a heading whose id is its name."""
    text = (ROOT / file).read_text()
    lang = LANG[file[file.rindex("."):]]
    out = [f"# `{file}`\n\nGenerated at build time from the file itself: every line, in order"
           + (", each top-level definition under its own heading.\n" if file.endswith(".py") else ".\n")]
    lines = text.splitlines()
    cuts = _py_blocks(text) if file.endswith(".py") else []
    pos = 1
    for name, a, b in cuts + [(None, len(lines) + 1, len(lines))]:
        if a > pos and any(l.strip() for l in lines[pos - 1:a - 1]):
            out.append(f'```{lang} linenums="{pos}"\n' + "\n".join(lines[pos - 1:a - 1]) + "\n```\n")
        if name is None:
            break
        out.append(f"## `{name}` {{ #{name} }}\n")
        out.append(f'```{lang} linenums="{a}"\n' + "\n".join(lines[a - 1:b]) + "\n```\n")
        pos = b + 1
    return "\n".join(out)


def _def_range(file: str, name: str) -> tuple[int, int]:
    """Lines of a (possibly dotted: Class.method) definition in a Python file, decorators included."""
    tree = ast.parse((ROOT / file).read_text())
    body, found = tree.body, None
    for part in name.split("."):
        found = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and n.name == part), None)
        if found is None:
            raise ValueError(f"{file}: no definition {name!r}")
        body = found.body
    return min([found.lineno] + [d.lineno for d in found.decorator_list]), found.end_lineno


def _text_range(file: str, first: str, last: str) -> tuple[int, int]:
    lines = (ROOT / file).read_text().splitlines()
    a = next((i for i, l in enumerate(lines, 1) if first in l), None)
    b = next((i for i, l in enumerate(lines, 1) if a and i >= a and l.strip().startswith(last)), None)
    if a is None or b is None:
        raise ValueError(f"{file}: no lines from {first!r} to {last!r}")
    return a, b


def code(args: str, page: str) -> str:
    parts = shlex.split(args)
    if len(parts) not in (2, 3) or not (ROOT / parts[0]).is_file():
        raise ValueError(f"{page}: bad code directive {args!r}")
    file = parts[0]
    if len(parts) == 2:
        a, b = _def_range(file, parts[1])
        what, anchor = parts[1], parts[1].split(".")[0]
    else:
        a, b = _text_range(file, parts[1], parts[2])
        what, anchor = parts[1], None
    if file in extra_source_files():
        target = source_page(file)
        if anchor and not file.endswith(".py"):
            anchor = None
    else:  # a manifest file: its page has no per-definition headings, link the page
        target, anchor = source_page(file), None
    link = f"[`{file}`]({rel(page, target)}{'#' + anchor if anchor else ''})"
    lang = LANG[file[file.rindex("."):]]
    return (f'<div class="symbol-links" markdown>Ours: {link} · `{what}` · lines {a}–{b}, included when the site '
            f'is built</div>\n\n```{lang} title="{file} · lines {a}–{b}" linenums="{a}"\n'
            f'--8<-- "{file}:{a}:{b}"\n```\n')


# ---- running a case ----------------------------------------------------------------------------------------

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


def _threads(spec: str) -> list[int]:
    out = []
    for part in spec.split(","):
        a, dash, b = part.partition("-")
        out += list(range(int(a), int(b) + 1)) if dash else [int(a)]
    return out


# ---- values --------------------------------------------------------------------------------------------------

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


def _short(v, digits: int = 4) -> str:
    a = np.asarray(v)
    if np.issubdtype(a.dtype, np.integer) or (np.isfinite(a) and float(a) == int(float(a)) and abs(float(a)) < 1e7):
        return str(int(float(a)))
    f = float(a)
    if f != 0 and abs(f) < 1e-2:   # 9.56e-4, not 0.000956: the labels must stay short
        m, e = f"{f:.{digits - 1}e}".split("e")
        return f"{m}e{int(e)}"
    return f"{f:.{digits}g}"


# ---- tables ------------------------------------------------------------------------------------------------

def _aux(kind: str) -> str:
    from ..emulator.trace import KINDS
    return KINDS[kind][2]


def _default_threads(kind: str, steps) -> list[int]:
    """partner: lanes 0..7 (each with the lane it read); slot: the first 8 threads that wrote or read
    a slot; none: thread 0 (the result every thread holds); anything else: threads 0 and 1."""
    from ..emulator.trace import AUX_NONE
    aux = _aux(kind)
    if aux == "partner":
        return list(range(8))
    if aux == "slot":
        seen = sorted({int(t) for s in steps for t in np.flatnonzero(s.active & (s.aux != AUX_NONE))})
        return seen[:8]
    if aux == "none":
        return [0]
    return [0, 1]


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


# ---- the reduction tree --------------------------------------------------------------------------------------

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


def _same_bits(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(bits_hex(a[k]) == bits_hex(b[k]) for k in a)


def _merges(kind: str) -> bool:
    return _aux(kind) in ("partner", "slot")


def _fields(kind: str) -> tuple:
    from ..emulator.trace import KINDS
    return KINDS[kind][3]


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
        if not _merges(s.kind):
            continue
        p = steps[prev] if prev is not None else None
        fresh = (p is None or _fields(p.kind) != _fields(s.kind)
                 or (_aux(s.kind) == "partner" and p.kind == s.kind and p.index >= s.index))
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
    names = _fields(steps[first].kind)
    before = [steps[i] for i in range(first - 1, -1, -1) if not _merges(steps[i].kind)]
    if leaves:
        kind, _, spec = leaves.partition(".")
        base = next((s for s in before if s.kind == kind), None)
        fields = spec.split(",") if spec else list(_fields(kind)) if base is not None else []
        if base is None or len(fields) != len(names) or not set(fields) <= set(base.values):
            raise ValueError(f"leaves={leaves}: need a {kind} step before the reduction with {len(names)} "
                             f"field(s) for {list(names)}")
        return base, dict(zip(names, fields)), leaves
    base = next((s for s in before if _fields(s.kind) == names), None)
    if base is not None:
        own = _aux(base.kind) == "element"
        return base, {k: k for k in names}, "own elements" if own else base.kind
    m = re.match(r"(\w+), ", steps[first].detail)
    if m and len(names) == 1:
        base = next((s for s in before if m.group(1) in s.values), None)
        if base is not None:
            return base, {names[0]: m.group(1)}, f"{base.kind}.{m.group(1)}"
    base = next((s for s in before if len(_fields(s.kind)) == len(names)), None)
    if base is not None:
        return base, dict(zip(names, _fields(base.kind))), base.kind
    if _aux(steps[first].kind) == "slot":
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
    names = _fields(steps[first].kind)
    base, fmap, source = _leaf_source(steps, first, leaves)
    n = len(steps[first].active)

    def vals(s, t, m=None):
        return {k: s.values[(m or {}).get(k, k)][t] for k in names}

    cur = [Node(t, -1, base, vals(base, t, fmap)) for t in range(n)]
    write_kind = next((steps[i].kind for i in range(first, last + 1) if _aux(steps[i].kind) == "slot"), None)
    shared: dict[int, Node] = {}
    for i in range(first, last + 1):
        s = steps[i]
        if not _merges(s.kind) or _fields(s.kind) != names:
            continue
        if _aux(s.kind) == "partner":
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
                    kids = [(src, "hop")] if _same_bits(v, src.values) else [(prev[t], "own"), (src, "slot")]
                    cur[t] = Node(int(t), i, s, v, kids)
    top = cur[root]
    top.source = source
    return top


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
        cls = "trt-hs" if _aux(s.kind) == "slot" else "trt-h"
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
        same = len(drawn_kids) == 1 and _same_bits(drawn_kids[0].values, nd.values)
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


# ---- the directive -------------------------------------------------------------------------------------------

def _cli(case, kinds: list[str], block: int = 0) -> str:
    parts = ["python -m reimpl trace", f"--op {case.op}", f"--dtype {case.dtype}",
             "--shape " + ",".join(map(str, case.shape))]
    if hasattr(case, "mask"):  # a BackwardCase
        parts.append("--backward --mask " + ",".join("1" if m else "0" for m in case.mask))
        if case.dy_offset:
            parts.append(f"--dy-offset {case.dy_offset}")
        if case.dy_values != "normal":
            parts.append(f"--dy-values {case.dy_values}")
    if block:
        parts.append(f"--block {block}")
    if case.norm_ndim != 1:
        parts.append(f"--norm-ndim {case.norm_ndim}")
    if not case.weight:
        parts.append("--no-weight")
    if not case.bias and case.op == "layer_norm":
        parts.append("--no-bias")
    for k in ("x_offset", "w_offset", "b_offset"):
        if getattr(case, k):
            parts.append(f"--{k.replace('_', '-')} {getattr(case, k)}")
    if case.values != "normal":
        parts.append(f"--values {case.values}")
    if case.seed:
        parts.append(f"--seed {case.seed}")
    if case.eps != 1e-5:
        parts.append(f"--eps {case.eps}")
    return " ".join(parts) + f" --kind {','.join(kinds)}"


def _kernel_steps(ex: Example, opts: dict, page: str = ""):
    kernel, block = opts["kernel"], int(opts.get("block", 0))
    steps = [s for s in ex.trace.steps if s.kernel.split("<")[0] == kernel and s.block == block]
    if not steps:
        raise ValueError(f"{page}: trace directive: {ex.case.id} runs no {kernel} (block {block}); it runs "
                         f"{sorted({s.kernel for s in ex.trace.steps})}")
    return steps


def _caption(case, launch, block: int, args: str, opts: dict, kinds: list[str]) -> str:
    shape = " × ".join(map(str, case.shape))
    backward = hasattr(case, "dy_offset")
    affine = [n for n, on in (("weight", case.weight), ("bias", case.bias and case.op == "layer_norm")) if on]
    offsets = [f"{k[0]} at storage offset {getattr(case, k)}" for k in ("x_offset", "w_offset", "b_offset")
               if getattr(case, k)]
    values = "torch.randn" if case.values == "normal" else f"value kind <code>{escape(case.values)}</code>"
    what = f"<code>{case.op}</code>"
    if backward:
        if case.dy_offset:
            offsets.insert(0, f"grad_out at storage offset {case.dy_offset}")
        dyv = "torch.randn" if case.dy_values == "normal" else f"value kind <code>{escape(case.dy_values)}</code>"
        mask = ", ".join("1" if m else "0" for m in case.output_mask)
        grads = ("grad_input", "grad_weight", "grad_bias")
        wanted = [g for g, m in zip(grads, case.output_mask) if m] or ["no gradient"]
        what += (f" <strong>backward</strong> (output_mask [{mask}]: {', '.join(wanted)}), grad_out {dyv} "
                 "from its own seed stream")
    text = (f'<p class="trace-caption"><strong>Trace of a tiny example, computed when this page was built.</strong> '
            f'{what}, {case.dtype}, input {shape} ({values}, seed {case.seed}), '
            f'{" and ".join(affine) or "no weight or bias"}, eps {case.eps:g}'
            + (f", {', '.join(offsets)}" if offsets else "")
            + (". mean and rstd are the emulated forward's on the same input (the bits the H100's forward "
               "passes to the backward)" if backward else "")
            + f". The host mirror launches <code>{escape(launch.kernel)}</code> with grid {list(launch.grid)}, "
            f"block {list(launch.block)}, {launch.shared} bytes of dynamic shared memory; shown: block {block}"
            + (f" (blockIdx.x + blockIdx.y·gridDim.x), threads numbered x + {launch.block[0]}·y"
               if launch.block[1] > 1 or launch.grid[1] > 1 else "")
            + ". Every number below comes from <code>reimpl.emulator</code>, run by the site build (nothing here "
            "is pasted); each value is followed by its bits in hex. To print the same on your machine: ")
    text += f"<code>{escape(_cli(case, kinds, block))}</code></p>"
    return text


def trace_block(args: str, page: str = "") -> str:
    from ..emulator.trace import KINDS
    opts = parse_directive(args)
    case = case_of(opts)
    ex = emulate(case)
    kernel, block = opts["kernel"], int(opts.get("block", 0))
    steps = _kernel_steps(ex, opts, page)
    launch = next(l for l in ex.launches if l.kernel.split("<")[0] == kernel)
    present = list(dict.fromkeys(s.kind for s in steps))
    kinds = opts["kinds"].split(",") if "kinds" in opts else present
    for k in kinds:
        if k not in KINDS or k not in present:
            raise ValueError(f"{page}: trace directive: kind {k!r} not among {kernel}'s steps {present}")
    opened = set(opts.get("open", "").split(","))
    all_calls = calls(steps)
    call = int(opts["call"]) if "call" in opts else None
    if call is not None and not 1 <= call <= len(all_calls):
        raise ValueError(f"{page}: trace directive: call={call}, but {kernel} makes {len(all_calls)} reduction "
                         "call(s) here")
    out = [f'<div class="trace-box" data-case="{escape(case.id)}" data-kernel="{escape(kernel)}" '
           f'data-directive="{escape(args.strip())}">', _caption(case, launch, block, args, opts, kinds)]
    if opts.get("tree", "1") not in ("0", "no"):
        focus = opts.get("focus", "auto")
        upto = steps
        if "stop" in opts:   # the tree as it stands before the first step of this kind
            cut = next((i for i, s in enumerate(steps) if s.kind == opts["stop"]), None)
            if cut is None:
                raise ValueError(f"{page}: trace directive: stop={opts['stop']} is not among {present}")
            upto = steps[:cut]
        cs = calls(upto)
        chosen = [call] if call is not None else list(range(1, len(cs) + 1))
        if not cs:
            out.append(f'<p class="trace-note">No reduction tree: none of these steps ({", ".join(present)}) is a '
                       "shuffle or a shared-memory exchange, so no thread's values are merged with another "
                       "thread's.</p>")
        for k in chosen:
            title = f"Reduction tree of {launch.kernel}, block {block}, drawn from the trace of {case.id}"
            head = ""
            if len(all_calls) > 1:   # say which call this is, and what it reduces
                funcs = list(dict.fromkeys(KINDS[s.kind][1] for s in upto[cs[k - 1][0]:cs[k - 1][1] + 1]
                                           if _merges(s.kind)))
                title += f", reduction call {k} of {len(all_calls)}"
                head = (f'<p class="trace-call"><strong>Reduction call {k} of {len(all_calls)}</strong> '
                        f"({escape(', '.join(funcs))})")
            svg = tree(upto, int(opts.get("root", 0)), None if focus == "none" else focus, title,
                       call=k, leaves=opts.get("leaves"))
            if head:
                leaves = re.search(r"data-leaves='([^']*)'", svg).group(1)
                out.append(head + f": its leaves are <code>{leaves}</code>.</p>")
            out.append(f'<div class="diagram-box trace-tree-box" data-search-exclude>{svg}</div>')
    if opts.get("tables", "1") not in ("0", "no"):
        span = range(all_calls[call - 1][0], all_calls[call - 1][1] + 1) if call is not None else None
        for k in kinds:
            # with call=N, the tables of the reduction's own kinds hold that call's steps only
            pos = [i for i, s in enumerate(steps) if s.kind == k and (span is None or not _merges(k) or i in span)]
            ks = [steps[i] for i in pos]
            spec = opts.get(f"threads.{k}", opts.get("threads"))
            threads = _threads(spec) if spec else _default_threads(k, ks)
            _, func, aux, names = KINDS[k]
            summary = (f"<code>{k}</code> · {escape(func)} · {len(ks)} step(s) · threads "
                       f"{', '.join(map(str, threads))}")
            out.append(f'<details class="abstract trace-steps" data-search-exclude{" open" if k in opened else ""}>'
                       f"<summary>{summary}</summary>{table(k, ks, threads, launch.block, positions=pos)}</details>")
    out.append("</div>")
    return "\n".join(out) + "\n"


def expand(markdown: str, page: str, root: str = "") -> str:
    """Replace the trace and code directives of docs page `page` (root: relative URL to the site root)."""
    def one_trace(m: re.Match) -> str:
        return trace_block(m.group(1), page)

    def one_code(m: re.Match) -> str:
        return code(m.group(1), page)

    markdown = TRACE.sub(one_trace, markdown)
    markdown = CODE.sub(one_code, markdown)
    stray = ANY.search(markdown)
    if stray:
        raise ValueError(f"{page}: malformed directive {stray.group(0)!r}")
    return markdown


def main(argv: list[str] | None = None) -> int:
    """python -m reimpl.docsite.traces 'backward=1 op=layer_norm dtype=fp32 shape=2,402 kernel=...': print a
    directive's steps (its kernel and block, its kinds; the threads its tables show) as text tables,
    forward or backward."""
    import sys
    from ..emulator import trace_view
    args = " ".join(sys.argv[1:] if argv is None else argv)
    if not args.strip():
        print(main.__doc__)
        return 2
    opts = parse_directive(args)
    ex = emulate(case_of(opts))
    steps = _kernel_steps(ex, opts)
    kinds = set(opts["kinds"].split(",")) if "kinds" in opts else None
    launch = next(l for l in ex.launches if l.kernel.split("<")[0] == opts["kernel"])
    print(ex.case.id)
    for s in steps:
        if kinds is None or s.kind in kinds:
            spec = opts.get(f"threads.{s.kind}", opts.get("threads"))
            threads = _threads(spec) if spec else _default_threads(s.kind, [t for t in steps if t.kind == s.kind])
            print(trace_view.format_step(s, np.array(threads), launch.block[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
