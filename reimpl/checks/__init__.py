"""Checking the mirror against torch: the case matrices, bit parity, torch's recorded launches,
launch plans and the benchmarks, and the GPU's own step trace.

    cases.py, cases_backward.py   the forward and backward case descriptions and matrices
    parity.py                     bit-for-bit comparison (NaN by position)
    record.py                     torch's launches through torch.profiler; the environment stamp
    plan.py                       the host mirror's launches on a RecordingRuntime, as the profiler shows them
    bench.py                      ours against torch, CUDA-event medians
    gpu_trace.py                  the traced build's records, compared with the emulator's

Imports: the public face and the mirror (reimpl.api, reimpl.mirror.layer_norm_kernel, reimpl.mirror.kernel_table, ...),
reimpl.emulator (trace records), reimpl.device. Nothing below imports this package; the site does.
"""
