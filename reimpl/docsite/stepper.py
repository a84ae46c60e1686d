"""The in-page trace player (`{% stepper PRESET [PRESET ...] %}`): a preset input run through the CPU
emulator while the site is built, its step trace exported as JSON into the page, and played by
docs/assets/stepper.js (no dependencies, no network: it works from file:// and when served).

A player shows, for the step it stands on:
  - our CUDA source of the device functions involved (reimpl/mirror/cuda/, by snippet section), one
    element per line with its line number; the statement the step records is highlighted, the body
    of the function that statement calls is tinted, and the REIMPL_TRACE site is marked;
  - every lane's registers (WelfordDataLN count, mean, sigma2 on the vectorized path; WelfordData n,
    nf, mean, m2 on the fallback path), with the partner, slot or element the step used;
  - the reduction tree, drawn at build time from the trace's own partner and slot fields
    (trace_trees.build_tree), each node filled in when the step that made it has run.

Step -> source line: each step kind (reimpl/emulator/trace.py KINDS) is recorded by a REIMPL_TRACE(kind, ...)
call in the CUDA mirror, placed right after the statement whose result it records. `source_map`
finds that call in the excerpt, read from the file at build time, and maps the kind to the statement
just before it (and the call's own lines). No line number is written down here.

The player covers the statistics: it stops after `rstd` (vectorized path) or `moments` (fallback),
when mean and rstd are known; the elementwise output is in the trace tables on the kernel pages.
One directive per page: it brings stepper.css and stepper.js along; name several presets in it to get
one player with a selector.
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from html import escape

import numpy as np

from ..upstream import manifest as manifest_mod
from .trace_tree_svg import Look, _layout, draw
from .trace_trees import build_tree

ROOT = manifest_mod.ROOT
CUDA = "reimpl/mirror/cuda/"
EPS = 1e-5
STATS_END = ("rstd", "moments")          # the last step kind a player shows, per path
ORDER = ("count", "n", "nf", "mean", "sigma2", "m2")   # register columns, count first
PATH_N, PATH_SEEDS = 64, 200

# The source a player shows per kernel: (file, snippet section, cut), in file order. `cut`: only the
# section's lines up to the last one a step maps to (the rest is the elementwise output).
EXCERPTS = {
    "vectorized_layer_norm_kernel": [
        (CUDA + "layer_norm_kernel.cu", "cuWelfordOnlineSum", False),
        (CUDA + "layer_norm_kernel.cu", "cuWelfordCombine", False),
        (CUDA + "layer_norm_kernel.cu", "compute_stats", False),
        (CUDA + "layer_norm_kernel.cu", "vectorized_layer_norm_kernel_impl", True),
    ],
    "RowwiseMomentsCUDAKernel": [
        (CUDA + "layer_norm_kernel.cu", "RowwiseMomentsCUDAKernel", False),
        (CUDA + "block_reduce.cuh", "WarpReduce", False),
        (CUDA + "block_reduce.cuh", "BlockReduce", False),
        (CUDA + "SharedReduceOps.h", "WelfordOps", False),
    ],
}
DOCS = {"layer_norm_kernel.cu": "upstream/layer_norm_kernel/", "block_reduce.cuh": "upstream/block_reduce/",
        "SharedReduceOps.h": "upstream/SharedReduceOps/"}

# What the register table holds, per kernel.
REGS_SAY = {
    "vectorized_layer_norm_kernel": "wd, the WelfordDataLN each thread of compute_stats holds (count, mean, sigma2)",
    "RowwiseMomentsCUDAKernel": "val, the WelfordData each thread of RowwiseMomentsCUDAKernel and BlockReduce holds "
                                "(n, nf, mean, m2; a merge sets n to -1 and counts in nf)",
}

# What a step of each kind does, for the caption under the controls.
SAYS = {
    "online": "Each thread folds one more element of its 4-wide vector into its own state "
              "(cuWelfordOnlineSum: the update multiplies by 1/count).",
    "shfl_down": "Each lane takes the state of lane + offset through a shuffle and merges it into its own "
                 "(cuWelfordCombine). A lane whose partner would be past lane 31 gets its own value back.",
    "smem_write": "Lane 0 of each upper warp writes its state to shared memory.",
    "smem_combine": "Lane 0 of each lower warp reads its partner warp's state and merges it (cuWelfordCombine).",
    "stats": "compute_stats returns: every thread gets the row's mean and sigma2 / N.",
    "rstd": "Every thread computes rstd = rsqrt(sigma2 + eps).",
    "reduce": "Each thread folds one element into its WelfordData (WelfordOps::reduce: a true division).",
    "warp_reduce": "Each lane takes the state of lane + offset through a shuffle and merges it "
                   "(WelfordOps::combine). A lane whose partner would be past lane 31 gets its own value back.",
    "block_write": "Lane 0 of every warp writes its warp's state to shared[warp].",
    "block_read": "Threads below the warp count read shared[lane]; every other thread takes the identity state.",
    "moments": "Thread 0 projects the state: variance m2 / nf, then mean[i] and rstd[i] = rsqrt(var + eps).",
}


# ----------------------------------------------------------------------------------------------------
# Presets: the inputs, and their emulation


@dataclass(frozen=True)
class Preset:
    name: str
    label: str           # in the selector


PRESETS = {
    "path_aligned": Preset("path_aligned", "Same row, two paths: aligned (vectorized)"),
    "path_offset": Preset("path_offset", "Same row, two paths: storage offset 1 (fallback)"),
    "merge_order": Preset("merge_order", "The 16-value row whose bits depend on the tree"),
}


def _case(seed: int):
    from ..checks.cases import Case
    return Case("layer_norm", "fp32", (1, PATH_N), weight=False, bias=False, seed=seed)


def _row(seed: int) -> np.ndarray:
    from ..emulator.case_inputs import make_inputs
    return make_inputs(_case(seed))[0]


@functools.lru_cache(maxsize=None)
def path_seed() -> int:
    """The first seed whose 1 x 64 torch.randn row (no weight or bias) gives other bits on the two paths
    (out, mean or rstd), aligned against at storage offset 1: the search scripts/gpu/numerics_example.py
    makes on the GPU for 1 x 1024, made here on the emulator for a row small enough to step through."""
    from .. import emulator
    for seed in range(PATH_SEEDS):
        x = _row(seed)
        a = emulator.native_layer_norm(x, (PATH_N,), None, None, EPS)
        o = emulator.native_layer_norm(x, (PATH_N,), None, None, EPS, offsets=(1, 0, 0))
        if any(not np.array_equal(p.view(np.uint32), q.view(np.uint32)) for p, q in zip(a, o)):
            return seed
    raise RuntimeError(f"no seed below {PATH_SEEDS} gives the two paths different bits")


def inputs(name: str) -> tuple[np.ndarray, tuple[int, int, int]]:
    """(x of shape (1, N), float32; storage offsets (x, weight, bias)) of a preset."""
    if name == "merge_order":
        from ..emulator import merge_order
        return merge_order.make_row(merge_order.demo()["seed"])[None, :], (0, 0, 0)
    if name in ("path_aligned", "path_offset"):
        return _row(path_seed()), (1 if name == "path_offset" else 0, 0, 0)
    raise ValueError(f"stepper: unknown preset {name!r}; known: {', '.join(PRESETS)}")


@dataclass
class Run:
    name: str
    x: np.ndarray
    offsets: tuple
    kernel: str           # the full name, e.g. vectorized_layer_norm_kernel<float, float, false>
    block_dim: list
    steps: list           # block 0 of the statistics kernel, up to and including STATS_END
    outputs: tuple        # (out, mean, rstd) of the whole op

    @property
    def base(self) -> str:
        return self.kernel.split("<")[0]


@functools.lru_cache(maxsize=None)
def run(name: str) -> Run:
    """Emulate a preset with the trace recording (reimpl.emulator.trace.recording, native_layer_norm)."""
    from .. import emulator
    from ..emulator import trace as T
    x, offsets = inputs(name)
    with T.recording(meta={"stepper": name}) as tr:
        outs = emulator.native_layer_norm(x, (x.shape[-1],), None, None, EPS, offsets=offsets)
    kernel = tr.steps[0].kernel
    steps = [s for s in tr.steps if s.kernel == kernel and s.block == 0]
    ends = [i for i, s in enumerate(steps) if s.kind in STATS_END]
    if not ends:
        raise ValueError(f"stepper {name}: {kernel} records none of {STATS_END}")
    return Run(name, x, offsets, kernel, list(tr.meta["blockDim"][kernel]), steps[:ends[-1] + 1], outs)


# ----------------------------------------------------------------------------------------------------
# The source excerpt and the step -> line map

_MARK = re.compile(r"--8<-- \[(start|end):([\w.]+)\]")
_SITE = re.compile(r"\bREIMPL_TRACE\((\w+),")


@functools.lru_cache(maxsize=None)
def section(file: str, name: str) -> tuple[tuple[int, str], ...]:
    """((line number, text), ...) of one snippet section of `file`, the marker lines left out."""
    lines = (ROOT / file).read_text().splitlines()
    start = [i for i, l in enumerate(lines, 1) if (m := _MARK.search(l)) and m.groups() == ("start", name)]
    end = [i for i, l in enumerate(lines, 1) if (m := _MARK.search(l)) and m.groups() == ("end", name)]
    if len(start) != 1 or len(end) != 1 or end[0] <= start[0]:
        raise ValueError(f"{file}: no single section [start:{name}] ... [end:{name}]")
    return tuple((n, lines[n - 1]) for n in range(start[0] + 1, end[0]))


def _code(text: str) -> str:
    """A line without its // comment."""
    return text.split("//", 1)[0].rstrip()


def _blank(text: str) -> bool:
    c = _code(text).strip()
    return not c or c.startswith("#")


def _statement_before(lines: list[tuple[int, str]], k: int) -> tuple[int, int]:
    """(first, last) line numbers of the statement that ends just before lines[k] (blank, comment and
    preprocessor lines skipped). It must end in `;`: a REIMPL_TRACE placed after a closing brace or a
    loop header would need a rule of its own, so that fails the build instead of guessing."""
    j = k - 1
    while j >= 0 and _blank(lines[j][1]):
        j -= 1
    if j < 0 or not _code(lines[j][1]).endswith(";"):
        raise ValueError(f"line {lines[k][0]}: the line before REIMPL_TRACE does not end a statement")
    i = j
    while i > 0 and not _blank(lines[i - 1][1]) and not _code(lines[i - 1][1]).endswith((";", "{", "}")):
        i -= 1
    return lines[i][0], lines[j][0]


def _call_end(lines: list[tuple[int, str]], k: int) -> int:
    """The last line number of the call that starts at lines[k] (its parentheses balanced)."""
    depth = 0
    for n, text in lines[k:]:
        depth += _code(text).count("(") - _code(text).count(")")
        if depth <= 0:
            return n
    raise ValueError(f"line {lines[k][0]}: unbalanced REIMPL_TRACE call")


def _definitions(flat: list[tuple[str, int, str]], name: str) -> list[tuple[str, int, int]]:
    """(file, first, last) of each definition of function `name` in the excerpt: a line naming it with
    `(` whose text reaches `{` before `;`, through to the matching closing brace."""
    out = []
    for k, (file, n, text) in enumerate(flat):
        m = re.search(rf"\b{re.escape(name)}\s*\(", _code(text))
        if not m:
            continue
        rest = _code(text)[m.end():] + " " + " ".join(_code(t) for f, _, t in flat[k + 1:k + 12] if f == file)
        semi, brace = rest.find(";"), rest.find("{")
        if brace < 0 or 0 <= semi < brace:
            continue
        depth, seen = 0, False
        for f2, n2, t2 in flat[k:]:
            if f2 != file:
                break
            depth += _code(t2).count("{") - _code(t2).count("}")
            seen |= "{" in _code(t2)
            if seen and depth <= 0:
                out.append((file, n, n2))
                break
    return out


CALLEE_MAX = 30   # a called function longer than this (compute_stats) is not tinted: it is on screen anyway


@functools.lru_cache(maxsize=None)
def source_map(base: str) -> dict[str, dict]:
    """For every step kind recorded in the excerpt of kernel `base`: {"file", "stmt": [first, last],
    "site": [first, last], "callee": [[file, first, last], ...]} in the files' own line numbers. The site
    is the kind's first REIMPL_TRACE call in the excerpt (for `moments`, the !rms_norm branch's),
    "stmt" the statement just before it, "callee" the bodies of the functions that statement calls
    when they are in the excerpt."""
    flat = [(file, n, t) for file, name, _ in EXCERPTS[base] for n, t in section(file, name)]
    out: dict[str, dict] = {}
    for file, name, _ in EXCERPTS[base]:
        lines = list(section(file, name))
        for k, (n, text) in enumerate(lines):
            m = _SITE.search(_code(text))
            if not m or m.group(1) in out:
                continue
            try:
                a, b = _statement_before(lines, k)
            except ValueError as e:   # a kind no player shows (the elementwise output); an error if one does
                out[m.group(1)] = {"error": f"{file}: {e}"}
                continue
            stmt = " ".join(_code(t) for n2, t in lines if a <= n2 <= b)
            callee = []
            for fn in dict.fromkeys(re.findall(r"(\w+)\s*(?:<[^;()]*>)?\s*\(", stmt)):
                for f, lo, hi in _definitions(flat, fn):
                    if hi - lo < CALLEE_MAX and not (f == file and lo <= a <= hi):
                        callee.append([f, lo, hi])
            out[m.group(1)] = {"file": file, "section": name, "stmt": [a, b], "site": [n, _call_end(lines, k)],
                               "callee": callee}
    return out


def _excerpt_html(base: str, kinds: set[str], root: str) -> str:
    smap = source_map(base)
    missing = kinds - set(smap)
    if missing:
        raise ValueError(f"stepper: no REIMPL_TRACE for {sorted(missing)} in the excerpt of {base}")
    for k in sorted(kinds):
        if "error" in smap[k]:
            raise ValueError(f"stepper: step kind {k}: {smap[k]['error']}")
    sites = {(v["file"], n) for v in smap.values() if "site" in v for n in range(v["site"][0], v["site"][1] + 1)}
    out = [f'<div class="stepper-src" data-src="{escape(base)}" data-search-exclude>']
    for file, name, cut in EXCERPTS[base]:
        lines = list(section(file, name))
        if cut:
            last = max([v["site"][1] for k, v in smap.items() if k in kinds and v.get("file") == file
                        and v["section"] == name] or [lines[0][0]])
            lines = [(n, t) for n, t in lines if n <= last + 1]
        short = file.rsplit("/", 1)[1]
        out.append(f'<div class="stepper-sec" data-file="{escape(file)}" data-section="{escape(name)}">'
                   f'<div class="stepper-sec-head"><a href="{root}source/{escape(file)}/#{escape(name)}">'
                   f'{escape(short)} · {escape(name)}</a> <span>(lines {lines[0][0]}–{lines[-1][0]}; '
                   f'<a href="{root}{DOCS[short]}#{escape(name)}">explained</a>)</span></div>')
        for n, text in lines:
            code, sep, comment = text.partition("//")
            body = escape(code) + (f'<span class="c">{escape(sep + comment)}</span>' if sep else "")
            cls = "sl site" if (file, n) in sites else "sl"
            out.append(f'<div class="{cls}" data-line="{n}"><span class="ln">{n}</span><code>{body or " "}</code></div>')
        if cut:
            out.append(f'<div class="sl more"><span class="ln">⋮</span><code><span class="c">// … the elementwise '
                       f"output follows (the whole function: "
                       f'</span><a href="{root}source/{escape(file)}/#{escape(name)}">{escape(name)}</a>'
                       f'<span class="c">)</span></code></div>')
        out.append("</div>")
    out.append("</div>")
    return "".join(out)


# ----------------------------------------------------------------------------------------------------
# The exported trace


def _enc(v) -> str:
    """A value as the page carries it: float32 as 8 hex digits of its bits, float64 as 16, integers in
    decimal (stepper.js decodes them; bit for bit, -0.0 and NaN payloads included)."""
    a = np.asarray(v)
    if np.issubdtype(a.dtype, np.integer):
        return str(int(a))
    if a.dtype == np.float64:
        return f"{int(a.reshape(1).view(np.uint64)[0]):016x}"
    return f"{int(np.asarray(a, np.float32).reshape(1).view(np.uint32)[0]):08x}"


def _type(a: np.ndarray) -> str:
    return "i64" if np.issubdtype(a.dtype, np.integer) else "f64" if a.dtype == np.float64 else "f32"


def _ranges(ts) -> list[list[int]]:
    out: list[list[int]] = []
    for t in map(int, ts):
        if out and out[-1][1] == t - 1:
            out[-1][1] = t
        else:
            out.append([t, t])
    return out


def reg_fields(r: Run) -> tuple[str, ...]:
    """The register state's fields in record order: those of the first step (online / reduce)."""
    from ..emulator.trace import KINDS
    return KINDS[r.steps[0].kind][3]


def tracked(r: Run) -> list[int]:
    """The threads the register table shows: every thread that holds a non-empty register state at some
    step, and every thread of a result step whose threads disagree. The others hold zeros throughout."""
    from ..emulator.trace import KINDS
    regs = reg_fields(r)
    keep = set()
    for s in r.steps:
        names = KINDS[s.kind][3]
        if names == regs:
            nz = np.zeros(len(s.active), bool)
            for k in names:
                nz |= np.asarray(s.values[k]).view(np.uint64 if s.values[k].dtype.itemsize == 8 else np.uint32) != 0
            keep |= set(np.flatnonzero(s.active & nz).tolist())
        elif not _uniform(s):
            keep |= set(np.flatnonzero(s.active).tolist())
    return sorted(keep)


def _uniform(s) -> bool:
    t = np.flatnonzero(s.active)
    return all(len({_enc(v) for v in s.values[k][t]}) == 1 for k in s.values) if len(t) else True


def export(name: str) -> dict:
    """The JSON a player embeds for one preset (stepper.js reads it; tests/test_stepper_cpu.py checks it
    against a fresh emulation)."""
    from ..emulator.trace import KINDS
    r = run(name)
    regs = reg_fields(r)
    show = tracked(r)
    shown = set(show)
    smap = source_map(r.base)
    types = {}
    steps = []
    for pos, s in enumerate(r.steps):
        names = KINDS[s.kind][3]
        for k in names:
            types[k] = _type(s.values[k])
        act = np.flatnonzero(s.active)
        rows = [[int(t), int(s.aux[t])] + [_enc(s.values[k][t]) for k in names] for t in act if int(t) in shown]
        step = {"pos": pos, "kind": s.kind, "index": int(s.index), "func": KINDS[s.kind][1], "detail": s.detail,
                "aux": KINDS[s.kind][2], "fields": list(names), "regs": names == regs, "n_active": int(len(act)),
                "active": _ranges(act), "rows": rows, "src": smap[s.kind], "says": SAYS.get(s.kind, "")}
        if names != regs and len(act) and _uniform(s):
            step["all"] = [_enc(s.values[k][act[0]]) for k in names]
        steps.append(step)
    out, mean, rstd = r.outputs
    return {"preset": name, "kernel": r.kernel, "blockDim": r.block_dim, "threads": int(len(r.steps[0].active)),
            "N": int(r.x.shape[-1]), "regs": sorted(regs, key=ORDER.index), "regs_say": REGS_SAY[r.base],
            "types": types, "tracked": show,
            "mean": _enc(mean.reshape(-1)[0]), "rstd": _enc(rstd.reshape(-1)[0]), "steps": steps}


# ----------------------------------------------------------------------------------------------------
# The reduction tree, drawn at build time, revealed step by step


# The player's look: columns packed tighter than on the trace pages, so more merge steps show without
# scrolling, hence shorter labels with more room between them; larger nodes, which it highlights as the
# steps run (docs/assets/stepper.css, .stt-*).
TREE_LOOK = Look(prefix="stt", lw=96, cw=64, rh=18, top=40, r=4.5, reach=20, gap=12, min_width=0, root_digits=6)


def tree_svg(r: Run) -> str:
    """The reduction tree of the preset's one reduction call (trace_trees.build_tree: from the trace's own
    partner and slot fields), drawn as on the trace pages (trace_tree_svg.draw: leaves on the left, one
    column per merge step, warps other than warp 0 folded, empty states as grey dots). Every node, edge,
    label and column carries data-pos, the position of the step that made it (a leaf's: the step its values
    come from), so stepper.js fills the tree in as the steps run."""
    top = build_tree(r.steps, 0)
    nodes = _layout(top, 0)
    pos_of = {id(s): i for i, s in enumerate(r.steps)}
    parts, width, y = draw(top, nodes, TREE_LOOK, lambda nd: nd.pos if nd.pos >= 0 else pos_of.get(id(nd.step), -1))
    return (f"<svg xmlns='http://www.w3.org/2000/svg' class='stepper-tree-svg' role='img' "
            f"viewBox='0 0 {width} {y + 14}' width='{width}' height='{y + 14}' data-root='{top.thread}' "
            f"data-nodes='{len(nodes)}'><title>Reduction tree of {escape(r.kernel)}, block 0, drawn from the trace "
            f"of preset {escape(r.name)}</title>" + "".join(parts) + "</svg>")


# ----------------------------------------------------------------------------------------------------
# The player


def _bits(v) -> str:
    return f"0x{_enc(v)}"


def _caption(name: str, root: str) -> str:
    r = run(name)
    out, mean, rstd = r.outputs
    blk = " × ".join(map(str, r.block_dim[:2] if r.block_dim[1] > 1 else r.block_dim[:1]))
    launch = f"<code>{escape(r.kernel)}</code>, block ({blk}) threads, block 0 shown"
    if name == "merge_order":
        from ..emulator import merge_order
        d = merge_order.demo()
        l2r = d["trees"]["left_to_right"]
        return (f"<p>The 16 float32 values of <code>reimpl/emulator/merge_order.py</code> "
                f"(<code>make_row({d['seed']})</code>, about 10 each), in a fresh tensor, no weight or bias: {launch}. "
                f"Threads 0–3 fold four adjacent elements each; the other 124 hold empty states. torch's tree gives "
                f"mean <code>{_bits(mean[0])}</code>; "
                f"merging the same 16 states left to right gives <code>{l2r['mean']}</code> (and variance "
                f"<code>{l2r['var']}</code> against <code>{d['trees']['torch']['var']}</code>): see "
                f"<a href=\"{root}ladder/pattern/#not-associative\">not associative</a>.</p>")
    other = run("path_offset" if name == "path_aligned" else "path_aligned")
    here, there = ("aligned", "at storage offset 1") if name == "path_aligned" else ("at storage offset 1", "aligned")
    om, orr = other.outputs[1], other.outputs[2]
    differ = lambda a, b: "the same" if _enc(a) == _enc(b) else "<strong>different</strong>"  # noqa: E731
    diffs = int((out.view(np.uint32) != other.outputs[0].view(np.uint32)).sum())
    cli = f"python -m reimpl trace --shape 1,{PATH_N} --no-weight --no-bias"
    cli += f" --seed {path_seed()}" if path_seed() else ""
    cli += " --x-offset 1" if r.offsets[0] else ""
    return (f"<p>One row of {PATH_N} <code>torch.randn</code> values (seed {path_seed()}, the first seed for which the "
            f"emulator gives the two paths different bits), no weight or bias, {here}: {launch}. Here mean = "
            f"<code>{_bits(mean[0])}</code>, rstd = <code>{_bits(rstd[0])}</code>; the same values {there} give mean "
            f"<code>{_bits(om[0])}</code> ({differ(mean[0], om[0])}), rstd <code>{_bits(orr[0])}</code> "
            f"({differ(rstd[0], orr[0])}), and {diffs} of the {PATH_N} outputs differ. "
            f"The same steps as text: <code>{escape(cli)}</code>.</p>")


def player(names: list[str], root: str) -> str:
    for n in names:
        if n not in PRESETS:
            raise ValueError(f"stepper: unknown preset {n!r}; known: {', '.join(PRESETS)}")
    data = {n: export(n) for n in names}
    bases = list(dict.fromkeys(run(n).base for n in names))
    kinds = {b: {s["kind"] for n in names if run(n).base == b for s in data[n]["steps"]} for b in bases}
    sel = ""
    if len(names) > 1:
        opts = "".join(f'<option value="{n}">{escape(PRESETS[n].label)}</option>' for n in names)
        sel = f'<label class="stepper-pick">Input <select class="stepper-preset">{opts}</select></label>'
    controls = (f'<div class="stepper-controls">{sel}'
                '<span class="stepper-buttons">'
                '<button type="button" class="stepper-first" title="first step (Home)">First</button>'
                '<button type="button" class="stepper-back" title="back one step (←)">◀ Back</button>'
                '<button type="button" class="stepper-fwd" title="forward one step (→)">Forward ▶</button>'
                '<button type="button" class="stepper-last" title="last step (End)">Last</button>'
                '</span><input type="range" class="stepper-range" min="0" value="0" aria-label="step">'
                '<span class="stepper-count" aria-live="polite">step – / –</span></div>')
    captions = "".join(f'<div class="stepper-caption" data-preset="{n}">{_caption(n, root)}</div>' for n in names)
    trees = "".join(f'<div class="stepper-tree" data-preset="{n}" data-search-exclude>{tree_svg(run(n))}</div>'
                    for n in names)
    panes = "".join(_excerpt_html(b, kinds[b], root) for b in bases)
    payload = json.dumps({"presets": data}, separators=(",", ":"))
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return (f'<div class="stepper" tabindex="0" data-presets="{" ".join(names)}" data-search-exclude>'
            f'<p class="stepper-nojs">This player needs JavaScript. <code>python -m reimpl trace</code> prints the same '
            f'steps as text.</p>'
            f"{captions}{controls}"
            '<div class="stepper-now"><span class="stepper-where"></span><span class="stepper-says"></span></div>'
            f'<div class="stepper-panes">{panes}</div>'
            '<div class="stepper-legend"><span class="now">the statement whose result the step records</span>'
            '<span class="callee">the function it calls</span><span class="site-now">the REIMPL_TRACE line that '
            'records it</span></div>'
            '<div class="stepper-result"></div>'
            '<div class="stepper-regs-head"></div><div class="stepper-regs"><table class="stepper-table">'
            '<thead></thead><tbody></tbody></table></div>'
            '<div class="stepper-tree-head">The reduction tree, filled in as the merges run: leaves are the threads\' '
            'own states, each column one merge step; solid lines are shuffles, dashed ones go through shared memory, '
            'grey dots are empty states merged in, and a grey box is a whole warp\'s own shuffle tree, folded. '
            'Hover a node for its exact values and bits.</div>'
            f"{trees}"
            f'<script type="application/json" class="stepper-data">{payload}</script></div>')


def stepper(preset: str, root: str) -> str:
    """`{% stepper PRESET [PRESET ...] %}`: one player (with a selector when several presets are named),
    plus stepper.css and stepper.js (one directive per page)."""
    names = preset.split()
    html = player(names, root)
    # the stylesheet inside the box (a <link> alone on its line would be wrapped in a <p> by Markdown)
    html = html.replace(">", f'><link rel="stylesheet" href="{root}assets/stepper.css">', 1)
    return html + f'\n<script src="{root}assets/stepper.js"></script>\n'
