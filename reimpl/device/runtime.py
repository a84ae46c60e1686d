"""Where the host mirror meets a device: the current stream, device properties and kernel launches.

Upstream's host code reaches these through globals (at::cuda::getCurrentCUDAStream(),
getCurrentDeviceProperties(), the <<<...>>> launch). Our host mirror reaches them through
`runtime.get()`, the runtime of the calling context (a `contextvars.ContextVar`, so threads and
tasks never see each other's), which is either a `TorchCupyRuntime` (launches for real on torch's current
stream, kernels loaded into CuPy from our NVRTC cubin) or a `RecordingRuntime` (records each launch;
runs on a CPU-only machine, which is how launch plans are tested without a GPU).

A kernel here is a `reimpl.device.kernel_types.Kernel` (or anything with its `.name`, `.expr`, `.source`,
`.template.params` and `.T_ACC`); the mirror's are declared in reimpl/mirror/kernel_table.py.
"""
from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import os
import struct
import threading
from dataclasses import dataclass, field

import numpy as np

from .kernel_types import param_codes

# The H100's limits, used when recording on a machine without a GPU.
H100_PROPERTIES = {"maxGridSize": (2147483647, 65535, 65535), "warpSize": 32, "multiProcessorCount": 132}


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    stream: int

    def as_dict(self) -> dict:
        return {"kernel": self.kernel, "grid": list(self.grid), "block": list(self.block), "smem": self.shared}


def dim3(x, y=1, z=1) -> tuple[int, int, int]:
    """CUDA's dim3: an int or a 1-3 tuple, padded with 1s."""
    if type(x) is tuple:
        return x if len(x) == 3 else (x + (1, 1))[:3]
    return (int(x), int(y), int(z))


def _pack(kernel, args, kinds: tuple[str, ...] | None = None) -> tuple:
    """C-typed kernel arguments: int -> int32, int64, T_ACC -> float32/float64, pointer -> 64 bits.
    `kinds` overrides the kernel's own parameter kinds (a build whose signature differs)."""
    out = []
    for kind, a in zip(kinds or kernel.template.params, args, strict=True):
        if kind == "ptr":
            out.append(np.uint64(a))
        elif kind == "int":
            out.append(np.int32(a))
        elif kind == "int64":
            out.append(np.int64(a))
        else:  # "T_ACC"
            out.append(kernel.T_ACC.np_scalar(a))
    return tuple(out)


class Plans(dict):
    """A runtime's launch plans (reimpl/device/replay.py), by key. Emptying it also drops the
    runtime's entries in the C++ replay (reimpl/device/native.py), which replays the same plans."""
    __slots__ = ("token",)

    def __init__(self, token: int):
        super().__init__()
        self.token = token  # the runtime's id, as the C++ replay knows it

    def clear(self) -> None:
        super().clear()
        from . import native
        native.forget(self.token)


class RecordingRuntime:
    """Runs the host dispatch without a device: launches are recorded, not executed."""

    def __init__(self, properties: dict | None = None):
        self.properties = dict(properties or H100_PROPERTIES)
        self.launches: list[Launch] = []
        self.calls: list[tuple[object, Launch, tuple]] = []  # with the arguments, for replay (emulator)
        self.plans: dict = {}  # launch plans (reimpl/device/replay.py)

    def getCurrentCUDAStream(self, device_index: int | None = None) -> int:
        return 0

    def stream_reader(self):
        """A function of no arguments: getCurrentCUDAStream()'s answer."""
        return self.getCurrentCUDAStream

    def getCurrentDeviceProperties(self) -> dict:
        return self.properties

    def warp_size(self) -> int:
        return self.properties["warpSize"]

    def bind(self, kernel, grid, block, shared: int):
        """A launcher of `kernel` on `grid` and `block` with `shared` bytes: (stream, *args)."""
        return functools.partial(self.launch, kernel, grid, block, shared)

    def launch(self, kernel, grid, block, shared: int, stream: int, *args) -> None:
        _pack(kernel, args)  # same argument checks as a real launch
        launch = Launch(kernel.name, dim3(grid), dim3(block), int(shared), stream)
        self.launches.append(launch)
        self.calls.append((kernel, launch, args))

    launch_cooperative = launch

    def resident_blocks(self, kernel, threads: int, shared: int = 0) -> int | None:
        """Without a device: the properties' `resident_blocks` if given, else None (the caller's
        launch bound then stands for it)."""
        return self.properties.get("resident_blocks")

    def resident_clusters(self, kernel, cluster: int, threads: int, shared: int = 0) -> int | None:
        """Without a device: the properties' `resident_clusters` if given, else None."""
        return self.properties.get("resident_clusters")


class _Stream:
    """The one attribute CuPy's Function.__call__ reads from a stream."""
    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr


@dataclass
class _DeviceState:
    functions: dict = field(default_factory=dict)  # kernel -> launcher
    modules: dict = field(default_factory=dict)    # CudaSource -> (Program, cupy Module), once loaded
    properties: dict | None = None
    attributes: dict = field(default_factory=dict)  # (kernel, attribute) -> the value set (allow_shared, ...)




class _DriverLaunch:
    """cuLaunchKernel (through CuPy's driver binding) on a CuPy-loaded function, with one
    preallocated argument block per kernel and thread: the arguments are written into it with one
    struct.pack_into (C alignment, as the kernel's parameter block lays them out), then one call."""

    def __init__(self, fn, kernel):
        from cupy.cuda import driver
        self._launch = driver.launchKernel
        self._owner = fn  # the CuPy Function keeps its Module, so the handle below stays loaded
        self._fn = fn.ptr
        codes = param_codes(kernel)
        self._layout = struct.Struct("@" + "".join(codes))
        # where each argument starts in the block: the size of the block up to it, less its own size
        self._offsets = [struct.calcsize("@" + "".join(codes[:i + 1])) - struct.calcsize(c)
                         for i, c in enumerate(codes)]
        self._local = threading.local()

    def _block(self):
        block = ctypes.create_string_buffer(max(self._layout.size, 8))
        base = ctypes.addressof(block)
        argv = (ctypes.c_void_p * max(len(self._offsets), 1))(*[base + o for o in self._offsets])
        self._local.v = (block, argv, ctypes.addressof(argv))
        return self._local.v

    def _packed(self, args) -> int:
        try:
            buf, _argv, argv_addr = self._local.v
        except AttributeError:
            buf, _argv, argv_addr = self._block()
        self._layout.pack_into(buf, 0, *args)
        return argv_addr

    def __call__(self, grid, block, shared: int, stream: int, args) -> None:
        argv_addr = self._packed(args)
        self._launch(self._fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                     shared, stream, argv_addr, 0)

    def launcher(self, grid, block, shared: int, rt, device: int, counts: list, slot: int, slow):
        """A plan's launcher (TorchCupyRuntime.bind): (stream, *args), with the configuration fixed
        and everything __call__ does written out in one function, since a replay pays each Python
        call. It adds one to counts[slot], and hands the launch to `slow` while `rt` records live
        launches or this thread has not made `device`'s context current."""
        launch, fn, pack, local, make = self._launch, self._fn, self._layout.pack_into, self._local, self._block
        (g0, g1, g2), (b0, b1, b2), thread = grid, block, rt._thread

        def run(stream, *args):
            counts[slot] += 1
            if rt.record is not None or device not in getattr(thread, "ready", ()):
                return slow(stream, *args)
            try:
                buf, _argv, argv_addr = local.v
            except AttributeError:
                buf, _argv, argv_addr = make()
            pack(buf, 0, *args)
            launch(fn, g0, g1, g2, b0, b1, b2, shared, stream, argv_addr, 0)
        return run

    def cooperative(self, grid, block, shared: int, stream: int, args) -> None:
        """cuLaunchCooperativeKernel: every block of the grid resident at once, or an error."""
        argv_addr = self._packed(args)
        _check(_libcuda().cuLaunchCooperativeKernel(
            ctypes.c_void_p(self._fn), *grid, *block, shared, ctypes.c_void_p(stream), ctypes.c_void_p(argv_addr)),
            "cuLaunchCooperativeKernel")

    def resident_blocks(self, threads: int, shared: int) -> int:
        """cuOccupancyMaxActiveBlocksPerMultiprocessor: blocks of `threads` an SM holds at once."""
        n = ctypes.c_int()
        _check(_libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(n), ctypes.c_void_p(self._fn), threads, ctypes.c_size_t(shared)),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        return n.value

    def resident_clusters(self, cluster: int, threads: int, shared: int) -> int:
        """cuOccupancyMaxActiveClusters: clusters of `cluster` blocks (the kernel's compiled cluster
        shape) the whole device holds at once."""
        n = ctypes.c_int()
        config = _LaunchConfig(cluster, 1, 1, threads, 1, 1, shared, None, None, 0)
        _check(_libcuda().cuOccupancyMaxActiveClusters(ctypes.byref(n), ctypes.c_void_p(self._fn),
                                                        ctypes.byref(config)), "cuOccupancyMaxActiveClusters")
        return n.value


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig, the argument of cuOccupancyMaxActiveClusters."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


@functools.lru_cache(maxsize=1)
def _libcuda():
    """The driver library, for the calls CuPy's binding lacks (cooperative launch, occupancy)."""
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuLaunchCooperativeKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 2
    lib.cuOccupancyMaxActiveBlocksPerMultiprocessor.argtypes = [
        ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    lib.cuOccupancyMaxActiveClusters.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p,
                                                  ctypes.POINTER(_LaunchConfig)]
    return lib


def _check(result: int, call: str) -> None:
    if result != 0:
        raise RuntimeError(f"{call} failed: CUresult {result}")


class TorchCupyRuntime:
    """Launches on torch's current CUDA stream, from our NVRTC-compiled cubin loaded by CuPy.

    launch_mode "driver" (default) calls cuLaunchKernel through cupy.cuda.driver with preallocated
    arguments; "cupy" calls CuPy's Function.__call__ (simpler, slower per launch).
    Both launch the same CUfunction with the same configuration.
    """

    binds_directly = False  # see bind()

    def __init__(self, launch_mode: str | None = None):
        import torch
        self._torch = torch
        self._get_device = torch._C._cuda_getDevice
        self._get_stream = torch._C._cuda_getCurrentRawStream
        self.launch_mode = launch_mode or os.environ.get("REIMPL_LAUNCH", "driver")
        if self.launch_mode not in ("driver", "cupy"):
            raise ValueError(f"REIMPL_LAUNCH must be 'driver' or 'cupy', not {self.launch_mode!r}")
        self._devices: dict[int, _DeviceState] = {}
        self._streams: dict[int, _Stream] = {}
        self._thread = threading.local()  # .ready: devices whose context is current in this thread
        # compiling, loading and looking up happen once per device, kernel and source, whichever
        # thread asks first; two threads racing here would load a module twice and drop one that
        # the other's launcher still points into
        self._load_lock = threading.RLock()
        self.record: list[Launch] | None = None  # set to a list to also record live launches
        self.compile_extra: tuple[str, ...] = ()  # NVRTC options beyond torch's (gpu_trace adds its switch)
        self.plans = Plans(id(self))
        self.launch_counts = [0] * 8  # replayed launches by `counter` slot; slot 0: those nobody asks about

    def use_compile_options(self, options: tuple[str, ...]) -> None:
        """NVRTC options beyond torch's for every source from the next launch on: the modules loaded so
        far (and their launchers and shared-memory grants) are dropped, so each source compiles again
        with them (scripts/gpu/row_held_probe.py times a kernel's -D settings this way)."""
        with self._load_lock:
            self.compile_extra = tuple(options)
            self.plans.clear()  # their launchers point into the dropped modules
            for st in self._devices.values():
                st.modules.clear()
                st.functions.clear()
                st.attributes.clear()

    def _state(self, device: int) -> _DeviceState:
        st = self._devices.get(device)
        if st is None:
            with self._load_lock:
                st = self._devices.setdefault(device, _DeviceState())
        return st

    def getCurrentCUDAStream(self, device_index: int | None = None) -> int:
        return self._get_stream(self._get_device() if device_index is None else device_index)

    def stream_reader(self):
        """A function of no arguments: the current stream of the current device as it is now, for a
        caller that asks on every call of that device (a C function with the index bound, so asking
        costs no Python frame; the stream itself is read per call, per thread)."""
        return functools.partial(self._get_stream, self._get_device())

    def getCurrentDeviceProperties(self) -> dict:
        st = self._state(self._get_device())
        if st.properties is None:
            import cupy
            p = cupy.cuda.runtime.getDeviceProperties(self._get_device())
            st.properties = {"maxGridSize": tuple(p["maxGridSize"]), "warpSize": p["warpSize"],
                             "multiProcessorCount": p["multiProcessorCount"],
                             "sharedMemPerMultiprocessor": p["sharedMemPerMultiprocessor"],
                             "major": p["major"], "minor": p["minor"]}
        return st.properties

    def warp_size(self) -> int:
        return self.getCurrentDeviceProperties()["warpSize"]

    def _module(self, device: int, source):
        """(Program, cupy Module) of `source` on `device`, compiled and loaded on first use."""
        st = self._state(device)
        loaded = st.modules.get(source)
        if loaded is None:
            loaded = st.modules[source] = self._load_module(device, source)
        return loaded

    def _function(self, device: int, kernel):
        """The launcher of `kernel` on `device`, made once (under the lock)."""
        st = self._state(device)
        with self._load_lock:
            launcher = st.functions.get(kernel)
            if launcher is None:
                launcher = st.functions[kernel] = self._make_launcher(device, kernel)
        return launcher

    def _make_launcher(self, device: int, kernel):
        if kernel.template.release is not None:
            raise KernelMissing(f"{kernel.name} with torch {kernel.template.release}'s signature: only that "
                                "release's cubin has it (reimpl/checks/releases.py), not our build")
        prog, module = self._module(device, kernel.source)
        fn = module.get_function(prog.lowered[kernel.expr])
        return _DriverLaunch(fn, kernel) if self.launch_mode == "driver" else fn

    def _current_function(self, kernel):
        """The launcher of `kernel` on the current device, that device's context current in this thread."""
        device = self._get_device()
        if device not in getattr(self._thread, "ready", ()):
            self._ensure_context(device)
        st = self._devices.get(device)
        fn = st.functions.get(kernel) if st is not None else None
        return fn if fn is not None else self._function(device, kernel)

    def _signature(self, kernel, grid, args) -> tuple:
        """(parameter kinds or None for the kernel's own, args) of a launch through CuPy's call."""
        return None, args

    def allow_shared(self, kernel, nbytes: int) -> None:
        """Let `kernel` launch with `nbytes` of dynamic shared memory on the current device. Static
        and dynamic shared memory together above 48 KB must be asked for first (cuFuncSetAttribute,
        once per device); asking for any nbytes keeps that sum out of the caller's sight."""
        if nbytes:
            self._raise_attribute(kernel, 8, nbytes)  # 8: CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

    def allow_wide_cluster(self, kernel) -> None:
        """Let `kernel`, whose clusters have more than 8 blocks (non-portable: up to 16 on Hopper),
        launch on the current device."""
        self._raise_attribute(kernel, 14, 1)  # 14: CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED

    def _raise_attribute(self, kernel, attribute: int, value: int) -> None:
        """cuFuncSetAttribute(kernel, attribute, value) once per device, where no larger value is set."""
        device = self._get_device()
        st = self._state(device)
        if st.attributes.get((kernel, attribute), 0) >= value:
            return
        from cupy.cuda import driver
        fn = st.functions.get(kernel) or self._function(device, kernel)
        ptr = fn._fn if isinstance(fn, _DriverLaunch) else fn.ptr
        with self._load_lock:
            driver.funcSetAttribute(ptr, attribute, value)
            st.attributes[(kernel, attribute)] = max(value, st.attributes.get((kernel, attribute), 0))

    def _load_module(self, device: int, source):
        import cupy
        from . import compile as compile_mod
        props = self.getCurrentDeviceProperties()
        prog = compile_mod.build(source, f"sm_{props['major']}{props['minor']}", extra_options=self.compile_extra)
        with cupy.cuda.Device(device):
            module = cupy.cuda.function.Module()
            module.load(prog.cubin)
        return prog, module

    def _ensure_context(self, device: int) -> None:
        """Make the device's primary context current in this thread. cuLaunchKernel needs one, and a
        thread torch made (autograd's backward worker) may not have it yet: torch's runtime-API calls
        never required it. cudaSetDevice makes it current."""
        import cupy
        ready = getattr(self._thread, "ready", None)
        if ready is None:
            ready = self._thread.ready = set()
        cupy.cuda.runtime.setDevice(device)
        ready.add(device)

    def counter(self, kernel) -> int:
        """The slot of launch_counts that each replayed launch of `kernel` adds one to: 0 here; a
        runtime that counts its own kernels' launches says which (reimpl.fast's)."""
        return 0

    def bind(self, kernel, grid, block, shared: int):
        """A plan's launcher of `kernel` on `grid` and `block` (3-tuples) with `shared` bytes, on the
        current device: (stream, *args). In driver mode it calls the function found once, here; it
        goes through launch() while launches are recorded, in a thread whose context is not yet
        current, and in any subclass that changes launch() unless it says its launch() passes an
        already chosen kernel on unchanged (`binds_directly`). Each call adds one to
        launch_counts[counter(kernel)]."""
        counts, slot = self.launch_counts, self.counter(kernel)
        slow = functools.partial(self.launch, kernel, grid, block, shared)
        if not self._binds_directly():
            def launch(stream, *args):
                counts[slot] += 1
                slow(stream, *args)
            return launch
        device, fn = self._direct(kernel)
        return fn.launcher(grid, block, shared, self, device, counts, slot, slow)

    def _direct(self, kernel):
        """(current device, kernel's _DriverLaunch there), the device's context made current."""
        device = self._get_device()
        if device not in getattr(self._thread, "ready", ()):
            self._ensure_context(device)
        st = self._devices.get(device)
        return device, (st.functions.get(kernel) if st is not None else None) or self._function(device, kernel)

    def _binds_directly(self) -> bool:
        """Whether a plan may launch this runtime's functions itself, skipping launch() (see bind)."""
        direct = type(self).launch is TorchCupyRuntime.launch or type(self).binds_directly
        return direct and self.launch_mode == "driver"

    def direct_function(self, kernel) -> int | None:
        """The CUfunction a plan's launch of `kernel` calls on the current device, for a replay made
        outside Python (reimpl/device/native.py); None where bind() would go through launch()."""
        return self._direct(kernel)[1]._fn if self._binds_directly() else None

    def launch(self, kernel, grid, block, shared: int, stream: int, *args) -> None:
        fn = self._current_function(kernel)
        grid, block = dim3(grid), dim3(block)
        if self.launch_mode == "driver":
            fn(grid, block, shared, stream, args)
        else:
            kinds, args = self._signature(kernel, grid, args)
            s = self._streams.get(stream)
            if s is None:
                s = self._streams.setdefault(stream, _Stream(stream))
            fn(grid, block, _pack(kernel, args, kinds), shared_mem=shared, stream=s)
        if self.record is not None:
            self.record.append(Launch(kernel.name, grid, block, int(shared), stream))

    def _driver_function(self, kernel) -> _DriverLaunch:
        fn = self._current_function(kernel)
        return fn if isinstance(fn, _DriverLaunch) else _DriverLaunch(fn, kernel)

    def launch_cooperative(self, kernel, grid, block, shared: int, stream: int, *args) -> None:
        """A launch whose blocks wait for each other (a grid barrier): the driver puts them all on
        the GPU at once. The grid must fit (resident_blocks tells how many an SM holds)."""
        grid, block = dim3(grid), dim3(block)
        self._driver_function(kernel).cooperative(grid, block, shared, stream, args)
        if self.record is not None:
            self.record.append(Launch(kernel.name, grid, block, int(shared), stream))

    def resident_blocks(self, kernel, threads: int, shared: int = 0) -> int:
        """Blocks of `threads` (and `shared` bytes of dynamic shared memory) of `kernel` that one SM of
        the current device holds at once; asked once per device."""
        st = self._state(self._get_device())
        key = (kernel, "resident", threads, shared)
        if key not in st.attributes:
            st.attributes[key] = self._driver_function(kernel).resident_blocks(threads, shared)
        return st.attributes[key]

    def resident_clusters(self, kernel, cluster: int, threads: int, shared: int = 0) -> int:
        """Clusters of `cluster` blocks of `threads` of `kernel` that the current device holds at once
        (a kernel compiled with that cluster shape); asked once per device."""
        st = self._state(self._get_device())
        key = (kernel, "clusters", cluster, threads, shared)
        if key not in st.attributes:
            st.attributes[key] = self._driver_function(kernel).resident_clusters(cluster, threads, shared)
        return st.attributes[key]


class KernelMissing(LookupError):
    """The host code asked for a kernel that the loaded build does not instantiate."""


class CubinRuntime(TorchCupyRuntime):
    """Launches the kernels of a prebuilt cubin (another build of the same source, such as a torch
    release's own) under the same host code. `functions` maps each kernel's name expression to the
    cubin's symbol; `adapt(kernel, grid, args) -> (parameter kinds, args)` bridges a signature that
    differs from ours. Launches go through CuPy's Function call, which packs any signature."""

    def __init__(self, cubin: bytes, functions: dict[str, str], adapt=None):
        super().__init__(launch_mode="cupy")
        self.cubin, self.functions, self.adapt = cubin, functions, adapt

    def _load_module(self, device: int, source):
        import cupy
        with cupy.cuda.Device(device):
            module = cupy.cuda.function.Module()
            module.load(self.cubin)
        return None, module

    def _make_launcher(self, device: int, kernel):
        mangled = self.functions.get(kernel.expr)
        if mangled is None:
            raise KernelMissing(f"{kernel.name} is not instantiated in this build")
        _, module = self._module(device, kernel.source)
        return module.get_function(mangled)

    def _signature(self, kernel, grid, args) -> tuple:
        return self.adapt(kernel, grid, args) if self.adapt is not None else (None, args)


# The runtime the host mirror launches through, per context: each thread (and each asyncio task)
# sees its own, so a thread running reimpl.fast never hands its runtime to one running the mirror,
# and a launch plan's recorder is seen only by the call that is recording.
_current: contextvars.ContextVar = contextvars.ContextVar("reimpl_runtime", default=None)


class Shared:
    """One process-wide instance of `make()`, made by whichever thread asks first (a runtime holds
    loaded modules and plans: two would load everything twice)."""

    def __init__(self, make):
        self._make, self._made, self._lock = make, None, threading.Lock()

    def __call__(self):
        made = self._made
        if made is None:
            with self._lock:
                if self._made is None:
                    self._made = self._make()
                made = self._made
        return made


def current() -> RecordingRuntime | TorchCupyRuntime | None:
    """The runtime `use` set in this context, or None where none is set (the default applies)."""
    return _current.get()


# The process-wide mirror runtime: the mirror's own kernels on torch's current stream.
default = Shared(TorchCupyRuntime)


def get() -> RecordingRuntime | TorchCupyRuntime:
    """What upstream reaches through its globals: the runtime of this context, else the default."""
    rt = _current.get()
    return rt if rt is not None else default()


@contextlib.contextmanager
def use(rt):
    """Run the host mirror against `rt` (e.g. a RecordingRuntime) inside the block, in this context only."""
    token = _current.set(rt)
    try:
        yield rt
    finally:
        _current.reset(token)
