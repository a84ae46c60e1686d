"""Step traces: what every thread of a block holds after each step of a kernel.

The emulated device functions call `emit(...)` at the points where reimpl/mirror/cuda/ has a
`REIMPL_TRACE(...)` (reimpl/mirror/cuda/trace.cuh). With no trace being recorded, `emit` returns at
once. Inside `recording()`, each call appends a `Step`: the kernel and block it belongs to, the
device function, a step kind with its index (loop iteration, shuffle round, shared-memory round),
and per thread whether it took part, its partner (the lane a shuffle read, the shared slot it
wrote or read) or the element it touched, and its values.

The same steps come from the GPU when the CUDA mirror is compiled with -DREIMPL_TRACING: each thread
appends a record (block, step code, thread, aux, up to 4 values as raw bits) to a device buffer.
`Trace.records()` turns an emulator trace into exactly those records, so the two compare bit for bit
(reimpl/checks/gpu_trace.py, tests/test_trace_gpu.py).
"""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field

import numpy as np

# Step kinds: code (shared with reimpl/mirror/cuda/trace.cuh, a CPU test checks they agree), the device
# function the step belongs to, what `aux` holds, and the value fields in record order.
KINDS = {
    # compute_stats (vectorized path)
    "online":       (1, "cuWelfordOnlineSum", "element", ("mean", "sigma2", "count")),
    "shfl_down":    (2, "cuWelfordCombine", "partner", ("mean", "sigma2", "count")),
    "smem_write":   (3, "compute_stats", "slot", ("mean", "sigma2", "count")),
    "smem_combine": (4, "cuWelfordCombine", "slot", ("mean", "sigma2", "count")),
    "stats":        (5, "compute_stats", "none", ("mean", "sigma2")),
    "rstd":         (6, "vectorized_layer_norm_kernel_impl", "none", ("rstd",)),
    "output":       (7, "vectorized_layer_norm_kernel_impl", "element", ("out",)),
    # RowwiseMomentsCUDAKernel (fallback path)
    "reduce":       (8, "WelfordOps::reduce", "element", ("mean", "m2", "n", "nf")),
    "warp_reduce":  (9, "WarpReduce", "partner", ("mean", "m2", "n", "nf")),
    "block_write":  (10, "BlockReduce", "slot", ("mean", "m2", "n", "nf")),
    "block_read":   (11, "BlockReduce", "slot", ("mean", "m2", "n", "nf")),
    "moments":      (12, "RowwiseMomentsCUDAKernel", "none", ("mean", "rstd")),
    # LayerNormForwardCUDAKernel
    "fwd_output":   (13, "LayerNormForwardCUDAKernel", "element", ("out",)),
    # backward, grad input (compute_gI and layer_norm_grad_input_kernel_vectorized)
    "gi_sums":        (20, "compute_gI", "none", ("stats_x1", "stats_x2")),
    "sum_shfl_down":  (21, "WarpReduceSum", "partner", ("val",)),
    "sum_smem_write": (22, "BlockReduceSum", "slot", ("val",)),
    "sum_smem_read":  (23, "BlockReduceSum", "slot", ("val",)),
    "gi_stats":       (24, "compute_gI", "none", ("stats_x1", "stats_x2")),
    "gi_dx":          (25, "compute_gI", "element", ("dx",)),
    # backward, GammaBetaBackwardCUDAKernelTemplate (aux of gb_sums: the thread's column thread_x)
    "gb_sums":        (26, "blockReduceGammaBetaBackwardsWithChecks", "element", ("dg_sum", "db_sum")),
    "gb_smem_write":  (27, "GammaBetaBackwardCUDAKernelTemplate", "slot", ("dg", "db")),
    "gb_smem_read":   (28, "GammaBetaBackwardCUDAKernelTemplate", "slot", ("dg", "db")),
    "gb_shfl_xor":    (29, "GammaBetaBackwardCUDAKernelTemplate", "partner", ("dg", "db")),
    "gb_out":         (30, "GammaBetaBackwardCUDAKernelTemplate", "element", ("dg", "db")),
}
CODE_OF = {k: v[0] for k, v in KINDS.items()}
KIND_OF = {v[0]: k for k, v in KINDS.items()}
AUX_NONE = -1
# One record: block, code << 16 | index, thread, aux, then 4 value words (float bits zero-extended)
RECORD_WORDS = 8


@dataclass
class Step:
    kernel: str                     # e.g. "vectorized_layer_norm_kernel<float, float, false>"
    block: int
    kind: str
    index: int                      # loop iteration / round, 0-based, as the GPU numbers it
    detail: str                     # for people: "offset=16", "i=0 ii=2", "round offset=2"
    active: np.ndarray              # bool[threads]: the threads that executed this step
    aux: np.ndarray                 # int64[threads]: partner lane, slot or element (AUX_NONE)
    values: dict[str, np.ndarray]   # field -> [threads] in the accumulate type (count and n too)

    @property
    def func(self) -> str:
        return KINDS[self.kind][1]

    @property
    def code(self) -> int:
        return CODE_OF[self.kind]


@dataclass
class Trace:
    steps: list[Step] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    _kernel: str = ""
    _block: int = 0

    def records(self) -> np.ndarray:
        """The GPU's record layout, uint64[n, RECORD_WORDS], grouped by (block, thread), each
        thread's records in program order (as `sort_records` orders the GPU's)."""
        rows = []
        for s in self.steps:
            t = np.flatnonzero(s.active)
            if len(t) == 0:
                continue
            r = np.zeros((len(t), RECORD_WORDS), np.uint64)
            r[:, 0] = s.block
            r[:, 1] = (s.code << 16) | s.index
            r[:, 2] = t
            r[:, 3] = s.aux[t].astype(np.int64).view(np.uint64)
            for k, name in enumerate(KINDS[s.kind][3]):
                r[:, 4 + k] = _bits(s.values[name][t])
            rows.append(r)
        if not rows:
            return np.zeros((0, RECORD_WORDS), np.uint64)
        return sort_records(np.concatenate(rows))

    def to_json(self) -> str:
        out = {"meta": self.meta, "steps": []}
        for s in self.steps:
            t = np.flatnonzero(s.active)
            out["steps"].append({
                "kernel": s.kernel, "block": s.block, "func": s.func, "kind": s.kind, "index": s.index,
                "detail": s.detail, "threads": t.tolist(), "aux": s.aux[t].tolist(),
                "values": {k: [_show(v) for v in s.values[k][t]] for k in KINDS[s.kind][3]},
                "bits": {k: [hex(int(b)) for b in _bits(s.values[k][t])] for k in KINDS[s.kind][3]},
            })
        return json.dumps(out, indent=1)


def sort_records(r: np.ndarray) -> np.ndarray:
    """Stable sort by (block, thread): one thread's records keep their order, which on the GPU is
    its program order, so steps with equal codes (WarpReduce's two phases) stay apart."""
    order = np.lexsort((r[:, 2], r[:, 0]))
    return r[order]


def _bits(v) -> np.ndarray:
    v = np.asarray(v)
    if v.dtype in (np.float64, np.int64):   # double, and WelfordData's int64_t n
        return v.view(np.uint64)
    return np.asarray(v, np.float32).view(np.uint32).astype(np.uint64)


def _show(v) -> float | str:
    f = float(v)
    return f if np.isfinite(f) else repr(f)


_current: Trace | None = None


@contextlib.contextmanager
def recording(meta: dict | None = None):
    """Record every step emulated inside the block; yields the Trace."""
    global _current
    saved, _current = _current, Trace(meta=dict(meta or {}))
    try:
        yield _current
    finally:
        _current = saved


def active() -> bool:
    return _current is not None


def set_kernel(name: str, block_dim: tuple[int, int, int] | None = None) -> None:
    """The kernel the next steps belong to; its blockDim goes to meta["blockDim"] (for (x, y) labels)."""
    if _current is not None:
        _current._kernel = name
        if block_dim is not None:
            _current.meta.setdefault("blockDim", {})[name] = list(block_dim)


def set_block(block: int) -> None:
    if _current is not None:
        _current._block = block


def emit(kind: str, index: int, detail: str, active_mask, aux, **values) -> None:
    """Record one step (no-op unless recording). Arrays are per thread of the block."""
    if _current is None:
        return
    n = len(next(iter(values.values())))
    act = np.broadcast_to(np.asarray(active_mask, bool), (n,)).copy()
    aux_a = np.broadcast_to(np.asarray(AUX_NONE if aux is None else aux, np.int64), (n,)).copy()
    names = KINDS[kind][3]
    assert set(values) == set(names), (kind, set(values))
    vals = {k: np.array(np.broadcast_to(values[k], (n,))) for k in names}
    _current.steps.append(Step(_current._kernel, _current._block, kind, index, detail, act, aux_a, vals))
