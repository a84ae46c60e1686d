"""Device plumbing: how CUDA source becomes a running kernel, with nothing LayerNorm-specific in it.

    nvrtc.py     a ctypes binding of NVRTC (compile, name lowering, version)
    compile.py   `CudaSource` and `build`: compile a source tree with torch's numerics, cache the cubin
    kernel_types.py  C scalar types, `KernelTemplate` and `Kernel`: a kernel's name, name expression and tree
    runtime.py   where host code meets a device: torch's current stream, device properties, launches
                 (TorchCupyRuntime launches for real; RecordingRuntime records, on any machine),
                 and the runtime of the calling context
    replay.py    launch plans: a host function's launches recorded once per signature, then replayed
    cubin.py     facts read off a cubin without a GPU (static shared memory, demangled names)

Layer: device. May import: nothing.
Beyond the standard library and NumPy: torch in replay.py, and torch and CuPy lazily, on a GPU, in
runtime.py and compile.py. Every layer above reaches a GPU only through here.
"""
