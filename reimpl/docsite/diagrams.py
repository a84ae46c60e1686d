"""The site's diagrams, drawn as inline SVG at build time (no JavaScript, no CDN: the site works offline).

Each public function returns one <svg> element as a single line, so Markdown passes it through
untouched. `DIAGRAMS` maps the name used in `{% diagram NAME %}` to its function; functions take
the relative URL prefix from the current page to the site root, for the boxes that are links.
"""
from __future__ import annotations

from html import escape

from ..layers import LAYERS
from . import thread_diagrams

_FONT = "font-family='ui-monospace,SFMono-Regular,Menlo,monospace' font-size='12'"
_STYLE = ("<style>.b{fill:#f4f6fb;stroke:#3f51b5;stroke-width:1.2}.k{fill:#e8f5e9;stroke:#2e7d32;stroke-width:1.2}"
          ".r{fill:#fff3e0;stroke:#ef6c00;stroke-width:1.2}.e{stroke:#555;stroke-width:1.2;fill:none}"
          ".g{fill:#eeeeee;stroke:#bbbbbb;stroke-width:1}.t{fill:#222}.m{fill:#666}</style>")
_ARROW = ("<defs><marker id='{id}' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' markerHeight='7' "
          "orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' fill='#555'/></marker></defs>")


def _svg(name: str, w: int, h: int, body: list[str], title: str) -> str:
    arrow = _ARROW.format(id=f"arrow-{name}")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' class='diagram' data-diagram='{name}' role='img' "
            f"viewBox='0 0 {w} {h}' width='100%' style='max-width:{w}px' {_FONT}><title>{escape(title)}</title>"
            f"{_STYLE}{arrow}{''.join(body).replace('ARROW', f'arrow-{name}')}</svg>")


def _box(x, y, w, h, text, cls="b", href=None, sub=None) -> str:
    t = f"<text class='t' x='{x + w / 2}' y='{y + (h / 2 - 2 if sub else h / 2 + 4)}' text-anchor='middle'>{escape(text)}</text>"
    if sub:
        t += f"<text class='m' x='{x + w / 2}' y='{y + h / 2 + 12}' text-anchor='middle' font-size='10'>{escape(sub)}</text>"
    shape = f"<rect class='{cls}' x='{x}' y='{y}' width='{w}' height='{h}' rx='5'/>" + t
    return f"<a href='{escape(href)}'>{shape}</a>" if href else shape


def _line(x1, y1, x2, y2, arrow=True, cls="e") -> str:
    end = " marker-end='url(#ARROW)'" if arrow else ""
    return f"<line class='{cls}' x1='{x1}' y1='{y1}' x2='{x2}' y2='{y2}'{end}/>"


def _label(x, y, text, anchor="start", cls="m", size=11) -> str:
    return f"<text class='{cls}' x='{x}' y='{y}' text-anchor='{anchor}' font-size='{size}'>{escape(text)}</text>"


def dispatch(root: str) -> str:
    """From torch.nn.functional to the kernels, LayerNorm on the left and RMSNorm on the right."""
    up = f"{root}upstream/layer_norm_kernel/"
    bw, bh, cx_l, cx_r = 250, 34, 150, 480
    b = []
    steps_l = [("F.layer_norm", None, None), ("aten::layer_norm", None, "composite, layer_norm.cpp"),
               ("aten::native_layer_norm", None, "CUDA dispatch key"),
               ("layer_norm_cuda", up + "#layer_norm_cuda", "shape checks, M x N, allocs"),
               ("LayerNormKernelImpl", up + "#LayerNormKernelImpl", "AT_DISPATCH: T, T_ACC")]
    steps_r = [("F.rms_norm", None, None), ("aten::rms_norm", None, "same dtypes: fused"),
               ("aten::_fused_rms_norm", None, "CUDA dispatch key"),
               ("_fused_rms_norm_cuda", up + "#_fused_rms_norm_cuda", "eps default, allocs"),
               ("RmsNormKernelImpl", up + "#RmsNormKernelImpl", "rms_norm = true")]
    for col, steps in ((cx_l, steps_l), (cx_r, steps_r)):
        for i, (text, href, sub) in enumerate(steps):
            y = 10 + i * 52
            b.append(_box(col - bw / 2, y, bw, bh, text, href=href, sub=sub))
            if i:
                b.append(_line(col, y - 18, col, y - 1))
    yi = 10 + 5 * 52 + 8
    b.append(_line(cx_l, yi - 24, 300, yi - 1))
    b.append(_line(cx_r, yi - 24, 330, yi - 1))
    b.append(_box(315 - 170, yi, 340, bh + 6, "LayerNormKernelImplInternal<T, T_ACC, rms_norm>",
                  href=up + "#LayerNormKernelImplInternal", sub="grid check, pointers, path choice"))
    yq = yi + 62
    b.append(_line(315, yi + bh + 6, 315, yq - 1))
    b.append(_box(315 - 200, yq, 400, 40, "float/half/bf16, N <= 2^24, N % 4 == 0,", cls="r",
                  sub="X, Y, gamma, beta all 16-byte... (4 x sizeof(T)) aligned?"))
    yk = yq + 90
    b.append(_line(250, yq + 40, 150, yk - 1))
    b.append(_label(170, yq + 62, "yes", "end"))
    b.append(_line(380, yq + 40, 480, yk - 1))
    b.append(_label(460, yq + 62, "no", "start"))
    b.append(_box(30, yk, 240, 40, "vectorized_layer_norm_kernel", cls="k",
                  href=up + "#vectorized_layer_norm_kernel", sub="grid M, block (32, 4), smem 24 B"))
    b.append(_box(360, yk, 240, 40, "RowwiseMomentsCUDAKernel", cls="k",
                  href=up + "#RowwiseMomentsCUDAKernel", sub="grid M, block 512: mean, rstd"))
    b.append(_line(480, yk + 40, 480, yk + 69))
    b.append(_box(360, yk + 70, 240, 40, "LayerNormForwardCUDAKernel", cls="k",
                  href=up + "#LayerNormForwardCUDAKernel", sub="grid M, block 256: y"))
    return _svg("dispatch", 630, yk + 120, b, "Forward call path from torch.nn.functional to the CUDA kernels")


def warp_shuffle(root: str) -> str:
    """compute_stats' intra-warp tree: five shuffle-down rounds, lane l takes lane l + offset."""
    lanes, dx, x0, y0, dy = 32, 19, 70, 28, 46
    b = [_label(x0 + i * dx, 16, str(i), "middle", size=9) for i in range(0, lanes, 1) if i % 4 == 0 or i == 31]
    rounds = [None, 16, 8, 4, 2, 1]
    for r, off in enumerate(rounds):
        y = y0 + r * dy
        b.append(_label(8, y + 4, "start" if off is None else f"offset {off}", size=10))
        live = lanes if off is None else off  # lanes whose state still matters after this round
        for i in range(lanes):
            cls = "k" if i < live else "g"
            b.append(f"<circle class='{cls}' cx='{x0 + i * dx}' cy='{y}' r='6'/>")
        if off is not None:
            for i in range(off):
                b.append(_line(x0 + (i + off) * dx, y - dy + 7, x0 + i * dx + 2, y - 8))
    b.append(_label(x0, y0 + 5 * dy + 26, "lane 0 holds the warp's (mean, sigma2, count); grey lanes hold partial "
                    "states nobody reads", size=10))
    return _svg("warp_shuffle", x0 + lanes * dx, y0 + 5 * dy + 36, b,
                "Warp shuffle-down tree: offsets 16, 8, 4, 2, 1 merge 32 lanes into lane 0")


def interwarp(root: str) -> str:
    """compute_stats' inter-warp rounds for blockDim.y = 4 and the 6-float (1.5 x 4) shared buffer:
    writers on the left, the buffer in the middle, the warps that read and combine on the right."""
    cw, bx, lx, rx, ww = 46, 200, 20, 520, 90
    names = ["m0", "s0", "m1", "s1", "c0", "c1"]
    b = [_label(10, 16, "shared buffer, float: nshared = threads.y x 3/2 x sizeof(float) = 4 x 3/2 x 4 = 24 bytes",
                size=11)]
    y = 40
    for offset in (2, 1):
        b.append(_label(10, y + 4, f"round with offset {offset}: warps [{offset}, {2 * offset}) write, "
                        f"__syncthreads, warps [0, {offset}) combine, __syncthreads", size=11))
        top = y + 16
        for w in range(4):
            wy = top + 6 + w * 22
            writer, reader = offset <= w < 2 * offset, w < offset
            b.append(_box(lx, wy, ww, 18, f"warp y={w}", cls="r" if writer else "g"))
            b.append(_box(rx, wy, ww, 18, f"warp y={w}", cls="k" if reader else "g"))
        cy = top + 34
        used = {2 * s for s in range(offset)} | {2 * s + 1 for s in range(offset)} | {4 + s for s in range(offset)}
        for i, n in enumerate(names):
            b.append(_box(bx + i * cw, cy, cw, 26, n, cls=("r" if i >= 4 else "b") if i in used else "g"))
        for src in range(offset, 2 * offset):
            slot = src - offset  # wrt_y: where warp src writes; warp `slot` reads it back
            b.append(_line(lx + ww, top + 15 + src * 22, bx + 2 * slot * cw + 4, cy + 13))
            b.append(_line(bx + 4 * cw + slot * cw + cw / 2, cy + 26, rx - 2, top + 15 + slot * 22))
            b.append(_line(bx + 2 * slot * cw + 2 * cw, cy + 13, rx - 2, top + 15 + slot * 22))
        y = top + 6 + 4 * 22 + 22
    b.append(_label(10, y + 4, "then warp 0 writes (mean, sigma2 / N) to buf[0], buf[1]; sync; every thread reads them", size=11))
    b.append(_label(10, y + 24, "m, s: mean and sigma2 (meansigmabuf = buf)   c: count (countbuf = buf + threads.y)",
                    size=10))
    return _svg("interwarp", 640, y + 34, b,
                "Inter-warp merge in compute_stats: halving rounds through a 1.5 x blockDim.y float buffer")


def architecture(root: str) -> str:
    """The package's layers (reimpl/layers.py) as a stack, top to bottom, with one arc per allowed
    import on the right. The command line, which may reach every layer, gets a note instead of arcs."""
    w, x0, bw, bh, gap, top = 820, 10, 520, 40, 16, 16
    index = {layer.name: i for i, layer in enumerate(LAYERS)}
    ys = {layer.name: top + i * (bh + gap) for i, layer in enumerate(LAYERS)}
    body = []
    for layer in LAYERS:
        cls = "k" if layer.name == "mirror" else "b"
        body.append(_box(x0, ys[layer.name], bw, bh, layer.name, cls, sub=layer.folder))
    right = x0 + bw
    for layer in LAYERS:
        if layer.name == "cli":
            body.append(_label(right + 10, ys["cli"] + bh / 2 + 4, "may import every layer below (lazily)"))
            continue
        for k, target in enumerate(layer.may_import):
            span = index[target] - index[layer.name]
            # an arc's width grows with the layers it skips, so arcs of one span nest instead of crossing
            y1 = ys[layer.name] + bh / 2 + 4 + 4 * k
            y2 = ys[target] + bh / 2 - 8 + 4 * k
            reach = 10 + 30 * span
            body.append(f"<path class='e' d='M{right},{y1} C{right + reach},{y1} {right + reach},{y2} {right + 2},{y2}' "
                        "marker-end='url(#ARROW)'/>")
    h = top + len(LAYERS) * (bh + gap)
    return _svg("architecture", w, h, body, "The package's layers, top to bottom, and the imports each may make")


def one_read_words(root: str, N: int = 10, rows: int = 3, itemsize: int = 4) -> str:
    """The one-read kernels' 16-byte words on rows that do not start on one: launch.regs_plan's plan
    for rows of N, each row's window of words from the one holding its first element, the lane that
    loads each word, and which words are loaded whole (16 bytes) or an element at a time."""
    from ..ladder.launch import regs_plan
    plan = regs_plan(N, itemsize)
    vec, words = plan.vec, plan.vecs * plan.lanes
    cw, ch, x0, y0, dy = 26, 24, 150, 34, 74
    b = []
    for r in range(rows):
        lead = (r * N) % vec
        y = y0 + r * dy
        b.append(_label(8, y + 16, f"row {r}", size=11))
        b.append(_label(8, y + 30, f"starts {lead} into a word", size=9))
        for k in range(words):
            p = k * vec  # window position of word k: element p - lead of the row
            own = [0 <= p + j - lead < N for j in range(vec)]
            kind = "whole" if all(own) else "partial" if any(own) else "none"
            lane = k % plan.lanes
            xw = x0 + k * (vec * cw + 8)
            for j in range(vec):
                g = r * N - lead + p + j  # the element of the tensor in this slot
                row_of, e = divmod(g, N)
                cls = "k" if own[j] else "g"
                b.append(f"<rect class='{cls}' x='{xw + j * cw}' y='{y}' width='{cw}' height='{ch}' "
                         f"data-row='{r}' data-word='{k}' data-element='{e if own[j] else -1}'/>")
                b.append(_label(xw + j * cw + cw / 2, y + 16, f"{row_of}.{e}" if g >= 0 else "", "middle",
                                "t" if own[j] else "m", size=9))
            dash = " stroke-dasharray='4 3'" if kind == "partial" else ""
            color = "#ef6c00" if kind == "partial" else "#3f51b5" if kind == "whole" else "#bbbbbb"
            b.append(f"<rect x='{xw}' y='{y}' width='{vec * cw}' height='{ch}' fill='none' stroke='{color}' "
                     f"stroke-width='2'{dash} data-row='{r}' data-word='{k}' data-lane='{lane}' data-kind='{kind}'/>")
            b.append(_label(xw + vec * cw / 2, y + ch + 14, f"lane {lane}" + (" · partial" if kind == "partial"
                                                                               else " · not read" if kind == "none"
                                                                               else " · 16 bytes"),
                            "middle", size=9))
    w = x0 + words * (vec * cw + 8)
    b.append(_label(8, y0 + rows * dy + 2, f"Rows of {N} float32; {plan.lanes} lanes a row, {plan.vecs} word(s) of "
                    f"{vec} a lane; a slot shows row.element.", size=10))
    b.append(_label(8, y0 + rows * dy + 18, "Dashed words hold the row in part: loaded whole, grey slots taken as -inf,",
                    size=10))
    b.append(_label(8, y0 + rows * dy + 34, "stored an element at a time. Grey slots are the neighbouring rows', never "
                    "written.", size=10))
    return _svg("one_read_words", w, y0 + rows * dy + 44, b,
                f"Rows of {N} float32 elements over 16-byte words: every word loads whole, and the first and last "
                "words of a row are stored an element at a time")


DIAGRAMS = {"dispatch": dispatch, "warp_shuffle": warp_shuffle, "interwarp": interwarp,
            "architecture": architecture, "one_read_words": one_read_words,
            # where each thread works, drawn from the recorded launch plans (thread_diagrams.py)
            "lanes_vectorized": thread_diagrams.lanes_vectorized,
            "lanes_shfl_down": thread_diagrams.lanes_shfl_down,
            "lanes_smem_rounds": thread_diagrams.lanes_smem_rounds,
            "tile_gamma_beta": thread_diagrams.tile_gamma_beta,
            "backward_holders": thread_diagrams.backward_holders}
