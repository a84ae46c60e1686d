"""The ladder's exercises, declared once: each chapter of docs/ladder/rungs.md ends with one, "write
the next rung". `python -m reimpl exercise NAME` writes a starter: the previous rung's kernel under
the `__global__` name and template the next rung's launcher instantiates, with a TODO saying what to
change and why. `python -m reimpl exercise check NAME FILE` compiles FILE with NVRTC in place of the
rung's own file and, on a GPU, holds it to the rung's stated error bound (reimpl/ladder/accuracy.py)
on the input families and shapes of reimpl/checks/ladder_errors.py, then prints its GB/s beside the
rung's. The last exercise, `torch_bits`, is held to torch's own bits instead, through the judge
(reimpl/testing/verdict.py), on one shape.

How your kernel runs: for a ladder exercise, through the rung's own launcher (reimpl/ladder/rungs.py),
with the rung's template bound to your file while the check runs (`in_place_of`), so it gets exactly
the rung's launch shape, its arguments and its fallbacks; shapes where the launcher would fall back
to another rung are not run. For `torch_bits`, as reimpl/testing/planted.py launches torch's forward
restated (`planted_layer_norm`, the exercise's reference): one (32, 4) block per row.

Why in the testing layer: the check of `torch_bits` runs the judge, which the checks layer may not
import (reimpl/layers.py).
"""
from __future__ import annotations

import contextlib
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: registry entries name files from here
LADDER_CUDA = ROOT / "reimpl" / "ladder" / "cuda"
BITS_SOURCE = "reimpl/testing/cuda/planted_layer_norm.cu"  # torch's forward restated: torch_bits' answer
BITS_TEMPLATE = "planted_layer_norm"
BITS_SHAPE = (64, 1000)  # 250 vectors of 4 on 128 threads: unequal per-thread counts show the tree order
BITS_BLOCK = (32, 4)
BENCH = ("bfloat16", 4096, 1024)  # the GB/s printout: a shape every exercise's rung takes
CPU_ARCH = "sm_90"
# a kernel's definition in a rung's file (its template line comes right before)
_GLOBAL = r"__global__ void {}\("


@dataclass(frozen=True)
class Exercise:
    name: str     # `python -m reimpl exercise NAME`: the rung you write, or torch_bits
    start: str    # the registry rung whose kernel the starter is
    chapter: str  # the anchor of the docs/ladder/rungs.md section that ends with this exercise
    todo: str     # the TODO the starter carries: what to change, and why
    # (old, new) changes to the starter beyond the kernel's name, each found exactly once: where the
    # next rung's template or signature differs from the previous one's
    edits: tuple[tuple[str, str], ...] = ()
    # the starter already meets the check: the previous rung is correct under the next rung's launch,
    # and the idea to add is speed (the GB/s line shows it); tests/gpu/test_exercises_gpu.py holds
    # the check to this
    starter_passes: bool = False

    @property
    def bits(self) -> bool:
        return self.name == "torch_bits"

    @property
    def target(self):
        """The registry entry whose launcher runs your kernel and whose bound holds it (None: torch_bits)."""
        from ..ladder import registry
        return None if self.bits else registry.BY_NAME[self.name]

    @property
    def template(self) -> str:
        return BITS_TEMPLATE if self.bits else self.target.cuda.template

    @property
    def reference(self) -> str:
        """The reference solution, from the repository root: the rung's own file (torch_bits: the planted
        kernel with nothing planted, which gives torch's bits)."""
        return BITS_SOURCE if self.bits else self.target.source

    def line(self) -> str:
        if self.bits:
            what = (f"torch's vectorized_layer_norm_kernel bit for bit, on {BITS_SHAPE[0]} x {BITS_SHAPE[1]} "
                    "in float32, float16 and bfloat16")
            return f"{self.name:14s} {self.start} -> torch's bits: {what}"
        return f"{self.name:14s} {self.start} -> {self.name}: {self.target.idea}"


EXERCISES = (
    Exercise("warp_sums", "naive", "naive", todo="""\
Give each row a warp instead of a thread. Lane l reads elements l, l + 32, l + 64, ... so the 32
lanes of one load read 32 neighbouring elements (one coalesced transaction instead of 32), and one
pass gathers both sum(x) and sum(x * x). Add the lanes' sums with a __shfl_xor_sync butterfly
(every lane gets the totals), take mean = sum / N and var = sum(x * x) / N - mean * mean (clamp it
at 0: after cancellation it can come out negative), and let lane 0 write mean and rstd.
rms_norm (false for this rung): subtract no mean and write no mean. The row of this warp:
blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; its lane: threadIdx.x % 32.

The kernel below is the previous rung: one thread per row. It is correct under this launch (the
threads past the last row return) and meets this rung's looser one-pass bound already, so the check
holds you to that bound while you make it fast: the GB/s line shows the gain.""",
    edits=(("template <typename T, typename T_ACC>\n__global__",
            "template <typename T, typename T_ACC, bool rms_norm>\n__global__"),),
    starter_passes=True),
    Exercise("warp_welford", "warp_sums", "warp_sums", todo="""\
Replace the two running sums with a Welford state per lane (ladder::Welford, folded in with
welford_push), and the butterfly of sums with Chan's merge over the same butterfly
(ladder::warp_merge): then var = M2 / N. Why: E[x^2] - mean^2 cancels when |mean| is much larger
than the spread (the check's offset_1e4 family: rows near 1e4 with a spread of 1 lose every
significant digit of the variance), while Welford's update never subtracts two large sums.

The kernel below is the previous rung, with its rms_norm switch fixed at false: the check fails it
on the Welford bound.""",
    edits=(("template <typename T, typename T_ACC, bool rms_norm>", "template <typename T, typename T_ACC>"),
           ("int64_t M, int64_t N, T_ACC eps) {",
            "int64_t M, int64_t N, T_ACC eps) {\n"
            "  constexpr bool rms_norm = false;  // the previous rung's RMSNorm switch: this rung is LayerNorm's"))),
    Exercise("block_welford", "warp_welford", "warp_welford", todo="""\
Give each row a whole block: row = blockIdx.x, and thread t folds elements t, t + blockDim.x, ...
into its Welford state. Each warp merges its lanes, lane 0 of each warp publishes the warp's state
to shared memory (__shared__ Welford smem[32]), and a tree halves the states until one is left;
ladder::block_merge (common.cuh) does all of that and hands every thread the row's state. Why: a
long row gets blockDim.x threads reading it instead of 32.

The kernel below is the previous rung, still one warp per row: under this launch only the first
blocks find a row (the rest return), so it is correct and the check's bound holds already; the
GB/s line shows what a block per row buys.""", starter_passes=True),
    Exercise("block_cached", "block_welford", "block_welford", todo="""\
Read the row from global memory once. The launcher now passes N * sizeof(T) bytes of dynamic shared
memory: declare `extern __shared__ unsigned char row_bytes[];`, view it as T*, store each element
there as the statistics pass reads it, and let the normalisation read it back from there. Each
thread reads back only the elements it stored itself, so that needs no barrier of its own. The
launcher takes this rung only where the row fits the shared memory a kernel gets without opting in
(launch.row_fits), and falls back to block_welford elsewhere; the check runs your kernel only where
it applies.

The kernel below is the previous rung, which reads the row twice: correct under this launch, so the
check's bound holds already; the GB/s line shows the saved read.""", starter_passes=True),
    Exercise("block_vec", "block_cached", "block_cached", todo="""\
Move 16 bytes per load and store: VEC = 16 / sizeof(T) elements (4 floats, 8 halves) in a
`struct alignas(16) { T v[VEC]; }`, for the global reads, the row cache and the writes of y, so a
thread executes 4 to 8 times fewer memory instructions. The launcher takes this rung only for
16-byte-aligned rows whose size is a multiple of 16 bytes (launch.row_fits_vectors), so N / VEC
vectors cover the row exactly; elsewhere it falls back to block_cached.

The kernel below is the previous rung, correct under this launch: the check's bound holds already,
and the GB/s line shows what the wide loads buy.""", starter_passes=True),
    Exercise("apex", "block_vec", "block_vec", todo="""\
Take apex's shape. The launcher now starts blocks of (32, 4) threads on a grid of (1, min(M, 65535))
and no dynamic shared memory (launch.apex_grid): a block walks rows blockIdx.y, blockIdx.y +
gridDim.y, ..., and a thread's flat index is threadIdx.x + threadIdx.y * blockDim.x. Drop the row
cache and the vectors: each thread folds chunks of 4 adjacent elements with Welford's update (the
tail of fewer than 4 one by one), lanes merge by ladder::warp_merge, and the four warps merge
through __shared__ Welford smem[32] in a halving tree over threadIdx.y; then the same block
normalises its row, and a barrier keeps smem from being overwritten by the next row.
ladder::block_merge assumes a one-dimensional block, so it does not fit here.

The kernel below is the previous rung. Under this launch it is wrong: it only ever takes row
blockIdx.x = 0, and it stores a row cache into shared memory it was given none of, so the check
fails it (possibly with a CUDA error)."""),
    Exercise("warp_regs", "apex", "apex", todo="""\
Hold the row in registers. The launcher now starts four warps per 128-thread block, one row per warp
(launch.per_warp), and takes this rung only for 16-byte-aligned rows of at most 2048 bytes whose size
is a multiple of 16 (elsewhere it falls back to block_vec). Lane l loads 16-byte vectors l, l + 32,
l + 64, l + 96 of its row (up to four, `V held[4]` with VEC = 16 / sizeof(T) elements each), folds
them with Welford's update, merges the lanes with ladder::warp_merge (lanes without elements hold
n = 0, which the merge passes over), and normalises from the registers: one global read, no shared
memory, no barrier. Whole warps leave together, so the early return is safe.

The kernel below is the previous rung. Under this launch it is wrong: every block walks every row
with 128 threads, and only warp 0's state reaches smem[0], so the statistics come from part of
the row; the check fails it."""),
    Exercise("torch_bits", "apex", "torch", todo="""\
Give torch's bits: torch 2.11's vectorized_layer_norm_kernel (docs/upstream/layer_norm_kernel.md),
the kernel the site is about. It is launched as torch launches it: one block of (32, 4) threads per
row, grid M, no dynamic shared memory; X, W, B and Y 16-byte aligned and N a multiple of 4 (the
check's shape keeps to both). What differs from apex's shape, step by step, in torch's order:
thread thrx = threadIdx.x + 32 * threadIdx.y reads 4-element vectors thrx, thrx + 128, ...;
cuWelfordOnlineSum folds each element with count as a float and delta * (1 / new_count), a
reciprocal then a multiply, not a division; lanes merge with __shfl_down_sync at offsets 16, 8, 4,
2, 1, each lane combining (own state, the shuffled one) with cuWelfordCombine's arithmetic
(coef = 1 / count, mean = nA * meanA + nB * meanB); the warps merge through shared memory, warps
ty in [off, 2 off) handing their state to warp ty - off for off = 2, 1; warp 0's lane 0 publishes
the result; rstd = rsqrt(sigma2 / N + eps); y = gamma * (rstd * (x - mean)) + beta in float,
rounded once to T. `python -m reimpl trace --shape 1,64` steps through torch's order on the CPU,
and the check's report names which change of torch's computation reproduces your bits.

rms_norm: the check instantiates false only. The kernel below is apex's under torch's launch: its
statistics are close to torch's but not its bits, so the check fails it.""",
    edits=(("namespace ladder {",
            "using namespace ladder;  // the kernel itself is global, where the check looks for it"),
           ("}  // namespace ladder\n", ""),
           ("template <typename T, typename T_ACC>\n__global__", "template <typename T, bool rms_norm>\n__global__"),
           ("const T* __restrict__ B, T* __restrict__ Y,\n                        float* __restrict__ mean, "
            "float* __restrict__ rstd, int64_t M, int64_t N, T_ACC eps) {",
            "const T* __restrict__ B, float* __restrict__ mean,\n                        "
            "float* __restrict__ rstd, T* __restrict__ Y, const int N, const float eps) {\n"
            "  const int64_t M = gridDim.x;  // torch's launch: one block per row"),
           ("row = blockIdx.y; row < M; row += gridDim.y", "row = blockIdx.x; row < M; row += gridDim.x"))),
)
BY_NAME = {e.name: e for e in EXERCISES}


def names() -> list[str]:
    return [e.name for e in EXERCISES]


def get(name: str) -> Exercise:
    if name not in BY_NAME:
        raise KeyError(f"no exercise {name!r}; exercises: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def list_lines() -> list[str]:
    return [e.line() for e in EXERCISES]


# ---- the starter ---------------------------------------------------------------------------------

def _launch_example(ex: Exercise) -> str:
    """One launch of the rung, computed by its own config (so the comment cannot drift from launch.py)."""
    if ex.bits:
        return (f"for {BITS_SHAPE[0]} rows the check launches grid ({BITS_SHAPE[0]},), block {BITS_BLOCK}, "
                "no dynamic shared memory")
    M, N = 37, 768
    grid, block, smem = ex.target.cuda.config(M, N, 2)
    return (f"for {M} rows of {N} halves the launcher starts grid {tuple(grid)}, block {tuple(block)}, "
            f"{smem} bytes of dynamic shared memory ({ex.target.cuda.config.__name__} in reimpl/ladder/launch.py)")


def _expr(ex: Exercise) -> str:
    if ex.bits:
        return f"{BITS_TEMPLATE}<T, false>"
    extra = "".join(f", {str(a).lower()}" for a in ex.target.cuda.extra)
    return f"ladder::{ex.template}<T, float{extra}>"


def _comment(text: str) -> list[str]:
    return textwrap.wrap(" ".join(text.split()), 100, initial_indent="// ", subsequent_indent="// ",
                         break_on_hyphens=False)


def starter_text(ex: Exercise) -> str:
    """The starter of `ex`: the start rung's file under the next kernel's name, with the TODO."""
    from ..ladder import registry
    start = registry.BY_NAME[ex.start]
    lines = [ln for ln in (ROOT / start.source).read_text().splitlines() if "--8<--" not in ln]
    if lines and lines[0].startswith("// One rung of the study ladder"):
        lines = lines[1:]
    head = _comment(f"Exercise {ex.name}: the {ex.start} rung's kernel ({start.source}), renamed to the "
                    f"kernel the check launches, {_expr(ex)}. Write the next rung where the TODO says, then "
                    "check it:") + [f"//   python -m reimpl exercise check {ex.name} THIS_FILE"]
    text = "\n".join(head + lines) + "\n"
    old = re.compile(_GLOBAL.format(re.escape(start.cuda.template)))
    if len(old.findall(text)) != 1:
        raise ValueError(f"{start.source}: expected one `__global__ void {start.cuda.template}(`")
    text = old.sub(f"__global__ void {ex.template}(", text)
    for a, b in ex.edits:
        if text.count(a) != 1:
            raise ValueError(f"exercise {ex.name}: {a!r} occurs {text.count(a)} times in the starter, not once")
        text = text.replace(a, b)
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if re.search(_GLOBAL.format(ex.template), ln))
    sig = lines[at]
    if not sig.rstrip().endswith("{") and at + 1 < len(lines):  # keep the parameters aligned after the rename
        lines[at + 1] = " " * (sig.index("(") + 1) + lines[at + 1].lstrip()
    todo = _comment(f"TODO(exercise {ex.name}): {_launch_example(ex)}.")
    for para in ex.todo.split("\n\n"):
        todo += ["//"] + _comment(para)
    start_at = at - 1 if lines[at - 1].lstrip().startswith("template") else at
    return "\n".join(lines[:start_at] + todo + lines[start_at:]) + "\n"


def default_path(ex: Exercise) -> Path:
    return Path(f"exercise_{ex.name}.cu")


def write_starter(name: str, out: str | None = None, force: bool = False) -> Path:
    ex = get(name)
    path = Path(out) if out else default_path(ex)
    if path.exists() and not force:
        raise FileExistsError(f"{path} exists: give --out elsewhere, or --force to overwrite it")
    path.write_text(starter_text(ex))
    return path


# ---- compiling FILE in place of the rung's source ------------------------------------------------

class CompileFailed(Exception):
    pass


@dataclass(frozen=True)
class _Name:
    expr: str  # what compile.build instantiates (a bits kernel has no KernelTemplate: its T_ACC is a bool)


def _types():
    from ..ladder.launch import STORAGE
    return STORAGE


def _ctypes() -> str:
    return ", ".join(str(T) for T in _types().values())


def program_source(ex: Exercise, path: Path):
    """(CudaSource of FILE, {dtype name: kernel}) with the rung's instantiations: for a ladder
    exercise the rung's own KernelTemplate signature, bound to FILE; for torch_bits, name expressions."""
    from ..device.compile import CudaSource
    from ..device.kernel_types import KernelTemplate, float_
    from ..ladder import rungs
    path = Path(path).resolve()
    kernels: dict = {}
    source = CudaSource(path.parent, path.name, lambda: list(kernels.values()), (LADDER_CUDA,))
    if ex.bits:
        kernels.update({d: _Name(f"{BITS_TEMPLATE}<{T}, false>") for d, T in _types().items()})
    else:
        tmpl = KernelTemplate(ex.template, rungs.TEMPLATES[ex.template].params, source, "ladder")
        kernels.update({d: tmpl[(T, float_, *ex.target.cuda.extra)] for d, T in _types().items()})
    return source, kernels


def compile_file(ex: Exercise, path: Path, arch: str, use_cache: bool = False):
    """NVRTC's Program for FILE in place of the rung's source, with torch's numerics options; a
    CompileFailed with NVRTC's log (and a hint where the kernel itself is missing) otherwise. With
    `use_cache` the cubin is kept where the runtime looks for it (a GPU run then compiles once)."""
    from ..device import compile as compile_mod, nvrtc
    source, kernels = program_source(ex, path)
    try:
        return compile_mod.build(source, arch, use_cache=use_cache), source, kernels
    except nvrtc.NVRTCError as e:
        raise CompileFailed(_readable(str(e), ex)) from None


def _readable(msg: str, ex: Exercise) -> str:
    """NVRTC's log with the errors of its generated name map (one per instantiation, each three
    lines) folded into one sentence: the file lacks the kernel the launcher instantiates."""
    head, _, log = msg.partition("\n")
    blocks = re.split(r"\n\s*\n", log)
    mine = [b for b in blocks if not b.lstrip().startswith("__nv_name_map(")]
    if len(mine) == len(blocks):
        return msg
    mine = [b for b in mine if not re.fullmatch(r"\s*\d+ errors? detected in the compilation of .*", b)]
    return head + "\n" + "\n\n".join(mine + [
        f"NVRTC cannot instantiate {_expr(ex)}: the file must define `template <...> __global__ void "
        f"{ex.template}(...)`" + ("" if ex.bits else " inside `namespace ladder`")
        + " with the starter's template parameters and signature"])


# ---- running it ------------------------------------------------------------------------------------

@contextlib.contextmanager
def in_place_of(ex: Exercise, source, kernels):
    """The rung's launcher (reimpl/ladder/rungs.py) launches FILE's kernels while this is open: the
    rung's template is bound to FILE's CudaSource, then restored."""
    from ..ladder import rungs
    old = rungs.TEMPLATES[ex.template]
    rungs.TEMPLATES[ex.template] = next(iter(kernels.values())).template
    try:
        yield
    finally:
        rungs.TEMPLATES[ex.template] = old


def _shapes(ex: Exercise, dtype_name: str, quick: bool):
    """(run, skipped): the accuracy shapes where the rung's launcher takes the rung itself (fresh
    tensors are aligned), smallest first; the others name the rung it falls back to."""
    from ..checks import ladder_errors
    from ..ladder import rungs
    itemsize = _types()[dtype_name].itemsize
    run, skipped = [], []
    for M, N in sorted(ladder_errors.shapes(), key=lambda s: (s[0] * s[1], s)):
        if quick and M >= max(ladder_errors.MS):
            continue
        chosen = rungs.choose(ex.target, N, itemsize, True)
        (run if chosen is ex.target else skipped).append((M, N, chosen.name))
    return run, skipped


def _check_ladder_accuracy(ex: Exercise, source, kernels, quick: bool, echo) -> bool | None:
    """True when every (dtype, family) is within the bound, False when one is not, None after a
    CUDA error (which leaves this process unable to launch anything more)."""
    import torch
    from ..checks import ladder_errors
    from ..ladder import accuracy
    ok = True
    echo(f"accuracy: max |y - ref| / max(|ref|, 1) against float64, worst over the shapes of "
         f"reimpl/checks/ladder_errors.py{' with M < ' + str(max(ladder_errors.MS)) if quick else ''}; "
         f"bound: {ex.name}'s (rule {ex.target.bound_family!r}, reimpl/ladder/accuracy.py)")
    measured = 0
    with in_place_of(ex, source, kernels):
        for dname in _types():
            run, skipped = _shapes(ex, dname, quick)
            measured += len(run)
            if skipped:
                by = {N: fb for _, N, fb in skipped}
                echo(f"  {dname}: not run where the launcher falls back to another rung: "
                     + ", ".join(f"N = {N} ({by[N]})" for N in sorted(by)))
            if not run:
                continue
            for family in ladder_errors.FAMILIES:
                limit, why = accuracy.bound(ex.name, dname, family)
                worst = None
                for M, N, _ in run:
                    try:
                        r = ladder_errors.measure(ex.name, getattr(torch, dname), family, M, N)
                        torch.cuda.synchronize()
                    except Exception as e:  # a CUDA error is sticky: nothing after it can run
                        echo(f"  {dname:9s} {family:11s} FAILED on {M} x {N}: {type(e).__name__}: {e}")
                        echo("  stopped: after a CUDA error this process cannot launch anything more")
                        return None
                    nan = worst is not None and worst["rel_err"] != worst["rel_err"]
                    if worst is None or not (nan or r["rel_err"] <= worst["rel_err"]):
                        worst = r  # the larger error, a NaN winning (it must fail the bound, not vanish)
                good = worst["rel_err"] <= limit
                ok &= good
                at = f"{worst['M']} x {worst['N']}"
                echo(f"  {dname:9s} {family:11s} {worst['rel_err']:9.2e} at {at:13s} bound {limit:9.2e}  "
                     f"{'ok' if good else 'EXCEEDS: ' + why}")
    if not measured:
        echo("  no accuracy shape takes this rung: nothing was checked")
        return False
    return ok


def _bits_function(prog, kernels):
    """F.layer_norm's signature, launching FILE's kernel as planted.py launches torch's restated one."""
    import cupy
    import numpy as np
    import torch
    module = cupy.cuda.function.Module()
    module.load(prog.cubin)
    fns = {d: module.get_function(prog.lowered[k.expr]) for d, k in kernels.items()}

    def run(x, normalized_shape, weight=None, bias=None, eps=1e-5):
        if len(normalized_shape) != 1:
            raise ValueError("the torch_bits exercise normalizes the last dimension only")
        N = x.shape[-1]
        x = x.contiguous()
        M = x.numel() // N
        y = torch.empty_like(x)
        mean = torch.empty(M, dtype=torch.float32, device=x.device)
        rstd = torch.empty_like(mean)
        ptr = lambda a: np.uint64(0 if a is None else a.contiguous().data_ptr())  # noqa: E731
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream(x.device).cuda_stream)
        fns[str(x.dtype).removeprefix("torch.")](
            (M,), BITS_BLOCK, (ptr(x), ptr(weight), ptr(bias), ptr(mean), ptr(rstd), ptr(y), np.int32(N),
                               np.float32(eps)), stream=stream)
        shape = tuple(x.shape[:-1]) + (1,)
        return y, mean.view(shape), rstd.view(shape)
    run.module = module  # the function lives as long as its module
    return run


def bits_cases() -> list:
    """torch_bits' cases: one shape, three storage types, ordinary and offset rows, with and without
    the affine tensors (the kernel takes gamma and beta together)."""
    from ..checks.cases import Case
    return [Case("layer_norm", dt, BITS_SHAPE, weight=affine, bias=affine, values=values, seed=11)
            for dt in ("fp32", "fp16", "bf16") for values, affine in (("normal", True), ("offset", True),
                                                                       ("offset", False))]


def _check_bits(fn, echo) -> bool:
    from .verdict import judge
    verdict = judge(fn, "layer_norm", bits_cases(), device="cuda")
    echo("bits: " + str(verdict))
    return verdict.ok


def _gbps(ex: Exercise, source, kernels, mine_bits, echo) -> None:
    import torch
    import torch.nn.functional as F
    from ..checks.bench import gpu_time
    from ..ladder import rungs
    dname, M, N = BENCH
    x = torch.randn(M, N, device="cuda", dtype=getattr(torch, dname))
    w, b = (torch.randn(N, device="cuda", dtype=x.dtype) for _ in range(2))
    if ex.bits:
        fns = {"yours": lambda: mine_bits(x, (N,), w, b),
               "torch's F.layer_norm": lambda: F.layer_norm(x, (N,), w, b)}
    else:
        def mine():
            with in_place_of(ex, source, kernels):
                return rungs.run(ex.name, x, w, b)
        fns = {"yours": mine, f"{ex.name} (the rung)": lambda: rungs.run(ex.name, x, w, b),
               f"{ex.start} (where you started)": lambda: rungs.run(ex.start, x, w, b)}
    ms = gpu_time(fns, reps=10, rounds=3)
    nbytes = 2 * M * N * x.element_size()
    echo(f"GB/s on {dname} {M} x {N} (one read of x, one write of y; median of CUDA-event times): "
         + " · ".join(f"{k} {nbytes / t / 1e6:.0f}" for k, t in ms.items()))


def check(name: str, file: str, quick: bool = False, echo=print) -> bool:
    """Compile FILE in place of the exercise's rung; on a GPU, hold it to the rung's bound (or
    torch's bits) and print GB/s. True only when everything that could be checked passed."""
    import torch
    ex = get(name)
    path = Path(file)
    if not path.is_file():
        echo(f"{file}: no such file")
        return False
    gpu = torch.cuda.is_available()
    arch = "sm_{}{}".format(*torch.cuda.get_device_capability()) if gpu else CPU_ARCH
    target = "torch's bits" if ex.bits else f"the {ex.name} rung"
    echo(f"exercise {ex.name}: {file} in place of {ex.reference} ({target})")
    try:
        prog, source, kernels = compile_file(ex, path, arch, use_cache=gpu)
    except CompileFailed as e:
        echo(f"compile: FAILED for {arch} as {_expr(ex)}, T = {_ctypes()}:")
        echo(textwrap.indent(str(e), "  "))
        return False
    echo(f"compile: ok for {arch}, {_expr(ex)} with T = {_ctypes()} (NVRTC, torch's numerics options)")
    if prog.log:
        echo(textwrap.indent(prog.log, "  "))
    if not gpu:
        what = "torch's bits" if ex.bits else f"the accuracy against {ex.name}'s error bound"
        echo(f"not checked: {what} and GB/s, which need a CUDA GPU (torch.cuda.is_available() is False here)")
        return True
    if ex.bits:
        fn = _bits_function(prog, kernels)
        ok = _check_bits(fn, echo)
    else:
        fn = None
        ok = _check_ladder_accuracy(ex, source, kernels, quick, echo)
    if ok is None:
        echo("GB/s: not timed (the kernel raised a CUDA error)")
    else:
        try:
            _gbps(ex, source, kernels, fn, echo)
        except Exception as e:  # a kernel that fails its cases may also fault here
            echo(f"GB/s: not timed ({type(e).__name__}: {e})")
            ok = False
    echo("PASSED" if ok else "FAILED")
    return bool(ok)
