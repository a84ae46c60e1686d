"""Launch plans without a GPU: run the host mirror for a case under a RecordingRuntime and report
each launch as torch's profiler would (full demangled signature, grid, block, and shared memory as
dynamic `nshared` plus the kernel's static shared memory, read from our compiled cubin)."""
from __future__ import annotations

from ..device import runtime


def host_launches(case) -> list[runtime.Launch]:
    """The launches the host mirror makes for `case` (forward or backward), on CPU tensors."""
    args = case.make_args("cpu", values=False)
    with runtime.use(runtime.RecordingRuntime()) as rt:
        case.run_host(*args)
    return rt.launches


def ladder_backward_launches(name: str, M: int, N: int, sms: int, resident_blocks: int) -> list[runtime.Launch]:
    """The launches the ladder's CUDA backward (reimpl.ladder.backward.run) makes for rung `name` on
    M float32 rows of N with weight and bias, on a device of `sms` SMs that keep `resident_blocks`
    blocks each (CPU tensors: nothing runs)."""
    import torch
    from ..ladder import backward
    x, w, stats = torch.zeros(M, N), torch.ones(N), torch.zeros(M)
    props = {**runtime.H100_PROPERTIES, "multiProcessorCount": sms, "resident_blocks": resident_blocks}
    with runtime.use(runtime.RecordingRuntime(props)) as rt:
        backward.run(name, x, x, w, None if backward.RUNGS[name] else w, stats, stats)
    return rt.launches


def kernel_facts(arch: str = "sm_90") -> dict[str, tuple[str, int]]:
    """Kernel.expr -> (demangled signature, static shared bytes), from our cubin."""
    from ..device import compile as compile_mod, cubin
    from ..mirror.kernel_table import SOURCE
    prog = compile_mod.build(SOURCE, arch)
    static = cubin.static_shared_bytes(prog.cubin)
    names = cubin.demangle(list(prog.lowered.values()))
    return {expr: (full, static.get(m, 0)) for (expr, m), full in zip(prog.lowered.items(), names)}


def profiler_view(launches: list[runtime.Launch], facts: dict) -> list[dict]:
    """Launches as torch.profiler records them: {kernel, grid, block, smem}."""
    out = []
    for l in launches:
        full, static = facts["at::native::" + l.kernel]
        out.append({"kernel": full, "grid": list(l.grid), "block": list(l.block), "smem": l.shared + static})
    return out
