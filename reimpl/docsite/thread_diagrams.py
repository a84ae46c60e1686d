"""Pictures of where each thread works, drawn from the launch plans so that they cannot drift.

Each picture records the host mirror's launches for a few inputs on the CPU
(reimpl/checks/plan.py `host_launches`, under a RecordingRuntime), reads the block shape, the grid,
the dynamic shared memory and the template arguments from the recorded launch, and draws what the
kernel's indexing does with that launch:

  lanes_vectorized   vectorized_layer_norm_kernel: which thread (x, y) of the block loads which
                     vec_size-wide vector of a row, for N = 16, 512, 1000, 4096
  lanes_shfl_down    compute_stats: the shuffle-down tree inside one warp (lane l takes lane l + offset)
  lanes_smem_rounds  compute_stats: the shared-memory rounds across the block's warps
  tile_gamma_beta    GammaBetaBackwardCUDAKernelTemplate: the tile of dY and X a block walks, for
                     M = 32, 100, 200, 4096 (template arguments parsed from the recorded kernel name)
  backward_holders   the ladder's CUDA backward (ln_row_held_backward): the rows each resident block
                     walks, the partial rows they write and the column sum that adds them

The numbers a picture shows are also emitted as data-* attributes; tests/test_thread_diagrams_cpu.py
reads them back and compares them with the recorded launches and with the emulator's step traces of
the same inputs (reimpl/emulator/trace.py). Plain SVG: text and lines in `currentColor`, fills in
semi-transparent accent colours, so one drawing reads in the light and the dark palette.
"""
from __future__ import annotations

import functools
import textwrap
from html import escape

FORWARD_NS = (16, 512, 1000, 4096)   # row lengths drawn by lanes_vectorized
STATS_N = 512                        # the row whose launch the two compute_stats pictures use
GAMMA_BETA_MS = (32, 100, 200, 4096)  # row counts drawn by tile_gamma_beta
GAMMA_BETA_N = 64                    # columns of those backward inputs: two blocks along x
BACKWARD_M, BACKWARD_N = 10, 4096     # backward_holders: rows of float32 that one block holds each
BACKWARD_SMS = 3                      # on a toy device of 3 SMs: three holders
# GammaBetaBackwardCUDAKernelTemplate's template parameters, in order (reimpl/mirror/kernel_table.py)
GAMMA_BETA_PARAMS = ("T", "T_ACC", "block_dim_x", "block_dim_y", "rows_per_block_y", "partial_reduction",
                     "aligned_grid", "rms_norm")

# accent fills (indigo, teal, orange, pink) at FILL_OPACITY: one per warp, cycling
PALETTE = ("#3f51b5", "#00897b", "#ef6c00", "#d81b60")
FILL_OPACITY = 0.38
MAX_SCALE = 1.15  # an SVG may grow this much past its drawn size to fill a wide column (small text)
_FONT = "font-family='ui-monospace,SFMono-Regular,Menlo,monospace'"


# ---- the launches ------------------------------------------------------------------------------------
def _only(launches, template) -> object:
    found = [l for l in launches if l.kernel.startswith(template.name + "<")]
    if len(found) != 1:
        raise ValueError(f"expected one {template.name} launch, got {[l.kernel for l in launches]}")
    return found[0]


@functools.lru_cache(maxsize=None)
def forward_launch(N: int):
    """The vectorized_layer_norm_kernel launch of one fp32 row of N (aligned, N % vec_size == 0)."""
    from ..checks.cases import Case
    from ..checks.plan import host_launches
    from ..mirror.kernel_table import vectorized_layer_norm_kernel
    return _only(host_launches(Case("layer_norm", "fp32", (1, N))), vectorized_layer_norm_kernel)


@functools.lru_cache(maxsize=None)
def gamma_beta_launch(M: int, N: int = GAMMA_BETA_N):
    """The GammaBetaBackwardCUDAKernelTemplate launch of an fp32 layer_norm backward of M x N."""
    from ..checks.cases_backward import BackwardCase
    from ..checks.plan import host_launches
    from ..mirror.kernel_table import GammaBetaBackwardCUDAKernelTemplate
    return _only(host_launches(BackwardCase("layer_norm", "fp32", (M, N))), GammaBetaBackwardCUDAKernelTemplate)


def template_args(kernel: str) -> list:
    """`Name<float, float, 32u, 8u, 64u, false, false, false>` -> ['float', 'float', 32, 8, 64, False, ...]."""
    inner = kernel[kernel.index("<") + 1:kernel.rindex(">")]
    out = []
    for a in (s.strip() for s in inner.split(",")):
        if a in ("true", "false"):
            out.append(a == "true")
        elif a.rstrip("u").isdigit():
            out.append(int(a.rstrip("u")))
        else:
            out.append(a)
    return out


def vec_size() -> int:
    from ..mirror import layer_norm_kernel as host
    return host.vec_size


def vector_layout(N: int) -> dict:
    """Where the vectorized kernel's threads work on a row of N, from its recorded launch:
    thread thrx = x + y * blockDim.x loads vectors thrx, thrx + numx, ... (numx = blockDim.x * blockDim.y),
    so element e is in vector e / vec_size, loaded by thread (e / vec_size) % numx in iteration
    (e / vec_size) / numx. `runs` are the (iteration, y) stretches of consecutive threads that load."""
    launch = forward_launch(N)
    bx, by, _ = launch.block
    vs = vec_size()
    numx, n_vec = bx * by, N // vs
    iterations = -(-n_vec // numx)
    runs = []
    for it in range(iterations):
        last = min(n_vec, (it + 1) * numx) - 1 - it * numx  # last thread with a vector this iteration
        for y in range(by):
            t0, t1 = y * bx, min((y + 1) * bx - 1, last)
            if t0 <= t1:
                v0 = it * numx + t0
                runs.append({"iter": it, "y": y, "t0": t0, "t1": t1,
                             "e0": v0 * vs, "e1": (v0 + t1 - t0) * vs + vs - 1})
    return {"N": N, "block": tuple(launch.block), "grid": tuple(launch.grid), "vec_size": vs, "numx": numx,
            "n_vec": n_vec, "iterations": iterations, "runs": runs}


def thread_of_vector(i: int, layout: dict) -> tuple[int, int, int]:
    """(x, y, iteration) of the thread that loads vector i."""
    bx = layout["block"][0]
    t = i % layout["numx"]
    return t % bx, t // bx, i // layout["numx"]


def shuffle_rounds(warp: int) -> list[dict]:
    """compute_stats' WARP_SHFL_DOWN rounds: offsets warp/2, ..., 1; lane l reads lane l + offset,
    or its own value where l + offset is past the warp. `read`: the lane's result is read later."""
    rounds, offset = [], warp >> 1
    while offset > 0:
        rounds.append({"offset": offset, "lanes": [{"lane": l, "src": l + offset if l + offset < warp else l,
                                                     "read": l < offset} for l in range(warp)]})
        offset >>= 1
    return rounds


def smem_rounds(warps: int) -> list[dict]:
    """compute_stats' inter-warp rounds for blockDim.y = warps: offsets warps/2, ..., 1; warps
    [offset, 2 offset) write slot y - offset, warps [0, offset) read slot y and combine."""
    rounds, offset, r = [], warps // 2, 0
    while offset > 0:
        rounds.append({"round": r, "offset": offset,
                       "writers": [(y, y - offset) for y in range(offset, 2 * offset)],
                       "combiners": [(y, y) for y in range(offset)]})
        offset //= 2
        r += 1
    return rounds


def gamma_beta_tile(M: int, N: int = GAMMA_BETA_N) -> dict:
    """The tile of the recorded GammaBeta launch for M x N: template arguments, grid, block, and the
    tiles blockIdx.y = 0 walks along M (M_start = blockIdx.y * rows_per_block_y, step
    rows_per_block_y * gridDim.y)."""
    launch = gamma_beta_launch(M, N)
    args = dict(zip(GAMMA_BETA_PARAMS, template_args(launch.kernel), strict=True))
    bdx, bdy, rpb = args["block_dim_x"], args["block_dim_y"], args["rows_per_block_y"]
    if tuple(launch.block[:2]) != (bdx, bdy):
        raise ValueError(f"{launch.kernel}: block {launch.block} is not ({bdx}, {bdy})")
    rpt = rpb // bdy
    tiles = [{"tile": k, "r0": s, "r1": s + rpb - 1, "valid": min(M, s + rpb) - s, "check_y": s + rpb - 1 >= M}
             for k, s in enumerate(range(0, M, rpb * launch.grid[1]))]
    bands = [{"y": y, "r0": y * rpt, "r1": (y + 1) * rpt - 1} for y in range(bdy)]
    return {"M": M, "N": N, "kernel": launch.kernel, "args": args, "grid": tuple(launch.grid),
            "block": tuple(launch.block), "shared": launch.shared, "rows_per_thread_y": rpt,
            "tiles": tiles, "bands": bands}


# ---- drawing -------------------------------------------------------------------------------------------
def _n(v) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v)


def _data(data: dict | None) -> str:
    if not data:
        return ""
    return "".join(f" data-{k}='{escape(str(int(v) if isinstance(v, bool) else v))}'" for k, v in data.items())


def _text(x, y, s, anchor="start", size=11, weight=None, dim=False, data=None, rotate=None) -> str:
    extra = f" font-weight='{weight}'" if weight else ""
    extra += " fill-opacity='0.72'" if dim else ""
    extra += f" transform='rotate({rotate} {_n(x)} {_n(y)})'" if rotate is not None else ""
    return (f"<text x='{_n(x)}' y='{_n(y)}' text-anchor='{anchor}' font-size='{size}' fill='currentColor'"
            f"{extra}{_data(data)}>{escape(s)}</text>")


def _rect(x, y, w, h, fill=None, stroke=True, dash=False, rx=2, data=None, opacity=FILL_OPACITY,
          stroke_opacity=0.55) -> str:
    f = f"fill='{fill}' fill-opacity='{opacity}'" if fill else "fill='none'"
    s = (f" stroke='currentColor' stroke-opacity='{stroke_opacity}' stroke-width='1'"
         + (" stroke-dasharray='3 2'" if dash else "")) if stroke else ""
    return f"<rect x='{_n(x)}' y='{_n(y)}' width='{_n(w)}' height='{_n(h)}' rx='{rx}' {f}{s}{_data(data)}/>"


def _line(x1, y1, x2, y2, opacity=0.8, width=1.0, dash=False, arrow=None, data=None) -> str:
    d = " stroke-dasharray='4 3'" if dash else ""
    a = f" marker-end='url(#{arrow})'" if arrow else ""
    return (f"<line x1='{_n(x1)}' y1='{_n(y1)}' x2='{_n(x2)}' y2='{_n(y2)}' stroke='currentColor' "
            f"stroke-opacity='{opacity}' stroke-width='{width}'{d}{a}{_data(data)}/>")


def _arrow_def(id_: str) -> str:
    return (f"<marker id='{id_}' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='6' markerHeight='6' "
            "orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' fill='currentColor'/></marker>")


def _svg(name: str, w: float, h: float, body: list[str], title: str, caption: list[str], defs: str = "",
         data: dict | None = None) -> str:
    """One <svg> on one line; the caption paragraphs are drawn under the body (visible, wrapped to
    the width), the title is for screen readers and tooltips."""
    cap, y = [], h + 16
    for i, para in enumerate(caption):
        for line in _wrap(para, w - 20, 11):
            cap.append(_text(10, y, line, size=11, dim=i > 0, data={"caption": i}))
            y += 15
        y += 3
    total = y
    return (f"<svg xmlns='http://www.w3.org/2000/svg' class='diagram thread-diagram' data-diagram='{name}'"
            f"{_data(data)} role='img' viewBox='0 0 {_n(w)} {_n(total)}' width='100%' "
            f"style='max-width:{_n(round(w * MAX_SCALE))}px' {_FONT}><title>{escape(title)}</title>"
            f"{'<defs>' + defs + '</defs>' if defs else ''}{''.join(body)}{''.join(cap)}</svg>")


def _wrap(text: str, width: float, size: float) -> list[str]:
    """Lines of monospace text of font `size` that fit `width` (a glyph is about 0.6 em wide)."""
    return textwrap.wrap(text, max(20, int(width / (0.61 * size))))


def _heading(x, y, text, width, size=12) -> tuple[list[str], float]:
    """A bold heading wrapped to `width`: (elements, y below it)."""
    out = []
    for line in _wrap(text, width, size):
        out.append(_text(x, y, line, size=size, weight="bold"))
        y += size + 4
    return out, y


def _colour(y: int) -> str:
    return PALETTE[y % len(PALETTE)]


# ---- 1. vectorized_layer_norm_kernel: which lane loads which vector ------------------------------------
def lanes_vectorized(root: str = "") -> str:
    """For each N: a map (one row per loop iteration, one column per thread thrx, grouped by
    threadIdx.y) of the threads that load a vector, and the first and last vectors of the row with
    their element indices and the thread (x, y) that loads them."""
    name = "lanes_vectorized"
    layouts = [vector_layout(N) for N in FORWARD_NS]
    blocks = {l["block"] for l in layouts}
    if len(blocks) != 1:
        raise ValueError(f"the vectorized launches disagree on the block: {blocks}")
    bx, by, _ = blocks.pop()
    vs = layouts[0]["vec_size"]
    numx = bx * by
    cw, gap, left, rh = 3, 6, 42, 11            # map: lane width, gap between warps, left margin, row height
    map_w = numx * cw + (by - 1) * gap
    ecw, eh, vgap, show = 25, 18, 8, 2           # strip: element cell, vector gap, vectors shown at each end
    W = max(left + map_w + 196, 10 + 2 * show * (vs * ecw + vgap) + 60)

    def lane_x(t: int) -> float:
        return left + t * cw + (t // bx) * gap

    defs = (f"<pattern id='{name}-lanes' width='{cw}' height='{rh}' patternUnits='userSpaceOnUse'>"
            f"<line x1='{cw - 0.5}' y1='0' x2='{cw - 0.5}' y2='{rh}' stroke='currentColor' stroke-opacity='0.35' "
            "stroke-width='0.6'/></pattern>")
    b, y0 = _heading(10, 16, f"vectorized_layer_norm_kernel: recorded launch block ({bx}, {by}, 1) = {numx} "
                             f"threads, vec_size = {vs}", W - 20)
    for line in _wrap(f"thread thrx = x + {bx}·y loads vectors thrx, thrx + {numx}, …; element e: thread "
                      f"(e / {vs}) % {numx}, iteration (e / {vs}) / {numx}", W - 20, 11):
        b.append(_text(10, y0, line, size=11, dim=True))
        y0 += 15
    y0 += 8
    for y in range(by):  # warp headers over the map
        b.append(_text(lane_x(y * bx) + bx * cw / 2, y0, f"threadIdx.y = {y}", "middle", size=10))
    b.append(_text(lane_x(0), y0 + 12, "x=0", size=9, dim=True))
    b.append(_text(lane_x(bx - 1) + cw, y0 + 12, f"x={bx - 1}", "end", size=9, dim=True))
    y = y0 + 24
    for lay in layouts:
        N, its = lay["N"], lay["iterations"]
        g = [f"<g data-n='{N}' data-vectors='{lay['n_vec']}' data-iterations='{its}' "
             f"data-block='{','.join(map(str, lay['block']))}' data-grid='{','.join(map(str, lay['grid']))}'>"]
        g.append(_text(10, y + 10, f"N = {N}: {lay['n_vec']} vectors of {vs}, {its} iteration{'s' * (its > 1)} "
                                   f"(grid.x = {lay['grid'][0]}, one block per row)",
                       size=11, weight="bold"))
        y += 18
        for it in range(its):
            ry = y + it * (rh + 2)
            g.append(_text(left - 6, ry + rh - 2, f"it {it}", "end", size=9, dim=True))
            runs = [r for r in lay["runs"] if r["iter"] == it]
            for r in runs:
                x1, x2 = lane_x(r["t0"]), lane_x(r["t1"]) + cw
                g.append(_rect(x1, ry, x2 - x1, rh, fill=_colour(r["y"]), stroke=False, rx=0,
                               data={"iter": it, "y": r["y"], "thread-first": r["t0"], "thread-last": r["t1"],
                                     "element-first": r["e0"], "element-last": r["e1"]}))
                g.append(f"<rect x='{_n(x1)}' y='{_n(ry)}' width='{_n(x2 - x1)}' height='{rh}' "
                         f"fill='url(#{name}-lanes)'/>")
            last = max(r["t1"] for r in runs)
            if last < numx - 1:  # idle threads this iteration, run by run of warps
                for yy in range((last + 1) // bx, by):
                    t0 = max(last + 1, yy * bx)
                    x1, x2 = lane_x(t0), lane_x(yy * bx + bx - 1) + cw
                    g.append(_rect(x1 + 0.5, ry + 0.5, x2 - x1 - 1, rh - 1, dash=True, rx=0, stroke_opacity=0.35,
                                   data={"iter": it, "idle-first": t0, "idle-last": yy * bx + bx - 1}))
            e0, e1 = runs[0]["e0"], runs[-1]["e1"]
            note = f"e {e0}–{e1}" + (f", threads {last + 1}–{numx - 1} idle" if last < numx - 1 else "")
            g.append(_text(left + map_w + 8, ry + rh - 2, note, size=9, dim=True))
        y += its * (rh + 2) + 8
        # the first and last vectors, element by element
        n_vec = lay["n_vec"]
        shown = list(range(n_vec)) if n_vec <= 2 * show else list(range(show)) + list(range(n_vec - show, n_vec))
        x = 10
        for k, i in enumerate(shown):
            if k == show and n_vec > 2 * show:
                g.append(_text(x + 28, y + eh - 4, "…", "middle", size=14))
                g.append(_text(x + 28, y + eh + 12, f"{n_vec - 2 * show} more", "middle", size=9, dim=True))
                x += 56
            tx, ty, it = thread_of_vector(i, lay)
            g.append(f"<g data-vector='{i}' data-element-first='{i * vs}' data-x='{tx}' data-y='{ty}' "
                     f"data-iter='{it}'>")
            for j in range(vs):
                g.append(_rect(x + j * ecw, y, ecw, eh, fill=_colour(ty), rx=0, stroke_opacity=0.45))
                g.append(_text(x + j * ecw + ecw / 2, y + eh - 5, str(i * vs + j), "middle", size=9))
            g.append(_text(x + vs * ecw / 2, y + eh + 11, f"(x, y) = ({tx}, {ty})", "middle", size=9))
            g.append(_text(x + vs * ecw / 2, y + eh + 22, f"vector {i}, it {it}", "middle", size=9, dim=True))
            g.append("</g>")
            # mark the lane on the map above
            mx = lane_x(ty * bx + tx)
            my = y - 8 - (its - it) * (rh + 2)
            g.append(_rect(mx - 0.5, my - 0.5, cw + 1, rh + 1, stroke_opacity=0.95, rx=0))
            x += vs * ecw + vgap
        g.append("</g>")
        b.extend(g)
        y += eh + 34
    caption = [f"Each coloured run is one warp (threadIdx.y) loading {vs}-element vectors in one loop iteration "
               f"(a tick per thread); dashed: threads with nothing left to load.",
               f"Block shape and vec_size come from the host mirror's recorded launch and constants, the "
               f"mapping from the kernel's loop (compute_stats and the normalize loop share it)."]
    return _svg(name, W, y, b, "Which thread of vectorized_layer_norm_kernel's block loads which vector of a row",
                caption, defs)


# ---- 2. compute_stats: the shuffle-down tree in a warp -------------------------------------------------
def lanes_shfl_down(root: str = "") -> str:
    """One row per round; lane l's circle under offset o is its state after taking lane l + o's."""
    from ..mirror import layer_norm_kernel as host
    name = "lanes_shfl_down"
    launch = forward_launch(STATS_N)
    warp = launch.block[0]
    if warp != host.C10_WARP_SIZE:
        raise ValueError(f"blockDim.x {warp} is not the warp size {host.C10_WARP_SIZE}")
    rounds = shuffle_rounds(warp)
    dx, left, top, dy, r = 17, 82, 42, 48, 6
    W = left + (warp - 1) * dx + 30
    b = [_text(10, 14, f"compute_stats: WARP_SHFL_DOWN in one warp, offsets "
                       f"{', '.join(str(r_['offset']) for r_ in rounds)}", size=12, weight="bold"),
         _text(left - 12, 32, "lane", "end", size=9, dim=True)]
    for l in range(warp):
        b.append(_text(left + l * dx, 32, str(l), "middle", size=9, dim=True))
    b.append(_text(left - 14, top + 4, "own state", "end", size=10))
    for l in range(warp):
        b.append(f"<circle cx='{left + l * dx}' cy='{top}' r='{r}' fill='{_colour(0)}' fill-opacity='{FILL_OPACITY}' "
                 f"stroke='currentColor' stroke-opacity='0.55'/>")
    for k, rd in enumerate(rounds):
        o, cy = rd["offset"], top + (k + 1) * dy
        b.append(_text(left - 14, cy + 4, f"offset {o}", "end", size=10, weight="bold"))
        g = [f"<g data-offset='{o}' data-round='{k}'>"]
        for ln in rd["lanes"]:
            l, src, read = ln["lane"], ln["src"], ln["read"]
            if src != l:
                g.append(_line(left + src * dx, cy - dy + r + 1, left + l * dx, cy - r - 1,
                               opacity=0.85 if read else 0.16, width=1.2 if read else 0.8,
                               arrow=f"{name}-arrow" if read else None))
        for ln in rd["lanes"]:
            l, src, read = ln["lane"], ln["src"], ln["read"]
            fill = (f"fill='{_colour(0)}' fill-opacity='{FILL_OPACITY + 0.2}'" if read
                    else "fill='currentColor' fill-opacity='0.08'")
            dash = " stroke-dasharray='2 2'" if src == l else ""
            g.append(f"<circle cx='{left + l * dx}' cy='{cy}' r='{r}' {fill} stroke='currentColor' "
                     f"stroke-opacity='{0.7 if read else 0.3}'{dash} data-lane='{l}' data-src='{src}' "
                     f"data-read='{int(read)}'/>")
        g.append("</g>")
        b.extend(g)
    end = top + len(rounds) * dy
    b.append(_text(left, end + 24, "lane 0 now holds the whole warp's (mean, sigma2, count)", size=10))
    caption = ["Arrows: lane l takes lane l + offset's state and merges it (cuWelfordCombine). Filled: states "
               "that a later round reads;",
               "faint lines: merges nobody reads; dashed circles: l + offset is past the warp, so the "
               "shuffle returns the lane's own value.",
               f"The lane count is the recorded launch's blockDim.x ({warp}), the offsets the kernel's "
               f"loop from C10_WARP_SIZE >> 1 down to 1."]
    return _svg(name, W, end + 30, b, "compute_stats' shuffle-down tree: which lane each lane reads in each round",
                caption, _arrow_def(f"{name}-arrow"), data={"lanes": warp})


# ---- 3. compute_stats: the shared-memory rounds across warps -----------------------------------------
def lanes_smem_rounds(root: str = "") -> str:
    """One row per warp (its lane 0 acts), one column per phase: each round's writes, a barrier, the
    reads and combines, a barrier; then the broadcast. The buffer's floats come from the launch's
    dynamic shared memory."""
    name = "lanes_smem_rounds"
    launch = forward_launch(STATS_N)
    warps = launch.block[1]
    floats = launch.shared // 4  # s_data is float[]
    if floats != warps * 3 // 2:
        raise ValueError(f"{launch.shared} bytes of shared memory is not 1.5 x {warps} floats")
    rounds = smem_rounds(warps)
    left, top, cw, rowh, bh = 96, 96, 106, 34, 26
    ncols = 2 * len(rounds) + 1
    W = left + ncols * cw + 40  # the broadcast column is 24 wider
    b = [_text(10, 14, f"compute_stats: shared-memory rounds across the {warps} warps of a "
                       f"({launch.block[0]}, {warps}) block", size=12, weight="bold")]
    # the buffer: meansigmabuf = buf[0, warps), countbuf = buf[warps, 1.5 warps)
    bx0, bcw = left, 52
    b.append(_text(10, 38, f"s_data: {floats} floats = {launch.shared} B, the launch's dynamic shared memory",
                   size=10))
    g = [f"<g data-floats='{floats}' data-bytes='{launch.shared}'>"]
    for i in range(floats):
        slot, label = (i // 2, ("mean", "sigma2")[i % 2]) if i < warps else (i - warps, "count")
        g.append(_rect(bx0 + i * bcw, 46, bcw, 28, fill="currentColor", rx=0, stroke_opacity=0.5, opacity=0.07))
        g.append(_text(bx0 + i * bcw + bcw / 2, 58, f"buf[{i}]", "middle", size=9, dim=True))
        g.append(_text(bx0 + i * bcw + bcw / 2, 70, f"{label} {slot}", "middle", size=9, data={"buf": i}))
    g.append("</g>")
    b.extend(g)
    b.append(_text(bx0 + floats * bcw + 8, 58, f"meansigmabuf = buf[0 … {warps - 1}] (2 per slot)", size=9, dim=True))
    b.append(_text(bx0 + floats * bcw + 8, 70, f"countbuf = buf[{warps} … {floats - 1}] (1 per slot)", size=9,
                   dim=True))
    for w in range(warps):
        b.append(_text(left - 10, top + 22 + w * rowh + bh / 2 + 4, f"warp y = {w}", "end", size=10))
    col = 0
    bottom = top + 22 + warps * rowh
    for rd in rounds:
        o = rd["offset"]
        x = left + col * cw
        b.append(_text(x + cw, top + 8, f"offset {o}", "middle", size=11, weight="bold"))
        g = [f"<g data-offset='{o}' data-round='{rd['round']}'>"]
        for w, slot in rd["writers"]:
            yy = top + 22 + w * rowh
            g.append(_rect(x + 6, yy, cw - 12, bh, fill=_colour(w), data={"role": "write", "warp": w, "slot": slot}))
            g.append(_text(x + cw / 2, yy + 11, f"write slot {slot}", "middle", size=9.5))
            g.append(_text(x + cw / 2, yy + 22, f"buf[{2 * slot},{2 * slot + 1}], buf[{warps + slot}]", "middle",
                           size=9, dim=True))
        for w, slot in rd["combiners"]:
            yy = top + 22 + w * rowh
            src = slot + o
            g.append(_rect(x + cw + 6, yy, cw - 12, bh, fill=_colour(w),
                           data={"role": "combine", "warp": w, "slot": slot}))
            g.append(_text(x + cw + cw / 2, yy + 11, f"read slot {slot}", "middle", size=9.5))
            g.append(_text(x + cw + cw / 2, yy + 22, f"+= warp {src}", "middle", size=9, dim=True))
            ys = top + 22 + src * rowh + bh / 2
            g.append(_line(x + cw - 6, ys, x + cw + 6, yy + bh / 2, opacity=0.6, arrow=f"{name}-arrow"))
        g.append("</g>")
        b.extend(g)
        for k in (1, 2):  # the two barriers of the round
            b.append(_line(x + k * cw, top + 18, x + k * cw, bottom, opacity=0.45, dash=True))
        b.append(_text(x + cw, bottom + 12, "__syncthreads", "middle", size=9, dim=True))
        b.append(_text(x + 2 * cw, bottom + 12, "__syncthreads", "middle", size=9, dim=True))
        col += 2
    x, cw = left + col * cw, cw + 24
    b.append(_text(x + cw / 2, top + 8, "broadcast", "middle", size=11, weight="bold"))
    yy = top + 22
    b.append(_rect(x + 6, yy, cw - 12, bh, fill=_colour(0), data={"role": "broadcast", "warp": 0}))
    b.append(_text(x + cw / 2, yy + 11, "buf[0] = mean", "middle", size=9.5))
    b.append(_text(x + cw / 2, yy + 22, "buf[1] = sigma2 / N", "middle", size=9, dim=True))
    b.append(_text(x + cw / 2, yy + rowh + 22, "sync, then all", "middle", size=9, dim=True))
    b.append(_text(x + cw / 2, yy + rowh + 34, f"{launch.block[0] * warps} threads", "middle", size=9, dim=True))
    b.append(_text(x + cw / 2, yy + rowh + 46, "read buf[0], buf[1]", "middle", size=9, dim=True))
    caption = [f"Lane 0 of each warp holds its warp's state after the shuffle tree. Each round halves the live "
               f"warps: warps [offset, 2·offset) write slot y − offset, then warps [0, offset) read slot y and "
               f"merge it.",
               f"Warp count ({warps}) is the recorded launch's blockDim.y; the buffer size is its dynamic shared "
               f"memory ({launch.shared} B = {floats} floats = 1.5 × {warps})."]
    return _svg(name, W, bottom + 18, b, "compute_stats' shared-memory rounds across the block's warps", caption,
                _arrow_def(f"{name}-arrow"), data={"warps": warps})


# ---- 4. GammaBetaBackwardCUDAKernelTemplate: the tile over dY and X ------------------------------------
def tile_gamma_beta(root: str = "") -> str:
    """One panel per M: the tile of rows_per_block_y rows x block_dim_x columns that one block loads
    from dY and X per step, split into block_dim_y thread rows; beside it the tiles that
    blockIdx.y = 0 walks along M, the last one partly past M where it is checked."""
    name = "tile_gamma_beta"
    tiles = [gamma_beta_tile(M) for M in GAMMA_BETA_MS]
    pw, left, th, colw = 162, 10, 176, 3
    W = left + len(tiles) * pw + 4
    b, y = _heading(10, 16, "GammaBetaBackwardCUDAKernelTemplate<T, T_ACC, block_dim_x, block_dim_y, "
                            "rows_per_block_y, …>: one block's tile of dY and X", W - 20)
    for line in _wrap(f"Recorded launches of a layer_norm backward of M × {GAMMA_BETA_N} floats. Thread (x, y) "
                      f"loads dY and X at column 32·blockIdx.x + x of its thread row's rows.", W - 20, 10):
        b.append(_text(10, y, line, size=10, dim=True))
        y += 13
    hy = y + 8                  # panel headings
    top = hy + 48               # the tiles
    for k, t in enumerate(tiles):
        a = t["args"]
        bdx, bdy, rpb, rpt = a["block_dim_x"], a["block_dim_y"], a["rows_per_block_y"], t["rows_per_thread_y"]
        x0 = left + k * pw
        g = [f"<g data-m='{t['M']}' data-block-dim-x='{bdx}' data-block-dim-y='{bdy}' data-rows-per-block-y='{rpb}' "
             f"data-rows-per-thread-y='{rpt}' data-partial-reduction='{int(a['partial_reduction'])}' "
             f"data-aligned-grid='{int(a['aligned_grid'])}' data-grid='{','.join(map(str, t['grid']))}' "
             f"data-block='{','.join(map(str, t['block']))}' data-tiles='{len(t['tiles'])}'>"]
        g.append(_text(x0, hy, f"M = {t['M']}", size=12, weight="bold"))
        g.append(_text(x0, hy + 13, f"<{bdx}, {bdy}, {rpb}>", size=10))
        g.append(_text(x0, hy + 25, f"block ({','.join(map(str, t['block']))}) grid ({','.join(map(str, t['grid']))})",
                       size=9, dim=True))
        g.append(_text(x0, hy + 36, f"partial={str(a['partial_reduction']).lower()} "
                               f"aligned={str(a['aligned_grid']).lower()}", size=9, dim=True))
        tx, tw = x0 + 28, bdx * colw
        g.append(_text(tx, top - 2, "x=0", size=9, dim=True))
        g.append(_text(tx + tw, top - 2, str(bdx - 1), "end", size=9, dim=True))
        bh = th / bdy
        step = max(1, bdy // 4) if bh >= 11 else bdy
        labelled = {y for y in range(0, bdy, step) if bdy - 1 - y >= step} | {0, bdy - 1}
        for band in t["bands"]:
            y = band["y"]
            by_ = top + y * bh
            g.append(_rect(tx, by_, tw, bh, fill=_colour(y), rx=0, stroke_opacity=0.4 if bh >= 4 else 0.15,
                           data={"thread-y": y, "row-first": band["r0"], "row-last": band["r1"]}))
            if bh >= 20:
                g.append(_text(tx + tw / 2, by_ + bh / 2 + 3, f"rows {band['r0']}–{band['r1']}", "middle", size=9))
            if y in labelled:
                g.append(_text(tx - 3, by_ + min(bh, 12) / 2 + 3, f"y={y}", "end", size=9, dim=True))
        # the tiles along M for blockIdx.y = 0, scaled into the same height
        n = len(t["tiles"])
        mx, mw = tx + tw + 12, 16
        rows_drawn = n * rpb
        for tile in t["tiles"]:
            ty0 = top + tile["r0"] / rows_drawn * th
            tv = tile["valid"] / rows_drawn * th
            g.append(_rect(mx, ty0, mw, tv, fill=_colour(tile["tile"]) if tile["tile"] == 0 else "currentColor",
                           opacity=FILL_OPACITY if tile["tile"] == 0 else 0.14, rx=0, stroke_opacity=0.5,
                           data={"tile": tile["tile"], "row-first": tile["r0"], "row-last": tile["r1"],
                                 "rows-valid": tile["valid"], "check-y": tile["check_y"]}))
            if tile["valid"] < rpb:
                g.append(_rect(mx, ty0 + tv, mw, th * rpb / rows_drawn - tv, dash=True, rx=0, stroke_opacity=0.45))
        # the zoom from tile 0 to the detailed tile
        t0h = th * rpb / rows_drawn
        g.append(_line(tx + tw, top, mx, top, opacity=0.35, dash=True))
        g.append(_line(tx + tw, top + th, mx, top + t0h, opacity=0.35, dash=True))
        g.append(_text(mx + mw / 2, top - 2, "M", "middle", size=9, dim=True))
        last = t["tiles"][-1]
        g.append(_text(x0, top + th + 14, f"{rpt} rows per thread row", size=9))
        g.append(_text(x0, top + th + 26, f"{n} tile{'s' * (n > 1)} along M, step {rpb}", size=9))
        g.append(_text(x0, top + th + 38, (f"last: rows {last['r0']}–{t['M'] - 1} (check_y)" if last["check_y"]
                                           else "every tile full"), size=9, dim=True))
        g.append(_text(x0, top + th + 50, ("each thread writes directly" if t["block"][1] == 1 == t["grid"][1]
                                           else "partial sums per thread row") if a["partial_reduction"] else
                       "smem transpose + XOR tree", size=9, dim=True))
        g.append("</g>")
        b.extend(g)
    h = top + th + 56
    caption = ["Left of each panel: the block's tile at M_start = 0, one band per thread row (threadIdx.y), "
               "32 columns (threadIdx.x); right: the tiles the block walks down M.",
               "Tile shape, grid and block are the template arguments and dims of the host mirror's recorded "
               "launch for that M; dashed: rows past M."]
    return _svg(name, W, h, b, "GammaBeta backward: the tile of dY and X that one block covers, for several M",
                caption)


# ---- 5. the ladder's CUDA backward: which holder walks which rows, and the two launches ---------------
def backward_walk(M: int = BACKWARD_M, N: int = BACKWARD_N, sms: int = BACKWARD_SMS) -> dict:
    """The launches reimpl.ladder.backward.run records for `row_held` on M float32 rows of N (a block
    plan: a block holds a row) on a device of `sms` SMs that keep one block each, and the rows each
    holder walks: ln_row_held_backward's loop, row = g, g + G, ... with G the holders in the grid."""
    from ..checks.plan import ladder_backward_launches
    from ..ladder import backward
    main, sums = ladder_backward_launches("row_held", M, N, sms, 1)
    plan = backward.back_plan(N, 4)
    if plan.lanes or plan.cluster > 1:
        raise ValueError(f"rows of {N} floats are not held by one block: {plan}")
    G = main.grid[0]
    return {"M": M, "N": N, "main": main, "sums": sums, "holders": G,
            "rows": {h: list(range(h, M, G)) for h in range(G)}}


def backward_holders(root: str = "") -> str:
    """The CUDA backward on a toy device: each row of x and dy coloured by the holder (a block here)
    that walks it, the holders' partial rows, and the column sum that adds them."""
    name = "backward_holders"
    wk = backward_walk()
    M, G, main, sums = wk["M"], wk["holders"], wk["main"], wk["sums"]
    W, left, bw, rh = 720, 60, 300, 17
    b, y = _heading(10, 16, f"ln_row_held_backward then column_sums: {M} rows of {wk['N']} floats, "
                            f"{G} SMs keeping one block each", W - 20)
    top = y + 6
    b.append(_text(left, top - 2, "x, dy: one row at a time per holder; dx written as the row is done",
                   size=9, dim=True))
    owner = {r: h for h, rows in wk["rows"].items() for r in rows}
    for r in range(M):
        ry = top + 4 + r * (rh + 3)
        h = owner[r]
        b.append(_text(left - 6, ry + rh - 5, f"row {r}", "end", size=10))
        b.append(_rect(left, ry, bw, rh, fill=_colour(h), data={"row": r, "holder": h}))
        b.append(_text(left + bw / 2, ry + rh - 5, f"block {h}, step {wk['rows'][h].index(r) + 1}", "middle",
                       size=9))
    # each holder's running sums, then its partial row
    hx, hw = left + bw + 40, 290
    for h in range(G):
        hy = top + 4 + h * 46
        rows = wk["rows"][h]
        b.append(_rect(hx, hy, hw, 38, fill=_colour(h), data={"partial": h, "rows": ",".join(map(str, rows))}))
        b.append(_text(hx + 6, hy + 15, f"block {h}: rows {', '.join(map(str, rows))}", size=10))
        b.append(_text(hx + 6, hy + 30, "dgamma, dbeta kept in registers", size=9, dim=True))
        for r in rows:
            ry = top + 4 + r * (rh + 3) + rh / 2
            b.append(_line(left + bw, ry, hx, hy + 19, opacity=0.3))
    py = top + 4 + G * 46 + 8
    b.append(_text(hx, py + 6, f"part: {G} rows of {wk['N']} (one a block), float32", size=10))
    sy = py + 24
    b.append(_line(hx + hw / 2, py + 10, hx + hw / 2, sy + 2, opacity=0.7, arrow=f"{name}-arrow"))
    gx, gy = sums.grid[0], sums.grid[1]
    b.append(_rect(hx, sy + 4, hw, 38, fill=PALETTE[0], opacity=0.15,
                   data={"sums-grid": f"{gx},{gy}", "sums-block": ",".join(map(str, sums.block[:2]))}))
    b.append(_text(hx + 6, sy + 19, f"column_sums: grid ({gx}, {gy}), block (32, 32)", size=10))
    b.append(_text(hx + 6, sy + 34, f"column j adds part[0..{G - 1}][j] in order", size=9, dim=True))
    h_ = max(top + 4 + M * (rh + 3), sy + 46) + 4
    caption = [f"The first launch has {main.grid[0]} blocks of {main.block[0]} threads, as many as stay resident "
               f"(here one an SM); block r takes rows r, r + {G}, r + {2 * G}, ..., one a step. Each block keeps its columns' "
               "dgamma and dbeta from row to row and writes them once, as its partial row.",
               "Drawn from the launches the launcher records on the CPU (a RecordingRuntime told the device has "
               f"{BACKWARD_SMS} SMs); on an H100 the same rule gives 132 or more holders."]
    return _svg(name, W, h_, b, "The CUDA backward: rows walked by each resident block, partial rows, column sums",
                caption, defs=_arrow_def(f"{name}-arrow"), data={"holders": G, "rows": M})


THREAD_DIAGRAMS = {"lanes_vectorized": lanes_vectorized, "lanes_shfl_down": lanes_shfl_down,
                   "lanes_smem_rounds": lanes_smem_rounds, "tile_gamma_beta": tile_gamma_beta,
                   "backward_holders": backward_holders}
