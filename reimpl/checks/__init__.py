"""Checking the mirror against torch: the case matrices, bit parity, torch's recorded launches,
launch plans and the benchmarks, and the GPU's own step trace.

    cases.py, cases_backward.py   the forward and backward case descriptions and matrices
    parity.py                     bit-for-bit comparison (NaN by position)
    record.py                     torch's launches through torch.profiler; the environment stamp
    plan.py                       the host mirror's launches on a RecordingRuntime, as the profiler shows them
    bench.py                      ours against torch, CUDA-event medians
    gpu_trace.py                  the traced build's records, compared with the emulator's

    doctor.py                     the user's torch, CUDA, GPU and NVRTC against the pin
    releases.py                   torch releases' own kernels under our host dispatch
    ladder_errors.py, siblings_errors.py   the study kernels' measured errors
    peers.py                      the public peer kernels the benchmarks time (Liger-Kernel, quack), each optional

Layer: checks. May import: emulator, public, fast, ladder, mirror, upstream, device.
Nothing below imports this package; the site and the command line do.
"""
