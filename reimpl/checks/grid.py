"""The one shape grid of the LayerNorm and RMSNorm benchmarks (the ladder's rungs, reimpl.fast, the
peers), so that every table here speaks of the same cells.

  tall   N from 64 to 65536 (powers of two, and 768, 1536, 5120, 6144, 12288), as many rows as make
         about 256 MB of traffic (one read of x, one write of y)
  wide   few rows of a wide row: M from 1 to 4096 at N 8192, 12288, 16384
  model  the widths of real models (GPT-2 768, BERT-large 1024, 2048, Llama-7B 4096, 5120, 8192)
         at 4096 tokens

A cell is (part, M, N); a cell's traffic is 2 * M * N * itemsize bytes, and `large(cell)` says whether
it reaches the 32 MB from which a kernel is held to a share of a copy's bandwidth (below it, launch
and tail costs dominate and a kernel is held to torch's kernel time instead).
"""
from __future__ import annotations

TRAFFIC = 256 << 20
LARGE = 32 << 20
TALL_NS = (64, 128, 256, 512, 768, 1024, 1536, 2048, 4096, 5120, 6144, 8192, 12288, 16384, 32768, 65536)
WIDE_MS = (1, 16, 64, 256, 512, 1024, 2048, 4096)
WIDE_NS = (8192, 12288, 16384)
MODEL_NS = (768, 1024, 2048, 4096, 5120, 8192)
MODEL_M = 4096
PARTS = ("tall", "wide", "model")
SLOW_MOST = 65536 * 768  # the most elements (M x N) a cell may have for the slow rung (naive) to be timed on it


def tall_rows(N: int, itemsize: int) -> int:
    """Rows of N that make about TRAFFIC bytes of a read and a write."""
    return max(1, round(TRAFFIC / (2 * N * itemsize)))


def cells(itemsize: int, parts=PARTS) -> list[tuple[str, int, int]]:
    """(part, M, N) of every cell for one storage size, without repeats (a model width's cell that a
    tall or wide cell already has is listed once, under the first part)."""
    out, seen = [], set()
    for part in parts:
        if part == "tall":
            shapes = [(tall_rows(N, itemsize), N) for N in TALL_NS]
        elif part == "wide":
            shapes = [(M, N) for N in WIDE_NS for M in WIDE_MS]
        elif part == "model":
            shapes = [(MODEL_M, N) for N in MODEL_NS]
        else:
            raise ValueError(f"grid part {part!r}: one of {PARTS}")
        for M, N in shapes:
            if (M, N) not in seen:
                seen.add((M, N))
                out.append((part, M, N))
    return out


def traffic(M: int, N: int, itemsize: int) -> int:
    return 2 * M * N * itemsize


def backward_bytes(M: int, N: int, itemsize: int, rms: bool) -> int:
    """The whole backward's copy-equivalent bytes: x, dy and dx, the saved rstd (and mean), gamma and
    dgamma (and dbeta); the statistics are float32. % of copy compares (bytes / t) with a copy's
    2 * M * N * itemsize over its own time."""
    if rms:
        return 3 * M * N * itemsize + 4 * M + 2 * N * itemsize
    return 3 * M * N * itemsize + 8 * M + 3 * N * itemsize


def pct_and_gbps(pass_: str, kernel: str, M: int, N: int, itemsize: int, ms: float, copy_ms: float):
    """(% of copy, GB/s) of one kernel's time on one benchmark pass (scripts/gpu/ladder_bench.py):
    forward counts a read of x and a write of y against one copy; forward+backward x and y, then x,
    dy and dx, against 2.5 copies; backward the copy-equivalent bytes (backward_bytes; the copy's
    own row its two passes over x), their rate against the copy's."""
    if pass_ == "backward":
        nbytes = 2 * M * N * itemsize if kernel == "copy" else backward_bytes(M, N, itemsize, "rms" in kernel)
        return 100 * (nbytes / ms) / (2 * M * N * itemsize / copy_ms), nbytes / ms / 1e6
    copies, nbytes = (1, 2 * M * N * itemsize) if pass_ == "forward" else (2.5, 5 * M * N * itemsize)
    return 100 * copies * copy_ms / ms, nbytes / ms / 1e6


def large(M: int, N: int, itemsize: int) -> bool:
    return traffic(M, N, itemsize) >= LARGE
