"""Measured numbers that the prose of a page states, checked against the committed results they come
from, so that a page cannot keep a number the data no longer gives.

Each row of PHRASES is (page, phrase, value): `value()` reads results/ and returns what fills the
phrase's `{}` fields, formatted as the page prints it; the filled phrase must occur in the page's
text (whitespace collapsed). To state a new number in prose, add a row here; a number that needs no
row belongs in a table rendered from results/ instead."""
from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

from reimpl.checks import grid
from reimpl.ladder import launch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


@cache
def load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


@cache
def page(name: str) -> str:
    return " ".join((ROOT / "docs" / name).read_text().split())


def pct(x: float) -> str:
    return f"{x:.0f}"


def span(values, unit: str = "%") -> str:
    """A range as the pages print it: "46–78%", or "78%" when both ends round alike."""
    lo, hi = pct(min(values)), pct(max(values))
    return (lo if lo == hi else f"{lo}–{hi}") + unit


# ---------------------------------------------------------------- results/fast_bench.json and fast_grad_bench.json

def bench(name: str, method: str | None = None, kernels: tuple[str, ...] = (), **shape) -> list[dict]:
    return [r for r in load(name)["rows"]
            if (method is None or r["method"] == method) and (not kernels or r["kernel"] in kernels)
            and all(r[k] == v for k, v in shape.items())]


def fwd(method=None, kernels=(), **shape):
    return [r["pct_copy"] for r in bench("fast_bench.json", method, kernels, **shape)]


def grad(method=None, kernels=(), **shape):
    return [r["pct_copy"] for r in bench("fast_grad_bench.json", method, kernels, **shape)]


FAST = ("fast_layer_norm", "fast_rms_norm")
TORCH = ("torch_layer_norm", "torch_rms_norm")
FAST_DX = ("fast_layer_norm_dx", "fast_rms_norm_dx")
TORCH_DX = ("torch_layer_norm_dx", "torch_rms_norm_dx")
SMALL = dict(dtype="fp32", M=4096, N=1024)


def faster_everywhere(name: str, ours: tuple[str, ...], theirs: tuple[str, ...]) -> int:
    """How many cells (method, shape, op) there are; fails unless ours beats torch's in each."""
    rows = load(name)["rows"]
    cell = {(r["method"], r["dtype"], r["M"], r["N"], r["kernel"]): r["pct_copy"] for r in rows}
    pairs = [(k, k[:4] + (theirs[ours.index(k[4])],)) for k in cell if k[4] in ours]
    slower = [k for k, t in pairs if cell[k] <= cell[t]]
    assert not slower, f"not faster than torch: {slower}"
    return len(pairs)


def hardest_forward() -> tuple[str, str]:
    lo = min(bench("fast_bench.json", "pipelined", FAST), key=lambda r: r["pct_copy"])
    assert (lo["dtype"], lo["M"], lo["N"], lo["kernel"]) == ("bf16", 4096, 1024, "fast_layer_norm")
    rms = fwd("pipelined", ("fast_rms_norm",), dtype="bf16", M=4096, N=1024)
    return pct(lo["pct_copy"]), pct(rms[0])


def dx_pipelined_rest() -> tuple[int, str]:
    rest = [r["pct_copy"] for r in bench("fast_grad_bench.json", "pipelined", FAST_DX)
            if (r["dtype"], r["M"], r["N"]) != ("fp32", 4096, 1024)]
    return len(rest), span(rest)


def copy_gbps(method: str) -> str:
    return pct(bench("fast_grad_bench.json", method, ("copy",), **SMALL)[0]["gbps"])


def dx_gbps(method: str) -> str:
    return pct(bench("fast_grad_bench.json", method, ("fast_layer_norm_dx",), **SMALL)[0]["gbps"])


# ---------------------------------------------------------------- results/ncu_fast_*.json

def ncu(what: str, kernel: str, **shape) -> list[dict]:
    return [c for c in load(f"ncu_fast_{what}.json")["cases"]
            if c["kernel"] == kernel and all(c[k] == v for k, v in shape.items())]


def ncu_one(what: str, kernel: str, field: str, **shape):
    (c,) = ncu(what, kernel, **shape)
    return c[field]


def ncu_span(what: str, kernel: str, field: str, unit: str = "", keep=lambda c: True) -> str:
    return span([c[field] for c in ncu(what, kernel) if keep(c)], unit)


def mb(x: float) -> str:
    return f"{x / 1e6:.1f}"


def long_rows(c: dict) -> bool:
    return c["N"] >= 4096


def not_single_wave(c: dict) -> bool:
    return (c["M"], c["N"]) != (4096, 1024)


# ---------------------------------------------------------------- results/fast_experiments.json and fast_rows_sweep.json

def variant(prefix: str) -> dict:
    (v,) = [v for v in load("fast_experiments.json")["variants"] if v["name"].startswith(prefix)]
    return v


def profiler_us() -> tuple[str, ...]:
    """The torch.profiler note: copy, LayerNorm two rows, four rows, RMSNorm, torch's LayerNorm, and
    the pipelined figures' offset, in that order."""
    note = variant("torch.profiler device time per call")["note"]
    return tuple(re.findall(r"(\d+(?:\.\d+)?) us", note))


def four_rows_band() -> tuple[int, int, str]:
    """LayerNorm cells where four rows a warp beat two, of the band's cells; the same for RMSNorm."""
    d = load("fast_rows_sweep.json")
    cell = {(r["dtype"], r["M"], r["kernel"]): r["pct_copy"] for r in d["rows"]}
    band = [(dt, M) for dt, M, k in cell if k == "copy" and 16 <= M / d["sms"] <= 48]

    def ahead(op):
        return sum(cell[(dt, M, f"{op} rows=4")] > cell[(dt, M, f"{op} rows=2")] for dt, M in band)

    rms = ahead("rms_norm")
    return ahead("layer_norm"), len(band), (f"all {rms}" if rms == len(band) else f"{rms} of {len(band)}")


def rows_outside_band() -> tuple:
    """Outside the four-row band each choice is ahead at some M, for each op (the page: "neither
    choice wins throughout")."""
    d = load("fast_rows_sweep.json")
    cell = {(r["dtype"], r["M"], r["kernel"]): r["pct_copy"] for r in d["rows"]}
    outside = [(dt, M) for dt, M, k in cell if k == "copy" and not 16 <= M / d["sms"] <= 48]
    for op in ("layer_norm", "rms_norm"):
        four = [cell[(dt, M, f"{op} rows=4")] > cell[(dt, M, f"{op} rows=2")] for dt, M in outside]
        assert any(four) and not all(four), op
    return ()


def _knobs(part: str) -> dict:
    from reimpl.docsite import forward_probe_tables as P
    return P.cells(load("fast_forward_probe.json"), part)


def _behind(c: dict, kernel: str) -> float:
    """Points of copy `kernel` is behind the best variant of a probe cell."""
    return max(v for k, v in c.items() if k not in ("torch", "copy")) - c[kernel]


def stream_knobs() -> tuple:
    from reimpl.fast import forward as F
    chosen = f"stream_U{F.STREAM_CHUNK}_B{F.STREAM_BLOCKS}"
    behind = [_behind(c, chosen) for c in _knobs("stream").values()]
    return (sum(b == 0 for b in behind), len(behind), sum(b <= 2 for b in behind), pct(max(behind)))


def group_knobs() -> tuple:
    from reimpl.fast import forward as F
    chosen = f"group_K{F.GROUP_SETS}"
    cells = _knobs("group")
    assert all(_behind(c, chosen) == 0 for (dt, op, *_), c in cells.items() if dt != "fp32" and op == "layer_norm")
    return (f"{max(_behind(c, chosen) for (dt, op, *_), c in cells.items() if dt == 'fp32' or op != 'layer_norm'):.1f}",)


def ln_10240_loss() -> tuple:
    """The register kernel's lead over the stream kernel the rule takes for LayerNorm at N = 10240."""
    from reimpl.fast import forward as F
    chosen = f"stream_U{F.STREAM_CHUNK}_B{F.STREAM_BLOCKS}"
    losses = {pct(c["fast_plan"] - c[chosen]) for (dt, op, M, N), c in _knobs("route").items()
              if op == "layer_norm" and N == 10240}
    (loss,) = losses
    return (loss,)


def two_rows_in_turn() -> tuple:
    v = variant("a warp's two rows one after the other")
    kept, tried = v["kept"], v["pct_copy"]
    assert tried["bf16 65536x768"] < kept["bf16 65536x768"] and tried["bf16 4096x2048"] < kept["bf16 4096x2048"]
    return pct(kept["bf16 4096x1024"]), pct(tried["bf16 4096x1024"])


def one_barrier_gains() -> tuple:
    """block_sums against torch's five barriers: the gains on rows of 512 and 1024 elements, and on
    fp32 8192 x 16384 (the experiment's note puts every other cell within a point)."""
    p = variant("dX: torch's two BlockReduceSum")["pct_copy"]
    gains = {k.removesuffix(" one barrier (kept)"): v - p[k.replace("one barrier (kept)", "five barriers")]
             for k, v in p.items() if k.endswith("one barrier (kept)")}
    short = [g for k, g in gains.items() if "x512 " in k or "x1024 " in k]
    assert all(g > 0 for g in gains.values())
    return pct(min(short)), pct(max(short)), pct(gains["fp32 8192x16384 LN"])


def dx_proof_counts() -> tuple:
    d = load("gpu_suite_backward.json")
    groups = [g for g in d["parity_groups"] if g.startswith("bwd_fast_") and g not in ("bwd_fast_plans", "bwd_fast_sweep")]
    cases = sum(d["parity_groups"][g]["cases"] for g in groups)
    assert all(d["parity_groups"][g]["mismatched_elements"] == 0 for g in d["parity_groups"] if g.startswith("bwd_fast_"))
    return (len(groups), f"{cases:,}", d["parity_groups"]["bwd_fast_plans"]["cases"],
            d["parity_groups"]["bwd_fast_sweep"]["cases"], d["device"].removeprefix("NVIDIA "),
            f"{d['counters']['bwd_fast_grad_kernel_cases']:,}")


def methods_agree() -> tuple:
    """Pipelined and flushed within 2.5 points on every fast_bench cell but the 4096 x 1024 ones."""
    rows = load("fast_bench.json")["rows"]
    cell = {(r["method"], r["dtype"], r["M"], r["N"], r["kernel"]): r["pct_copy"] for r in rows}
    for (m, dt, M, N, k), v in cell.items():
        if m == "pipelined" and (M, N) != (4096, 1024):
            assert abs(v - cell[("flushed", dt, M, N, k)]) <= 2.5, (dt, M, N, k)
    return ()


FAST_MD = "ladder/fast.md"
PHRASES = [
    (FAST_MD, "gives the bits, runs at {} of copy bandwidth",
     lambda: (span(fwd("pipelined", ("torch_layer_norm",))),)),
    (FAST_MD, "On fp32 8192 × 16384 LayerNorm this took the kernel from {}% to {}% of copy",
     lambda: (pct(variant("row loads with L1::no_allocate")["kept"]["fp32 8192x16384"]),
              pct(variant("row loads with L1::no_allocate")["pct_copy"]["fp32 8192x16384"]))),
    (FAST_MD, "bf16 at N = 16384 runs in {} registers",
     lambda: (ncu_one("forward", "reimpl.fast", "registers", dtype="bf16", N=16384),)),
    (FAST_MD, "measured it ahead in {} of {} LayerNorm cells and {} RMSNorm cells", four_rows_band),
    (FAST_MD, "Outside the band neither choice wins throughout: each is ahead at some M", rows_outside_band),
    (FAST_MD, "Outside it the two choices trade places from one M to the next", rows_outside_band),
    (FAST_MD, "the best on {} of the {} rows, within two points of the best on {}, and at most {} points behind it.",
     stream_knobs),
    (FAST_MD, "it is the best on every 16-bit LayerNorm row, and elsewhere at most {} points behind the best.",
     group_knobs),
    (FAST_MD, "and LayerNorm at N = 10240 about {} (the table above)", ln_10240_loss),
    (FAST_MD, "It gained a little on the single-wave bf16 4096 × 1024 (LayerNorm {}% to {}% of copy) and lost on "
              "bf16 65536 × 768 and bf16 4096 × 2048.", two_rows_in_turn),
    (FAST_MD, "It gained {} to {} points on the rows of 512 and 1024 elements, {} on fp32 8192 × 16384, and elsewhere "
              "moved by about a point either way", one_barrier_gains),
    (FAST_MD, "{} groups, {} cases, with dgamma and dbeta compared too. It adds {} cases at every edge of the plan",
     lambda: dx_proof_counts()[:3]),
    (FAST_MD, "a sweep of {} cases with more than 100,000 rows", lambda: (dx_proof_counts()[3],)),
    (FAST_MD, "On the {}, {} of these cases launched our dX kernel", lambda: dx_proof_counts()[4:]),
    (FAST_MD, "On the large shapes the two methods agree.", methods_agree),
    (FAST_MD, "An fp32 row of 32 vectors a thread takes {} registers",
     lambda: (ncu_one("forward", "reimpl.fast", "registers", dtype="fp32", N=16384),)),
    (FAST_MD, "The copy (a `cudaMemcpy`) takes {} µs. Our LayerNorm takes {} µs with two rows a warp and "
              "{} µs with four, and our RMSNorm {} µs. Torch's LayerNorm takes {} µs. The benchmark's "
              "pipelined figures are about {} µs higher", profiler_us),
    (FAST_MD, "Pipelined, all twenty cells run at {} of copy; flushed, at {}.",
     lambda: (span(fwd("pipelined", FAST)), span(fwd("flushed", FAST)))),
    (FAST_MD, "The hardest one is bf16 4096 × 1024 LayerNorm, at {}% pipelined (RMSNorm {}%)", hardest_forward),
    (FAST_MD, "Every shape is faster than torch's kernel, under both methods. Torch's LayerNorm runs at {} "
              "of copy pipelined and {} flushed.",
     lambda: (faster_everywhere("fast_bench.json", FAST, TORCH) and
              span(fwd("pipelined", ("torch_layer_norm",))), span(fwd("flushed", ("torch_layer_norm",))))),
    (FAST_MD, "Torch's kernel executes {} thread instructions per element and is issue-bound on short rows "
              "(bf16 65536 × 768: issue slots {}% busy, DRAM {}%). Ours executes {}, with DRAM {} busy "
              "everywhere except the single-wave 4096 × 1024 shapes.",
     lambda: (ncu_span("forward", "torch", "thread_instructions_per_element"),
              pct(ncu_one("forward", "torch", "issue_active_pct", dtype="bf16", M=65536)),
              pct(ncu_one("forward", "torch", "dram_throughput_pct_of_peak", dtype="bf16", M=65536)),
              ncu_span("forward", "reimpl.fast", "thread_instructions_per_element"),
              ncu_span("forward", "reimpl.fast", "dram_throughput_pct_of_peak", "%", not_single_wave))),
    (FAST_MD, "Ours is faster than torch's kernel in all {} cells",
     lambda: (faster_everywhere("fast_grad_bench.json", FAST_DX, TORCH_DX),)),
    (FAST_MD, "Flushed, all 20 run at {} of copy. Pipelined, {} run at {}. The exception is fp32 4096 × 1024: "
              "{}% for LayerNorm and {}% for RMSNorm, against torch's {}. Torch's kernel runs at {}.",
     lambda: (span(grad("flushed", FAST_DX)), *dx_pipelined_rest(),
              pct(grad("pipelined", ("fast_layer_norm_dx",), **SMALL)[0]),
              pct(grad("pipelined", ("fast_rms_norm_dx",), **SMALL)[0]),
              span(grad("pipelined", TORCH_DX, **SMALL)), span(grad(None, TORCH_DX)))),
    (FAST_MD, "so the copy runs at {} GB/s pipelined against {} GB/s flushed",
     lambda: (copy_gbps("pipelined"), copy_gbps("flushed"))),
    (FAST_MD, "In that state the copy reads {} MB of its 16.8 MB from DRAM, and our dX reads {} MB of its",
     lambda: (mb(ncu_one("l2", "copy", "dram_read_bytes", **SMALL)),
              mb(ncu_one("l2", "reimpl.fast", "dram_read_bytes", **SMALL)))),
    (FAST_MD, "dX itself moves {} GB/s pipelined and {} GB/s flushed. When neither finds anything in the L2 "
              "(flushed), dX runs at {}% of copy and torch at {}%.",
     lambda: (dx_gbps("pipelined"), dx_gbps("flushed"),
              pct(grad("flushed", ("fast_layer_norm_dx",), **SMALL)[0]),
              pct(grad("flushed", ("torch_layer_norm_dx",), **SMALL)[0]))),
    (FAST_MD, "executes {} thread instructions per element, ours {}. On the long rows",
     lambda: (ncu_span("grad", "torch", "thread_instructions_per_element"),
              ncu_span("grad", "reimpl.fast", "thread_instructions_per_element"))),
    (FAST_MD, "{} MB for fp32 16384 × 4096, against our {} MB",
     lambda: (f"{ncu_one('grad', 'torch', 'dram_read_bytes', dtype='fp32', N=4096) / 1e6:,.0f}",
              f"{ncu_one('grad', 'reimpl.fast', 'dram_read_bytes', dtype='fp32', N=4096) / 1e6:,.0f}")),
    (FAST_MD, "Ours holds the row in up to {} registers a thread, so its occupancy is low on rows of 4096 and "
              "longer ({}). That costs little: each thread issues all its loads before the first use, and "
              "DRAM stays {} busy on those shapes.",
     lambda: (max(c["registers"] for c in ncu("grad", "reimpl.fast")),
              ncu_span("grad", "reimpl.fast", "achieved_occupancy_pct", "%", long_rows),
              ncu_span("grad", "reimpl.fast", "dram_throughput_pct_of_peak", "%", long_rows))),
    ("ladder/index.md", "(bf16 65536 × 768: issue slots {}% busy, DRAM {}%): the kernel is bound by instructions",
     lambda: (pct(ncu_one("forward", "torch", "issue_active_pct", dtype="bf16", M=65536)),
              pct(ncu_one("forward", "torch", "dram_throughput_pct_of_peak", dtype="bf16", M=65536)))),
]


# ---------------------------------------------------------------- other committed files, for the guide pages

REFERENCE = ROOT / "reference"


def ftz_fails_only_subnormal() -> tuple:
    """The planted flush-to-zero kernel: some cases equal torch's, and every failing case has subnormal input."""
    rows = [r for r in load("judge_planted.json")["rows"] if r["planted"] == "ftz"]
    assert rows and all(r["cases_equal"] > 0 and r["failed"] for r in rows)
    assert all("subnormal" in f["case"] for r in rows for f in r["failed"])
    return ()


def numerics_row_length() -> tuple[int]:
    m, n = load("numerics_example.json")["shape"]
    assert m == 1
    return (n,)


@cache
def gdb() -> str:
    return (RESULTS / "cuda_gdb_session.txt").read_text()


def gdb_state(n: int) -> tuple[str, str, str]:
    """mean, sigma2 and count of the transcript's `$n = {mean = ..., sigma2 = ..., count = ...}`."""
    (m,) = re.findall(rf"\${n} = \{{mean = (\S+), sigma2 = (\S+), count = (\d+)\}}$", gdb(), re.M)
    return m


def gdb_value(n: int) -> str:
    """The value of the transcript's `$n = value` (a scalar)."""
    (v,) = re.findall(rf"^\${n} = (-?\d+)$", gdb(), re.M)
    return v


def gdb_local(name: str) -> str:
    (v,) = re.findall(rf"^{name} = (\S+)$", gdb(), re.M)
    return v


def naive_slowest() -> tuple:
    """The textbook rung takes more than twice any other rung's time on every cell it was timed on with
    rows of N or more, and block_vec is slower than it on the rows of 64."""
    cells: dict = {}
    for r in load("ladder_bench.json")["rows"]:
        if r["kernel"] != "copy" and not r["kernel"].startswith(("liger_", "quack_")):
            cells.setdefault((r["run"], r["method"], r["dtype"], r["M"], r["N"], r["pass"]), {})[r["kernel"]] = r["gbps"]
    runs = {k: c for k, c in cells.items() if "naive" in c}
    N = 256
    long = [c for k, c in runs.items() if k[4] >= N]
    assert long and all(c["naive"] * 2 < min(v for k, v in c.items() if k != "naive") for c in long)
    short = [c for k, c in runs.items() if k[4] == 64]
    assert short and all(c["block_vec"] < c["naive"] for c in short)
    return (N,)


@cache
def releases() -> dict:
    return json.loads((REFERENCE / "torch_versions.json").read_text())["releases"]


def dropped_gamma_beta() -> tuple[int]:
    pin, later = set(releases()["2.11.0"]["kernels"]), set(releases()["2.13.0"]["kernels"])
    gone = pin - later
    assert all("GammaBetaBackwardCUDAKernelTemplate" in k for k in gone)
    assert len(later) == len(pin) - len(gone) == len(releases()["2.14.1"]["kernels"])
    return (len(gone),)


def same_count() -> tuple[int]:
    n = len(releases()["2.11.0"]["kernels"])
    assert len(releases()["2.12.1"]["kernels"]) == n
    return (n,)


def torch_reads_long_rows_twice() -> tuple:
    """results/ncu_ladder.json: torch's LayerNorm kernel reads x from DRAM twice from rows of 16384 on,
    and well under twice on shorter rows, in both dtypes; the figures of its fp32 4096 x 16384 case."""
    d = json.loads((RESULTS / "ncu_ladder.json").read_text())
    cases = [c for c in d["cases"] if c["kernel"] == "torch_layer_norm"]
    for c in cases:
        M, N = c["shape"]
        ratio = c["dram_read_mb"] / (M * N * (4 if c["dtype"] == "fp32" else 2) / 1e6)
        assert (ratio > 1.9) if N >= 16384 else (ratio < 1.45), (c, ratio)
    (c,) = [c for c in cases if c["dtype"] == "fp32" and c["shape"] == [4096, 16384]]
    assert c["bound"] == "memory"
    return (round(c["dram_read_mb"]), round(4096 * 16384 * 4 / 1e6), round(c["dram_pct"]), round(c["issue_active_pct"]))


GDB_MD = "guide/cuda-gdb.md"
PHRASES += [
    ("numerics.md", "differs on rows with subnormal inputs (the planted `ftz` kernel", ftz_fails_only_subnormal),
    ("guide/stepping.md", "measured on the H100 for a row of {} values", numerics_row_length),
    (GDB_MD, "H100 80GB HBM3, driver {}, cuda-gdb 13.0, NVRTC 13.0, {}.",
     lambda: (re.search(r"driver (\S+),", gdb())[1], re.search(r"(\d{4}-\d\d-\d\d)", gdb())[1])),
    (GDB_MD, "`wd = {{mean = {}, sigma2 = {}, count = {}}}`", lambda: gdb_state(6)),
    (GDB_MD, "`wdB = {{mean = {}, sigma2 = {}, count = {}}}`", lambda: gdb_state(7)),
    (GDB_MD, "After the combine, `wd = {{mean = {}, sigma2 = {}, count = {}}}`", lambda: gdb_state(8)),
    (GDB_MD, "`dataB` is this lane's state `{{{}, {}, {}}}` and `dataA` is lane 8's `{{{}, {}, {}}}`",
     lambda: gdb_state(15) + gdb_state(16)),
    (GDB_MD, "`delta = {}`, `count = {}` and `nA = nB = {}`",
     lambda: (gdb_local("delta"), gdb_local("count"), gdb_local("nA"))),
    (GDB_MD, "`Value returned is {{mean = {}, sigma2 = {}, count = {}}}`", lambda: gdb_state(17)),
    (GDB_MD, "`mean {} rstd {}`", lambda: re.search(r"^mean (\S+) rstd (\S+)", gdb(), re.M).groups()),
    ("ladder/rungs.md", "on every cell of the shared grid with rows of {} or more that it was timed on", naive_slowest),
    ("ladder/index.md", "It reaches at most {}% of copy on the cells it was timed on.",
     lambda: (pct(max(r["pct_copy"] for r in load("ladder_bench.json")["rows"] if r["kernel"] == "naive")),)),
    ("ladder/rungs.md", "each of the {}'s 132 blocks walks only about eight or sixteen of them",
     lambda: (load("ladder_bench.json")["device"].removeprefix("NVIDIA "),) if (round(1024 / 132), round(2048 / 132))
     == (8, 16) else ()),
    ("ladder/index.md", "(that profile's fp32 4096 × 16384: {} MB read for a {} MB input). There the float32 kernel waits on memory "
     "instead (DRAM {}% of its peak, issue slots {}%)", torch_reads_long_rows_twice),
    ("ladder/index.md", "16-bit rows of 32768 and more (past {} and {} elements)", lambda: (
        launch.ROW_CACHE_LIMIT // 4, launch.ROW_CACHE_LIMIT // 2)),
    ("ladder/index.md", "`naive` is timed only on cells of at most {} × {} elements", lambda: (
        65536, grid.SLOW_MOST // 65536)),
    ("releases.md", "**2.12.1** carries the same {} kernels with the same SASS", same_count),
    ("releases.md", "drop {} GammaBeta instantiations", dropped_gamma_beta),
]


# the glossary's example of low occupancy: the fast dX kernel's most registers a thread, and its
# achieved occupancy on rows of 4096 elements or more
PHRASES += [
    ("glossary.md", "row in up to {} registers a thread, runs at {} occupancy on long rows",
     lambda: (max(c["registers"] for c in ncu("grad", "reimpl.fast")),
              ncu_span("grad", "reimpl.fast", "achieved_occupancy_pct", "%", long_rows))),
]


def bn_small_columns() -> tuple:
    """results/ncu_siblings.json, float32 32 x 256 x 14 x 14 channels-last: our forward's three kernels
    against cuDNN's one (kernel times, µs), our statistics pass's time, blocks (its plan, from
    batchnorm_split.columns_plan) and achieved occupancy against cuDNN's kernel's; each pass of ours is
    latency-bound, and together they take longer than cuDNN's kernel."""
    from reimpl.ladder import batchnorm_split as bs
    cases = [c for c in load("ncu_siblings.json")["cases"]
             if c["dtype"] == "fp32" and c["shape"] == [32, 256, 14, 14] and c["kernel"].endswith("[channels_last]")]
    ours = [c for c in cases if c["kernel"].startswith("bn_split")]
    (theirs,) = [c for c in cases if c["kernel"].startswith("torch_batch_norm")]
    (stats,) = [c for c in ours if c["launched"] == "ladder::bn_partial_stats_cl"]
    assert [c["launched"].split("::")[1] for c in ours] == ["bn_partial_stats_cl", "bn_finalize_stats", "bn_apply"]
    assert all(c["bound"] == "latency" for c in ours) and sum(c["us"] for c in ours) > theirs["us"]
    plan = bs.columns_plan(32 * 14 * 14, 256, 4, True)
    assert plan.grid[0] * plan.grid[1] < 132 and bs.MIN_VALUES == 16384  # "fewer blocks than the GPU has SMs"
    return (f"{sum(c['us'] for c in ours):.1f}", f"{theirs['us']:.1f}", f"{stats['us']:.1f}",
            plan.grid[0] * plan.grid[1], f"{stats['occupancy_pct']:.0f}", f"{theirs['occupancy_pct']:.0f}")


def one_read_short() -> tuple:
    """Large softmax cells where one_read is under 90% of copy: rows of 262144 or of an odd width,
    their span, and float32 rows of 131072 just short of 90% (flushed)."""
    size = {"fp32": 4, "bf16": 2, "fp16": 2}
    short = [r for r in load("siblings_bench.json")["rows"] if r["op"] == "softmax" and r["kernel"] == "one_read"
             and r["pct_copy"] < 90 and r["shape"][0] * r["shape"][1] * size[r["dtype"]] >= grid.LARGE]
    kinds = [r for r in short if r["shape"][1] == 262144 or r["shape"][1] % 2]
    rest = [r for r in short if r not in kinds]
    assert all(r["dtype"] == "fp32" and r["shape"][1] == 131072 and r["method"] == "flushed" and r["pct_copy"] > 89.5
               for r in rest) and rest
    return (span([r["pct_copy"] for r in kinds]),)


def bn_cl_fp32_forward_faster() -> tuple:
    """The float32 channels-last inputs whose forward ours runs faster than torch's, the same under
    both timing methods, as the page lists them (the other inputs: slower)."""
    rows = [r for r in load("siblings_bench.json")["rows"] if r["op"] == "batchnorm"]
    ms = {(r["method"], r["dtype"], r["layout"], r["pass"], tuple(r["shape"]), r["kernel"]): r["ms"] for r in rows}
    faster = {}
    for method in ("pipelined", "flushed"):
        faster[method] = sorted(k[4] for k in ms if k[0] == method and k[1:4] == ("fp32", "channels_last", "forward")
                                and k[5] == "bn_split" and ms[k] < ms[k[:5] + ("torch_batch_norm",)])
    assert faster["pipelined"] == faster["flushed"]
    shapes = sorted(faster["pipelined"], key=lambda s: (len(s) == 2, s[1]))
    names = [" × ".join(map(str, s)) for s in shapes]
    return (", ".join(names[:-1]) + " and " + names[-1],)


def torch_bound() -> tuple:
    """Nsight's verdict on torch's LayerNorm forward: memory on every float32 row, its instructions
    on most 16-bit ones."""
    cases = [c for c in load("ncu_ladder.json")["cases"] if c["kernel"] == "torch_layer_norm"]
    assert cases and all(c["bound"] == "memory" for c in cases if c["dtype"] == "fp32")
    short = [c["bound"] for c in cases if c["dtype"] != "fp32"]
    assert short.count("compute") > len(short) / 2
    return ()


def grid_slower_cells() -> tuple:
    """fast_grid_bench.json's cells (method, shape, op) where our kernel took longer than torch's."""
    rows = load("fast_grid_bench.json")["rows"]
    ms = {(r["method"], r["dtype"], r["M"], r["N"], r["kernel"]): r["ms"] for r in rows}
    slower = [k for k in ms if k[4].startswith("fast_") and ms[k] > ms[k[:4] + ("torch_" + k[4][5:],)]]
    return {1: "all but one cell"}.get(len(slower), f"all but {len(slower)} cells"),


def sms_of_both_gpus() -> tuple:
    """The SM count the records note, on each GPU they name."""
    sms = {load("chains_probe.json")["device"]: load("chains_probe.json")["route"]["sms"],
           load("fast_rows_sweep.json")["device"]: load("fast_rows_sweep.json")["sms"]}
    assert {d.split()[1] for d in sms} == {"H100", "H200"} and set(sms.values()) == {132}
    return ()


def release_stubs() -> tuple:
    v = json.loads((ROOT / "reference/torch_versions.json").read_text())["releases"]["2.12.1"]["versus_pin"]
    assert v["kernels"] == v["fp_identical"] == v["common"] and not v["removed"] and not v["added"]
    return v["kernels"], {2: "two"}[v["kernels"] - v["sass_identical"]]


def later_release_sass() -> tuple:
    """2.13.0 and 2.14.1 against the pin: the kernels they keep, how many changed SASS in each, and
    how many of those differ in floating-point instructions (the same count in both)."""
    t = json.loads((ROOT / "reference/torch_versions.json").read_text())["releases"]
    v13, v14 = t["2.13.0"]["versus_pin"], t["2.14.1"]["versus_pin"]
    assert v13["common"] == v14["common"] and len(v13["fp_differ"]) == len(v14["fp_differ"])
    return (v13["common"], v13["common"] - v13["sass_identical"], v14["common"] - v14["sass_identical"],
            len(v13["fp_differ"]))


def forward_kernels_in_the_wheel() -> tuple:
    """torch 2.11.0's forward kernels in libtorch_cuda.so: each of the three forward templates in 8
    (T, T_ACC, rms_norm) combinations."""
    names = json.loads((ROOT / "reference/torch_versions.json").read_text())["releases"]["2.11.0"]["kernels"]
    counts = [sum(f"::{t}<" in n for n in names) for t in
              ("vectorized_layer_norm_kernel", "RowwiseMomentsCUDAKernel", "LayerNormForwardCUDAKernel")]
    assert counts == [8, 8, 8], counts
    return (sum(counts),)


PHRASES += [
    ("guide/call-path.md", "The {} forward kernels in `libtorch_cuda.so` are these combinations.",
     forward_kernels_in_the_wheel),
    ("releases.md", "Of the {} kernels they keep, {} (2.13.0) and {} (2.14.1) changed their SASS, and {} of them in "
     "their floating-point instructions.", later_release_sass),
    ("index.md", "what limits torch's kernel: its instructions on most 16-bit rows, memory on float32 rows.",
     torch_bound),
    ("index.md", "a kernel that gives exactly torch's output, in less time on {} of the grid", grid_slower_cells),
    ("glossary.md", "The H100 and the H200 used for this site's measurements each have 132 SMs.", sms_of_both_gpus),
    ("releases.md", "carries the same {} kernels with the same SASS. The only exceptions are the {} empty fp64 stubs "
     "of the vectorized kernel", release_stubs),
    ("ladder/softmax.md", "Two kinds of cell keep `one_read` at {} of the copy", one_read_short),
    ("ladder/batchnorm.md", "In float32 channels-last, our forward is faster than torch's only on {}, under both "
     "timing methods, and slower on the others", bn_cl_fp32_forward_faster),
    ("ladder/batchnorm.md", "its three launches take {} µs of kernel time together against cuDNN's one kernel "
     "of {} µs. The statistics pass alone takes {} µs: its {} blocks keep {}% of the SMs' warps active where "
     "cuDNN's kernel keeps {}%", bn_small_columns),
]


@pytest.mark.parametrize("page_name, phrase, value", PHRASES, ids=[f"{p}:{s[:40]}" for p, s, _ in PHRASES])
def test_prose_number_matches_results(page_name, phrase, value):
    filled = phrase.format(*value())
    assert filled in page(page_name), f"{page_name} should say: {filled}"



def test_the_cuda_gdb_page_names_the_transcripts_commit_and_todays_source_folder():
    """The page's line numbers are the transcript's, recorded at the commit its header names; the
    `directory` command it gives is where the mirror's CUDA is today."""
    from reimpl.mirror import kernel_table as K
    header = (RESULTS / "cuda_gdb_session.txt").read_text().split("\n\n")[0]
    commit = re.search(r"at commit (\w+)", header).group(1)
    text = page("guide/cuda-gdb.md")
    assert f"recorded at commit {commit}" in text
    folder = K.SOURCE.directory.relative_to(ROOT).as_posix()
    assert f"`directory {folder}`" in text and (K.SOURCE.directory / "layer_norm_kernel.cu").is_file()


def test_the_cuda_gdb_scalars_are_the_transcripts():
    """The scalars the page quotes from the transcript: N, n_vec_to_read, numx, thrx and offset at
    the first stop ($1-$5), thread 5's thrx ($9), thread (0,2,0)'s thrx ($11), the second stop's
    offset ($13)."""
    text = page("guide/cuda-gdb.md")
    n, n_vec, numx, thrx, offset = (gdb_value(i) for i in range(1, 6))
    assert (f"`N = {n}`, `n_vec_to_read = {n_vec}` (4-wide vectors), `numx = {numx}` threads, `thrx = {thrx}`, "
            f"`offset = {offset}`") in text
    assert f"`cuda thread (5,0,0)`: `thrx = {gdb_value(9)}`" in text
    assert f"`cuda thread (0,2,0)`: `thrx = {gdb_value(11)}`" in text
    assert f"stops again at line 234 with `offset = {gdb_value(13)}`" in text


def test_the_gamma_beta_tile_table_is_torchs_recorded_launches():
    """upstream/layer_norm_kernel.md's tile table: each tile's block and dynamic shared memory (float
    accumulation) are those of torch's recorded GammaBeta launches (reference/torch_launches_backward.json)."""
    launches = [launch for case in json.loads((ROOT / "reference/torch_launches_backward.json").read_text())["cases"]
                for launch in case["launches"] if "GammaBetaBackwardCUDAKernelTemplate<float, float" in launch["kernel"]]
    seen = {}
    for launch in launches:
        tile = tuple(re.search(r"float, float, (\d+)u, (\d+)u, (\d+)u", launch["kernel"]).groups())
        seen.setdefault(tile, set()).add((tuple(launch["block"][:2]), launch["smem"]))
    text = page("upstream/layer_norm_kernel.md")
    rows = re.findall(r"\| `<(\d+), (\d+), (\d+)>` \| \((\d+), (\d+)\) \| (\d+)(?: B)? \|", text)
    assert len(rows) == 5
    for *tile, bx, by, smem in rows:
        assert seen.get(tuple(tile)) == {((int(bx), int(by)), int(smem))}, (tile, seen.get(tuple(tile)))
