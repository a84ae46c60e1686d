"""Judge your own LayerNorm/RMSNorm against torch's bits, and learn why it differs.

    from reimpl.testing import assert_matches_torch, assert_batch_invariant
    assert_matches_torch(my_layer_norm, "layer_norm")                 # forward, the whole case matrix
    assert_matches_torch(my_layer_norm, "layer_norm", backward=True)  # dX, dweight, dbias by autograd
    assert_batch_invariant(my_layer_norm, "layer_norm")               # a row's bits, whatever the batch

A failure reports how many elements differ, in which rows, the ULP distances, NaN/inf positions that
disagree and the first differing element in hex, then the diagnosis: which one change of torch's
computation (flush-to-zero, no FMA contraction, 1/sqrtf, two-pass or one-pass variance, another
tree or thread count, the fallback kernels' rounding, float64, eps elsewhere, per-op casts)
reproduces your bits. `python -m reimpl judge MODULE:FUNCTION` does the same from the shell.

Modules:
  bits            bits, ULP distance, the difference report
  diagnosis       the diagnosis on failing rows (NumPy only: also from saved tensors on a CPU)
  verdict         the case matrix, the reference (torch on a GPU, the emulator on a CPU), the verdict
  batch           batch invariance, forward and backward
  pytest_plugin   fixtures over the case matrix (entry point pytest11)
  planted         GPU kernels with one change of torch's computation planted, the diagnosis's proof
  proof           the cases and kernels that proof runs on the GPU, and the summaries the results hold
  triton_examples the worked example's Triton kernels (torch's tree in Triton, with changes to plant)
  exercises       the study ladder's exercises: starters, and the check of a reader's kernel

Layer: testing. May import: checks, emulator, ladder, mirror, device.
"""
from __future__ import annotations

__all__ = ["assert_matches_torch", "judge", "default_cases", "assert_batch_invariant", "batch_invariance",
           "compare", "diagnose", "Rows"]


def __getattr__(name):
    # lazy: the diagnosis needs NumPy only, the judge needs torch
    if name in ("assert_matches_torch", "judge", "default_cases"):
        from . import verdict as _j
        return getattr(_j, name)
    if name in ("assert_batch_invariant", "batch_invariance"):
        from . import batch as _b
        return getattr(_b, name)
    if name == "compare":
        from .bits import compare
        return compare
    if name in ("diagnose", "Rows"):
        from . import diagnosis as _d
        return getattr(_d, name)
    raise AttributeError(name)
