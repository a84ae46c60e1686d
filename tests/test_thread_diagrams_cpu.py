"""CPU: the "where each thread works" diagrams (reimpl/docsite/thread_diagrams.py) are well-formed SVG
and say what the launches and the kernels do. Every number is read back from the SVG's data-*
attributes and compared with launches recorded here from the host mirror, and with the emulator's
step traces of the same inputs (which tests/test_trace_gpu.py compares with the GPU's, record by
record): which thread loads which element, which lane each shuffle reads, which warp writes and
reads which shared slot, and how many tiles a GammaBeta block walks."""
from __future__ import annotations

import functools
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from reimpl.checks.cases import Case
from reimpl.checks.cases_backward import BackwardCase
from reimpl.checks.plan import host_launches
from reimpl.docsite import thread_diagrams as td
from reimpl.docsite.diagrams import DIAGRAMS
from reimpl.docsite.trace_collect import emulate
from reimpl.mirror import layer_norm_kernel as host

SVG = "{http://www.w3.org/2000/svg}"
NAMES = ("lanes_vectorized", "lanes_shfl_down", "lanes_smem_rounds", "tile_gamma_beta")


@functools.lru_cache(maxsize=None)
def _svg(name: str) -> ET.Element:
    return ET.fromstring(DIAGRAMS[name]("../"))


def _launch(case, prefix: str):
    found = [l for l in host_launches(case) if l.kernel.startswith(prefix + "<")]
    assert len(found) == 1, [l.kernel for l in host_launches(case)]
    return found[0]


def _steps(case, kind: str, block: int = 0, kernel: str | None = None):
    return [s for s in emulate(case).trace.steps
            if s.kind == kind and s.block == block and (kernel is None or s.kernel.startswith(kernel))]


def _with(root: ET.Element, attr: str) -> list[ET.Element]:
    return [e for e in root.iter() if attr in e.attrib]


@pytest.mark.parametrize("name", NAMES)
def test_each_diagram_is_registered_well_formed_svg_with_title_and_caption(name):
    root = _svg(name)
    assert root.tag == SVG + "svg" and root.get("data-diagram") == name
    assert (root.find(SVG + "title").text or "").strip()
    assert _with(root, "data-caption"), "no visible caption"
    # colours that read in both palettes: text in currentColor, fills translucent
    for e in root.iter(SVG + "text"):
        assert e.get("fill") == "currentColor"
    for e in root.iter():
        if e.get("fill", "none").startswith("#"):
            assert float(e.get("fill-opacity", "1")) < 1, ET.tostring(e)[:120]


# ---- 1. the vectorized kernel's element -> thread mapping ----------------------------------------------
@pytest.mark.parametrize("N", td.FORWARD_NS)
def test_vectorized_lanes_follow_the_launch_and_the_kernels_loop(N):
    case = Case("layer_norm", "fp32", (1, N))
    launch = _launch(case, "vectorized_layer_norm_kernel")
    bx, by, _ = launch.block
    numx, vs = bx * by, host.vec_size
    panel = next(g for g in _with(_svg("lanes_vectorized"), "data-n") if g.get("data-n") == str(N))
    assert panel.get("data-block") == ",".join(map(str, launch.block))
    assert int(panel.get("data-vectors")) == N // vs
    assert int(panel.get("data-iterations")) == -(-(N // vs) // numx)

    # element -> (thread, iteration) as drawn: every element in exactly one run
    drawn = {}
    for r in _with(panel, "data-thread-first"):
        t0, t1 = int(r.get("data-thread-first")), int(r.get("data-thread-last"))
        e0, e1 = int(r.get("data-element-first")), int(r.get("data-element-last"))
        it, y = int(r.get("data-iter")), int(r.get("data-y"))
        assert t0 // bx == t1 // bx == y and e1 - e0 + 1 == (t1 - t0 + 1) * vs
        for e in range(e0, e1 + 1):
            assert e not in drawn
            drawn[e] = (t0 + (e - e0) // vs, it)
    assert sorted(drawn) == list(range(N))
    # the formula of the brief, with the block from the launch
    assert all(drawn[e] == ((e // vs) % numx, (e // vs) // numx) for e in range(N))
    # and what the kernel did: compute_stats' `online` steps, aux = element, index = it * vec_size + ii
    traced = {}
    for s in _steps(case, "online"):
        for t in np.flatnonzero(s.active):
            traced[int(s.aux[t])] = (int(t), s.index // vs)
    assert traced == drawn
    # idle threads as drawn are those with no vector that iteration
    for r in _with(panel, "data-idle-first"):
        it = int(r.get("data-iter"))
        for t in range(int(r.get("data-idle-first")), int(r.get("data-idle-last")) + 1):
            assert it * numx + t >= N // vs
    # the vectors spelled out: (x, y, iteration) of their thread
    vectors = _with(panel, "data-vector")
    assert vectors
    for v in vectors:
        i = int(v.get("data-vector"))
        t, it = traced[i * vs]
        assert (int(v.get("data-x")), int(v.get("data-y")), int(v.get("data-iter"))) == (t % bx, t // bx, it)
        assert int(v.get("data-element-first")) == i * vs


# ---- 2. the shuffle-down tree ----------------------------------------------------------------------------
def test_shuffle_tree_pairs_lanes_as_the_kernel_does():
    case = Case("layer_norm", "fp32", (1, td.STATS_N))
    warp = _launch(case, "vectorized_layer_norm_kernel").block[0]
    root = _svg("lanes_shfl_down")
    assert int(root.get("data-lanes")) == warp
    rounds = sorted(_with(root, "data-offset"), key=lambda g: int(g.get("data-round")))
    assert [int(g.get("data-offset")) for g in rounds] == [16, 8, 4, 2, 1]
    steps = _steps(case, "shfl_down")
    assert [s.index for s in steps] == [int(g.get("data-round")) for g in rounds]
    for g, s in zip(rounds, steps):
        lanes = {int(c.get("data-lane")): c for c in _with(g, "data-lane")}
        assert sorted(lanes) == list(range(warp))
        offset = int(g.get("data-offset"))
        for l, c in lanes.items():
            assert int(c.get("data-src")) == int(s.aux[l])  # the partner lane warp 0's lane l read
            assert c.get("data-read") == str(int(l < offset))


# ---- 3. the shared-memory rounds ------------------------------------------------------------------------
def test_smem_rounds_follow_the_block_and_the_kernel():
    case = Case("layer_norm", "fp32", (1, td.STATS_N))
    launch = _launch(case, "vectorized_layer_norm_kernel")
    bx, warps, _ = launch.block
    root = _svg("lanes_smem_rounds")
    assert int(root.get("data-warps")) == warps
    buf = _with(root, "data-floats")[0]
    assert int(buf.get("data-bytes")) == launch.shared and int(buf.get("data-floats")) * 4 == launch.shared
    assert len(_with(buf, "data-buf")) == warps * 3 // 2
    drawn = {(int(g.get("data-round")), c.get("data-role"), int(c.get("data-warp")), int(c.get("data-slot")))
             for g in _with(root, "data-round") for c in _with(g, "data-role")}
    traced = {(s.index, {"smem_write": "write", "smem_combine": "combine"}[s.kind], int(t) // bx, int(s.aux[t]))
              for kind in ("smem_write", "smem_combine") for s in _steps(case, kind)
              for t in np.flatnonzero(s.active)}
    assert drawn == traced
    assert len({r for r, *_ in drawn}) == int(np.log2(warps))
    assert {(g.get("data-role"), g.get("data-warp")) for g in _with(root, "data-role")
            if g.get("data-role") == "broadcast"} == {("broadcast", "0")}


# ---- 4. the GammaBeta tile --------------------------------------------------------------------------------
GB_PARAMS = ("T", "T_ACC", "block_dim_x", "block_dim_y", "rows_per_block_y", "partial_reduction", "aligned_grid",
             "rms_norm")


def _targs(kernel: str) -> dict:
    args = [a.strip() for a in kernel[kernel.index("<") + 1:-1].split(",")]
    conv = [a == "true" if a in ("true", "false") else int(a[:-1]) if a.endswith("u") else a for a in args]
    return dict(zip(GB_PARAMS, conv, strict=True))


@pytest.mark.parametrize("M", td.GAMMA_BETA_MS)
def test_gamma_beta_tile_is_the_recorded_launchs(M):
    N = td.GAMMA_BETA_N
    case = BackwardCase("layer_norm", "fp32", (M, N))
    launch = _launch(case, "GammaBetaBackwardCUDAKernelTemplate")
    a = _targs(launch.kernel)
    panel = next(g for g in _with(_svg("tile_gamma_beta"), "data-m") if g.get("data-m") == str(M))
    assert int(panel.get("data-block-dim-x")) == a["block_dim_x"] == launch.block[0]
    assert int(panel.get("data-block-dim-y")) == a["block_dim_y"] == launch.block[1]
    assert int(panel.get("data-rows-per-block-y")) == a["rows_per_block_y"]
    assert panel.get("data-partial-reduction") == str(int(a["partial_reduction"]))
    assert panel.get("data-aligned-grid") == str(int(a["aligned_grid"]))
    assert panel.get("data-grid") == ",".join(map(str, launch.grid))
    assert panel.get("data-block") == ",".join(map(str, launch.block))
    rpt = a["rows_per_block_y"] // a["block_dim_y"]
    assert int(panel.get("data-rows-per-thread-y")) == rpt
    bands = _with(panel, "data-thread-y")
    assert [(int(b.get("data-row-first")), int(b.get("data-row-last"))) for b in bands] == \
        [(y * rpt, y * rpt + rpt - 1) for y in range(a["block_dim_y"])]
    tiles = _with(panel, "data-tile")
    assert int(panel.get("data-tiles")) == len(tiles) == -(-M // a["rows_per_block_y"])
    for k, t in enumerate(tiles):
        r0 = k * a["rows_per_block_y"]
        assert int(t.get("data-row-first")) == r0
        assert int(t.get("data-rows-valid")) == min(M, r0 + a["rows_per_block_y"]) - r0
        assert t.get("data-check-y") == str(int(r0 + a["rows_per_block_y"] > M))
    if N % a["block_dim_x"] == 0:  # then aligned_grid is exactly "no tile needs row checks"
        assert a["aligned_grid"] == (not any(t.get("data-check-y") == "1" for t in tiles))


@pytest.mark.parametrize("M", (32, 100, 200))
def test_gamma_beta_tiles_walked_match_the_emulated_kernel(M):
    """gb_sums is recorded once per tile the block's grid-stride loop visits (index = that tile)."""
    case = BackwardCase("layer_norm", "fp32", (M, td.GAMMA_BETA_N))
    steps = _steps(case, "gb_sums", kernel="GammaBetaBackwardCUDAKernelTemplate")
    panel = next(g for g in _with(_svg("tile_gamma_beta"), "data-m") if g.get("data-m") == str(M))
    assert [s.index for s in steps] == [int(t.get("data-tile")) for t in _with(panel, "data-tile")]
    bx = int(panel.get("data-block-dim-x"))
    assert all(int(s.aux[t]) == t % bx for s in steps for t in np.flatnonzero(s.active))  # column of block 0


def test_diagrams_derive_from_the_launch_not_from_typed_numbers(monkeypatch):
    """A different vec_size in the host mirror changes the drawn mapping (the diagram reads it)."""
    lay = td.vector_layout(1000)
    monkeypatch.setattr(host, "vec_size", 8)
    lay8 = td.vector_layout(1000)
    assert lay["vec_size"] == 4 and lay8["vec_size"] == 8 and lay8["n_vec"] == 125 != lay["n_vec"]
