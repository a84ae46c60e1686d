"""Every study kernel, declared once: the ladder's LayerNorm/RMSNorm rungs (CUDA and Triton) and
LayerNorm's siblings (softmax, BatchNorm). Everything else is read off this table: the launchers'
kernel lists and instantiations, the stated error bounds (through `bound_family`), the error and
bandwidth measurements and their GPU tests, the CPU tests, the benchmark's kernel list, the site
tables' row order and the rung index on the ladder pages.

Adding a rung: write its kernel in its own file under cuda/ (named after its `__global__`
template, including ladder.cuh) and add one `Entry` below, in climbing order.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from .launch import (Cuda, apex_grid, held_applies, held_plan, held_threads, per_block, per_block_cached, per_thread,
                     per_warp, regs_config, regs_threads, row_fits, row_fits_vectors, BLOCK)

# the error-bound families reimpl/ladder/accuracy.py states a bound for
BOUND_FAMILIES = ("two_pass", "one_pass", "welford", "sum_of_squares", "softmax", "batchnorm")
GROUPS = ("ladder", "softmax", "batchnorm")


@dataclass(frozen=True)
class Entry:
    name: str           # the name the launcher, the results files and the tables use
    group: str          # "ladder" (a LayerNorm or RMSNorm rung), "softmax" or "batchnorm"
    idea: str           # the one idea it adds, one sentence
    credit: str         # whose idea it is: the paper, post or project
    source: str         # the file its kernel is in, from the repository root
    launcher: str       # "module:function"; ladder rungs and softmax kernels take the name first
    bound_family: str   # the rule reimpl/ladder/accuracy.py states its error bound by
    run: str            # how a reader runs it: the GPU test that checks it
    rms_norm: bool = False
    cuda: Cuda | None = None  # launched by name from a CUDA file: template, launch shape, fallback
    # "module:function" of its backward, (name, dy, x, weight, bias, mean, rstd) -> (dx, dweight, dbias)
    backward: str | None = None
    backward_source: str | None = None  # the file its backward kernels are in, where not `source`

    def launch_fn(self):
        """The launcher itself (imported on first use: the table imports no launcher)."""
        module, _, fn = self.launcher.partition(":")
        return getattr(importlib.import_module(module), fn)

    def backward_fn(self):
        module, _, fn = self.backward.partition(":")
        return getattr(importlib.import_module(module), fn)


# apex's setup.py builds fused_layer_norm_cuda with nvcc -maxrregcount=50 -O3 --use_fast_math: an
# approximate division in every Welford step, subnormals flushed. Its rung is built the same way.
APEX_NVCC = ("--use_fast_math", "--maxrregcount=50")
_CUDA_RUNG = "reimpl.ladder.rungs:run"
_TRITON_RUNG = "reimpl.ladder.triton_rungs:run"
_CUDA_BACKWARD, _CUDA_BACKWARD_FILE = "reimpl.ladder.backward:run", "reimpl/ladder/cuda/ln_row_held_backward.cu"
_TRITON_BACKWARD = "reimpl.ladder.triton_rungs:backward_run"
_LADDER_TEST = "pytest tests/gpu/test_ladder_gpu.py -k "
_SIBLINGS_TEST = "pytest tests/gpu/test_siblings_gpu.py -k "
_WELFORD_CHAN = "Welford (1962) for the update; Chan, Golub and LeVeque (1979) for the merge"

ENTRIES = (
    Entry("naive", "ladder",
          "the plain loop a textbook writes: one thread per row, a mean pass, a variance pass",
          "the textbook two-pass definition of the variance",
          "reimpl/ladder/cuda/ln_naive_two_pass.cu", _CUDA_RUNG, "two_pass", _LADDER_TEST + "naive",
          cuda=Cuda("ln_naive_two_pass", per_thread, 1)),
    Entry("warp_sums", "ladder",
          "one warp per row with coalesced loads; one pass gathers sum and sum of squares",
          "the one-pass textbook formula E[x²] − mean²; warp shuffles as in Luitjens, "
          "\"Faster Parallel Reductions on Kepler\" (NVIDIA, 2014)",
          "reimpl/ladder/cuda/ln_warp_sums.cu", _CUDA_RUNG, "one_pass",
          _LADDER_TEST + '"warp_sums and not rms"', cuda=Cuda("ln_warp_sums", per_warp, 32, (False,))),
    Entry("warp_welford", "ladder",
          "as warp_sums, but each lane runs Welford's update and lanes merge with Chan's formula",
          _WELFORD_CHAN, "reimpl/ladder/cuda/ln_warp_welford.cu", _CUDA_RUNG, "welford",
          _LADDER_TEST + "warp_welford", cuda=Cuda("ln_warp_welford", per_warp, 32)),
    Entry("block_welford", "ladder",
          "one block per row; warps merge through a shared-memory tree",
          "OneFlow's LayerNorm (its block-per-row path); torch's compute_stats has the same shape",
          "reimpl/ladder/cuda/ln_block_welford.cu", _CUDA_RUNG, "welford", _LADDER_TEST + "block_welford",
          cuda=Cuda("ln_block_welford", per_block, BLOCK)),
    Entry("block_cached", "ladder",
          "as block_welford, but the row stays in shared memory: one global read",
          "OneFlow's LayerNorm (its shared-memory path)",
          "reimpl/ladder/cuda/ln_block_cached.cu", _CUDA_RUNG, "welford", _LADDER_TEST + "block_cached",
          cuda=Cuda("ln_block_cached", per_block_cached, BLOCK, applies=row_fits, fallback="block_welford")),
    Entry("block_vec", "ladder",
          "as block_cached, with 128-bit loads and stores",
          "Luitjens, \"Increase Performance with Vectorized Memory Access\" (NVIDIA, 2013); OneFlow's packed loads",
          "reimpl/ladder/cuda/ln_block_vec.cu", _CUDA_RUNG, "welford", _LADDER_TEST + "block_vec",
          cuda=Cuda("ln_block_vec", per_block_cached, BLOCK, applies=row_fits_vectors, fallback="block_cached")),
    Entry("apex", "ladder",
          "apex's shape: (32, 4) blocks striding over rows, 4-element chunks, then apply",
          "NVIDIA apex's fused LayerNorm (cuWelfordMuSigma2, cuApplyLayerNorm)",
          "reimpl/ladder/cuda/ln_apex.cu", _CUDA_RUNG, "welford", _LADDER_TEST + "apex",
          cuda=Cuda("ln_apex", apex_grid, 128, numerics=APEX_NVCC)),
    Entry("warp_regs", "ladder",
          "one warp per row with the whole row in registers, read as 16-byte vectors: one global read, "
          "no shared memory, no barrier",
          "OneFlow's LayerNorm (its warp-per-row path, the row held in registers)",
          "reimpl/ladder/cuda/ln_warp_regs.cu", _CUDA_RUNG, "welford", _LADDER_TEST + "warp_regs",
          cuda=Cuda("ln_warp_regs", per_warp, 32,
                    applies=lambda N, itemsize, aligned: aligned and (N * itemsize) % 16 == 0 and N * itemsize <= 2048,
                    fallback="block_vec")),
    Entry("row_held", "ladder",
          "the row held in registers and laid out by its width: 4 to 32 lanes of a warp for short rows, a "
          "block for middle ones, a thread-block cluster merging its blocks' moments for long ones; 16-byte "
          "words, read once, two passes over the held row",
          "OneFlow's LayerNorm (layer_norm.cuh: dispatch by width, the row in registers); the cluster split "
          "after quack (Dao-AILab, CuTe DSL); Chan, Golub and LeVeque (1979) for the merge",
          "reimpl/ladder/cuda/ln_row_held.cu", _CUDA_RUNG, "two_pass", _LADDER_TEST + '"row_held and not rms"',
          cuda=Cuda("ln_row_held", None, held_threads, (False,), applies=held_applies, fallback="block_vec",
                    plan=held_plan), backward=_CUDA_BACKWARD, backward_source=_CUDA_BACKWARD_FILE),
    Entry("rms_warp_sumsq", "ladder",
          "RMSNorm's rung: one warp per row, one pass of sum of squares",
          "RMSNorm: Zhang and Sennrich (2019)",
          "reimpl/ladder/cuda/ln_warp_sums.cu", _CUDA_RUNG, "sum_of_squares", _LADDER_TEST + "rms_warp_sumsq",
          rms_norm=True, cuda=Cuda("ln_warp_sums", per_warp, 32, (True,))),
    Entry("rms_row_held", "ladder",
          "RMSNorm on row_held's layout: the sum of squares over the held row, merged over a cluster's blocks",
          "OneFlow's RMSNorm (the same dispatch by width); RMSNorm: Zhang and Sennrich (2019)",
          "reimpl/ladder/cuda/ln_row_held.cu", _CUDA_RUNG, "sum_of_squares", _LADDER_TEST + "rms_row_held",
          rms_norm=True, cuda=Cuda("ln_row_held", None, held_threads, (True,), applies=held_applies,
                                   fallback="rms_warp_sumsq", plan=held_plan),
          backward=_CUDA_BACKWARD, backward_source=_CUDA_BACKWARD_FILE),
    Entry("triton_ln", "ladder",
          "a tile of whole rows a program (several where rows are short), held in registers, its shape "
          "from two measured numbers (triton_rungs.fwd_plan); backward kernels too",
          "Triton's layer-norm tutorial (Tillet et al.)",
          "reimpl/ladder/triton_rungs.py", _TRITON_RUNG, "two_pass", _LADDER_TEST + "triton_ln",
          backward=_TRITON_BACKWARD),
    Entry("triton_rms", "ladder",
          "triton_ln's program for RMSNorm: no mean, one sum of squares",
          "Triton's layer-norm tutorial, applied to RMSNorm (Zhang and Sennrich, 2019)",
          "reimpl/ladder/triton_rungs.py", _TRITON_RUNG, "sum_of_squares", _LADDER_TEST + "triton_rms",
          rms_norm=True, backward=_TRITON_BACKWARD),
    Entry("three_pass", "softmax",
          "the safe softmax: a block finds the row's maximum, sums exp(x - max), then writes",
          "the textbook safe softmax (subtract the maximum before exp)",
          "reimpl/ladder/cuda/softmax.cu", "reimpl.ladder.softmax:run", "softmax", _SIBLINGS_TEST + "three_pass",
          cuda=Cuda("softmax_three_pass", per_block, BLOCK)),
    Entry("online_warp", "softmax",
          "one warp per row; one pass builds (m, d) per lane, lanes merge, then the write",
          "Milakov and Gimelshein, \"Online normalizer calculation for softmax\" (2018)",
          "reimpl/ladder/cuda/softmax.cu", "reimpl.ladder.softmax:run", "softmax", _SIBLINGS_TEST + "online_warp",
          cuda=Cuda("softmax_online_warp", per_warp, 32)),
    Entry("online_block", "softmax",
          "one block per row; (m, d) per thread, merged by shuffles, then through shared memory",
          "Milakov and Gimelshein (2018), with the block reduction of the ladder's rungs",
          "reimpl/ladder/cuda/softmax.cu", "reimpl.ladder.softmax:run", "softmax", _SIBLINGS_TEST + "online_block",
          cuda=Cuda("softmax_online_block", per_block, BLOCK)),
    Entry("one_read", "softmax",
          "the row read once, into registers with 16-byte loads or into shared memory with cp.async, and "
          "written from there; the maximum reduced first, then one exp per element; the longest rows split over a "
          "thread-block cluster, whose blocks merge (m, d) online and rescale once per block",
          "Milakov and Gimelshein (2018); the row held on chip and split over a cluster after quack "
          "(Dao-AILab, CuTe DSL) and OneFlow's softmax",
          "reimpl/ladder/cuda/softmax.cu", "reimpl.ladder.softmax:run", "softmax", _SIBLINGS_TEST + "one_read",
          cuda=Cuda("softmax_online_regs", regs_config, regs_threads)),
    Entry("bn_kernel", "batchnorm",
          "LayerNorm's Welford reduction turned to the batch: one block per channel, then the broadcast",
          "Ioffe and Szegedy (2015) for BatchNorm; " + _WELFORD_CHAN,
          "reimpl/ladder/cuda/batchnorm.cu", "reimpl.ladder.batchnorm:batch_norm_train_forward", "batchnorm",
          _SIBLINGS_TEST + '"batchnorm and kernel"'),
    Entry("bn_split", "batchnorm",
          "split each channel's reduction over many blocks, merge their Welford states with Chan's formula; "
          "channels_last read as columns, large ones in one cooperative launch; the backward split the same way",
          "Chan, Golub and LeVeque (1979) for the merge; the split reduction after apex's SyncBatchNorm and "
          "torch's batch_norm_collect_statistics_channels_last_kernel; the tile barrier after CUTLASS's generic "
          "barrier",
          "reimpl/ladder/cuda/batchnorm_split.cu", "reimpl.ladder.batchnorm_split:batch_norm_train_forward_split",
          "batchnorm", _SIBLINGS_TEST + '"batchnorm and split"'),
)

BY_NAME = {e.name: e for e in ENTRIES}
RUNGS = tuple(e for e in ENTRIES if e.group == "ladder")
CUDA_RUNGS = tuple(e for e in RUNGS if e.cuda is not None)
SOFTMAX = tuple(e for e in ENTRIES if e.group == "softmax")
BACKWARD_RUNGS = tuple(e for e in RUNGS if e.backward is not None)


def of_group(group: str) -> tuple[Entry, ...]:
    return tuple(e for e in ENTRIES if e.group == group)


def table_order(entries) -> tuple[str, ...]:
    """The order the site's tables list kernels in: LayerNorm before RMSNorm, each as declared."""
    return tuple(e.name for e in entries if not e.rms_norm) + tuple(e.name for e in entries if e.rms_norm)
