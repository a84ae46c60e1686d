"""Device plumbing: how CUDA source becomes a running kernel, with nothing LayerNorm-specific in it.

    nvrtc.py     a ctypes binding of NVRTC (compile, name lowering, version)
    compile.py   `CudaSource` and `build`: compile a source tree with torch's numerics, cache the cubin
    kernel.py    C scalar types, `KernelTemplate` and `Kernel`: a kernel's name, name expression and tree
    runtime.py   where host code meets a device: torch's current stream, device properties, launches
                 (TorchCupyRuntime launches for real; RecordingRuntime records, on any machine)
    cubin.py     facts read off a cubin without a GPU (static shared memory, demangled names)

Imports: the standard library, NumPy, and (lazily, on a GPU) torch and CuPy; nothing else of
reimpl. Every layer above reaches a GPU only through here.
"""
