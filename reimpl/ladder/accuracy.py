"""Each rung's stated accuracy, per input family and storage type: a bound on the error of y
against a float64 reference, relative to the output's scale (|y - ref| / max(|ref|, 1)). These are
the numbers the ladder pages state and tests/gpu/test_ladder_gpu.py asserts; the reasons say where
each comes from (u = 2^-24, float32's unit roundoff; the one-pass and offset bounds are loose on
purpose: they state an order of magnitude, not a fit to one run).
"""
from __future__ import annotations

# rounding y to the storage type: half an ulp at the top of a binade, relative
STORAGE_ROUNDING = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}

WELFORD_RUNGS = ("warp_welford", "block_welford", "block_cached", "block_vec", "apex")
TWO_PASS_RUNGS = ("naive", "triton_ln")  # mean by a plain sum, then the variance about it
# a Triton gradient may be this many times further from float64 than torch's own, plus the store
BACKWARD_FACTOR = 4


def bound(rung: str, dtype: str, family: str) -> tuple[float, str]:
    """(bound on the relative error, the reason)."""
    store = STORAGE_ROUNDING[dtype]
    if family == "offset_1e4":
        if rung == "warp_sums":
            return float("inf"), "E[x^2] - mean^2 cancels: no bound (asserted as a measured fact instead)"
        # x - mean loses what the mean's rounding (about |mean| * sqrt(N) * u) is of the row's spread;
        # rows of 3 values near 1e4 can have a spread of a few thousandths
        return 2.0 ** -2, "mean rounding relative to the spread: mean/std · sqrt(N) · u"
    if family == "constant" and rung in TWO_PASS_RUNGS + ("warp_sums",):
        # sum(x) of N equal values is not exact, and (x - mean) is then scaled by eps^-1/2 = 316
        return 0.5, "inexact sum of equal values, amplified by 1/sqrt(eps): N · u · x · 316"
    if family == "constant" and rung in WELFORD_RUNGS:
        return store, "Welford's mean of equal values is exact, so only the store rounds"
    if rung == "warp_sums":
        # short rows (N = 3) make mean^2 a large part of E[x^2]: hundreds of u after cancellation
        return store + 2.0 ** -10, "one-pass variance: cancellation even at zero mean for short rows"
    if rung in ("rms_warp_sumsq", "triton_rms"):
        return store + 64 * 2.0 ** -24, "a sum of squares cannot cancel: a few u"
    # two-pass and Welford: order (1 + |mean|/std) * sqrt(N) * u, and rows of 3 random values reach
    # |mean|/std of tens: 2^-15 is 512 u
    return store + 2.0 ** -15, "stable statistics: (1 + mean/std) · sqrt(N) · u"
