"""Build-time step traces for the docs: tiny examples run through the CPU emulator while the site is
built, shown as tables and as a reduction tree drawn from the trace itself (nothing is pasted).
This module expands the directives on a page (`expand`) and holds the CLI (`main`); the parts are

    trace_collect.py    the directive's options, its case, the emulation, the kernel's steps
    trace_tables.py     one table of steps per kind
    trace_trees.py      the reduction tree, built from the trace's aux fields
    trace_tree_svg.py   that tree drawn as an inline SVG
    code_excerpts.py    the code directive and the emulator's generated source pages

Directives, each alone on its line (expanded by on_page_markdown before reimpl.docsite.render's):

    <!-- trace: op=layer_norm dtype=fp32 shape=1,512 kernel=vectorized_layer_norm_kernel kinds=online,shfl_down -->
        Emulates a reimpl.checks.cases.Case (op, dtype, shape; optional weight=0, bias=0, x_offset, w_offset,
        b_offset, values, seed, eps, norm_ndim) with reimpl.emulator.trace recording, keeps the steps of
        one kernel (the template name before `<`) and one block (block=0), and renders:
          - a caption: the case, the launch (from the host mirror), and how to rerun it with the CLI;
          - one collapsible table per step kind (kinds=a,b; default every kind the kernel emitted),
            the chosen threads' aux (partner, slot, element) and values with their bits in hex.
            Threads: threads=0,1,4-7 for every kind, threads.KIND=... for one; by default the
            threads that make sense for the kind's aux (see trace_tables). open=KIND,... opens tables;
          - an inline SVG of the reduction tree (tree=0 to leave it out; focus=W picks the warp drawn
            lane by lane, focus=none collapses every warp's shuffle tree; root=T the thread that ends
            with the block's result, default 0; stop=KIND draws the tree as it stands before the first
            step of that kind, e.g. one WarpReduce call). See trace_tree_svg.tree. A kernel with
            several reduction calls (see trace_trees.calls: compute_gI's BlockReduceSum of stats_x1,
            then of stats_x2) gets one tree per call, each from its own leaves; call=N draws only the
            N-th (and keeps the tables of the reduction's own kinds to that call's steps);
            leaves=KIND[.FIELD,...] says where a call's leaves come from when the default (see
            trace_trees._leaf_source) cannot tell. A kernel whose steps merge nothing (GammaBeta's
            <32,1,8> tile) gets a note saying so instead of a tree.
    <!-- trace: backward=1 op=layer_norm dtype=fp32 shape=64,32 kernel=GammaBetaBackwardCUDAKernelTemplate stop=gb_out -->
        The same for the backward: a reimpl.checks.cases_backward.BackwardCase (the options above plus mask=1,1,0,
        the output_mask, by default every gradient that exists; dy_offset; dy_values), its backward run on
        the emulator with the trace on (trace_collect.emulate_backward: mean and rstd from the
        emulated forward, which is not recorded). The kernels: layer_norm_grad_input_kernel, ..._vectorized,
        GammaBetaBackwardCUDAKernelTemplate (blocks numbered blockIdx.x + blockIdx.y * gridDim.x). The
        caption's command is `python -m reimpl trace ... [--backward --mask ...]`, which prints the same
        steps; `python -m reimpl.docsite.traces '<directive>'` (`main`) does too, from the directive itself.
        Rows and tree edges carry data-* attributes (kind, index, position in the kernel's steps,
        threads, bits) that tests/test_docs_traces_cpu.py reads back. The tables and the tree are kept
        out of the search index (data-search-exclude). A directive line is expanded wherever it
        stands, inside a fenced code block too: show the syntax indented, as here.
    <!-- code: ... -->
        Our code, included by line range (see reimpl.docsite.code_excerpts).
"""
from __future__ import annotations

import re
from html import escape

import numpy as np

from .code_excerpts import code
from .trace_collect import case_of, emulate, kernel_steps, parse_directive
from .trace_tables import table, table_threads
from .trace_tree_svg import tree
from .trace_trees import calls, merges

TRACE = re.compile(r"^<!-- trace: (.*?) -->$", re.M)
CODE = re.compile(r"^<!-- code: (.*?) -->$", re.M)
ANY = re.compile(r"^<!-- (trace|code)\b.*$", re.M)


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
    steps = kernel_steps(ex, opts, page)
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
                                           if merges(s.kind)))
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
            pos = [i for i, s in enumerate(steps) if s.kind == k and (span is None or not merges(k) or i in span)]
            ks = [steps[i] for i in pos]
            threads = table_threads(opts, k, ks)
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
    steps = kernel_steps(ex, opts)
    kinds = set(opts["kinds"].split(",")) if "kinds" in opts else None
    launch = next(l for l in ex.launches if l.kernel.split("<")[0] == opts["kernel"])
    print(ex.case.id)
    for s in steps:
        if kinds is None or s.kind in kinds:
            threads = table_threads(opts, s.kind, [t for t in steps if t.kind == s.kind])
            print(trace_view.format_step(s, np.array(threads), launch.block[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
