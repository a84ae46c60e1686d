"""Step traces from the GPU: the CUDA mirror built with -DREIMPL_TRACING (reimpl/mirror/cuda/trace.cuh).

`trace_gpu(case)` runs one op of the host mirror on CUDA tensors through a runtime whose cubin has
the switch on; each kernel thread appends its steps to a device buffer, which comes back as the
record array that `reimpl.emulator.trace.Trace.records()` builds from an emulation. `compare`
says where two record arrays first differ (NaN compared by position, every other value by bits).
The traced build is a separate cubin: the normal one, which parity and benchmarks use, has no
trace code at all (tests/test_trace_cpu.py checks that).
"""
from __future__ import annotations

import numpy as np

from ..device.runtime import TorchCupyRuntime
from ..emulator import trace as T
from ..mirror.kernel_table import SOURCE

TRACE_SWITCH = "-DREIMPL_TRACING"


class TracingRuntime(TorchCupyRuntime):
    """TorchCupyRuntime on the traced cubin; `start()` arms a fresh buffer, `records()` reads it."""

    def __init__(self, capacity: int = 1 << 20):
        super().__init__(launch_mode="cupy")
        self.compile_extra = (TRACE_SWITCH,)
        self.capacity = capacity
        self._buf = None

    def _global(self, name: str):
        import cupy
        _, module = self._module(self._get_device(), SOURCE)
        g = module.get_global_var(name)  # CuPy 14: the variable's device address (int) or a MemoryPointer
        ptr = g if isinstance(g, int) else g.ptr
        mem = cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(ptr, 8, module), 0)
        return cupy.ndarray((1,), cupy.uint64, mem)

    def start(self) -> None:
        import cupy
        self._buf = cupy.zeros((self.capacity, T.RECORD_WORDS), cupy.uint64)
        self._global("reimpl_trace_buf")[0] = self._buf.data.ptr
        self._global("reimpl_trace_capacity")[0] = self.capacity
        self._global("reimpl_trace_count")[0] = 0
        cupy.cuda.runtime.deviceSynchronize()

    def records(self) -> np.ndarray:
        import cupy
        cupy.cuda.runtime.deviceSynchronize()
        n = int(self._global("reimpl_trace_count").get()[0])
        if n > self.capacity:
            raise OverflowError(f"{n} trace records for a buffer of {self.capacity}: raise capacity")
        return T.sort_records(self._buf[:n].get())


def trace_gpu(case, capacity: int = 1 << 20):
    """Run `case` (reimpl.checks.cases.Case) on the GPU with tracing on:
    (the CUDA inputs, as views with the case's storage offsets; the outputs on the CPU; records)."""
    import torch
    from ..device import runtime
    x, w, b = case.make_inputs("cuda")
    rt = TracingRuntime(capacity)
    with runtime.use(rt):
        rt.start()
        with torch.no_grad():
            outs = case.run_ours(x, w, b)
        rec = rt.records()
    return (x, w, b), [o.detach().cpu() for o in outs], rec


def _field_names(code: int) -> tuple[str, ...]:
    return T.KINDS[T.KIND_OF[code]][3]


def compare(gpu: np.ndarray, emu: np.ndarray, double: bool) -> str | None:
    """None when equal; else a description of the first difference. Values: the accumulate type
    (float32 in the low word, or float64), `n` as int64; NaN equals NaN whatever its payload."""
    if gpu.shape != emu.shape:
        return f"{len(gpu)} GPU records against {len(emu)} emulated"
    for row in np.flatnonzero((gpu != emu).any(axis=1)):
        if (gpu[row, :4] != emu[row, :4]).any():
            return f"record {row}: GPU {gpu[row, :4].tolist()} emulator {emu[row, :4].tolist()}"
        for k, name in enumerate(_field_names(int(gpu[row, 1]) >> 16)):
            a, b = gpu[row, 4 + k], emu[row, 4 + k]
            if a == b:
                continue
            if name != "n":
                fa, fb = ((np.array([a, b]).view(np.float64)) if double
                          else np.array([a, b]).astype(np.uint32).view(np.float32))
                if np.isnan(fa) and np.isnan(fb):
                    continue
            kind = T.KIND_OF[int(gpu[row, 1]) >> 16]
            return (f"record {row} ({kind} #{int(gpu[row, 1]) & 0xFFFF}, block {int(gpu[row, 0])}, "
                    f"thread {int(gpu[row, 2])}): {name} GPU {hex(int(a))} emulator {hex(int(b))}")
    return None
