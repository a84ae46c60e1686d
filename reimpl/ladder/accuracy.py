"""Each rung's stated accuracy, per input family and storage type: a bound on the error of y
against a float64 reference, relative to the output's scale (|y - ref| / max(|ref|, 1)). These are
the numbers the ladder pages state and tests/gpu/test_ladder_gpu.py asserts; the reasons say where
each comes from (u = 2^-24, float32's unit roundoff; the one-pass and offset bounds are loose on
purpose: they state an order of magnitude, not a fit to one run).
"""
from __future__ import annotations

# rounding y to the storage type: half an ulp at the top of a binade, relative
STORAGE_ROUNDING = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}

# a Triton gradient may be this many times further from float64 than torch's own, plus the store
BACKWARD_FACTOR = 4


def bound(rung: str, dtype: str, family: str) -> tuple[float, str]:
    """(bound on the relative error, the reason) for ladder rung `rung` (its entry in registry.py
    names the rule, `bound_family`) on input family `family`."""
    from .registry import BY_NAME
    return family_bound(BY_NAME[rung].bound_family, dtype, family)


def family_bound(rule: str, dtype: str, family: str) -> tuple[float, str]:
    """The bound of one rule: "two_pass" (mean by a plain sum, then the variance about it),
    "one_pass" (E[x^2] - mean^2), "welford", or "sum_of_squares" (RMSNorm: no mean at all)."""
    store = STORAGE_ROUNDING[dtype]
    if rule == "sum_of_squares":
        # first: with no mean subtracted, neither an offset nor a constant row can cancel anything
        return store + 64 * 2.0 ** -24, "a sum of squares cannot cancel: a few u"
    if family == "offset_1e4":
        if rule == "one_pass":
            return float("inf"), "E[x^2] - mean^2 cancels: no bound (asserted as a measured fact instead)"
        # x - mean loses what the mean's rounding (about |mean| * sqrt(N) * u) is of the row's spread;
        # rows of 3 values near 1e4 can have a spread of a few thousandths
        return 2.0 ** -2, "mean rounding relative to the spread: mean/std · sqrt(N) · u"
    if family == "constant" and rule in ("two_pass", "one_pass"):
        # sum(x) of N equal values is not exact, and (x - mean) is then scaled by eps^-1/2 = 316
        return 0.5, "inexact sum of equal values, amplified by 1/sqrt(eps): N · u · x · 316"
    if family == "constant" and rule == "welford":
        return store, "Welford's mean of equal values is exact, so only the store rounds"
    if rule == "one_pass":
        # short rows (N = 3) make mean^2 a large part of E[x^2]: hundreds of u after cancellation
        return store + 2.0 ** -10, "one-pass variance: cancellation even at zero mean for short rows"
    if rule not in ("two_pass", "welford"):
        raise ValueError(f"no LayerNorm bound rule {rule!r}")
    # two-pass and Welford: order (1 + |mean|/std) * sqrt(N) * u, and rows of 3 random values reach
    # |mean|/std of tens: 2^-15 is 512 u
    return store + 2.0 ** -15, "stable statistics: (1 + mean/std) · sqrt(N) · u"


# ---- The siblings (reimpl/ladder/batchnorm.py, reimpl/ladder/softmax.py) ----
# Both are checked against torch itself (its BatchNorm and its softmax are not bit targets here), so
# each bound covers our error and torch's: an order of magnitude from the error analysis, stated
# before the GPU run, not a fit to it.

# one ulp of the storage type at magnitude [1, 2), relative: what two roundings of nearly equal
# float32 values can differ by
STORAGE_ULP = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
BN_FAMILIES = ("normal", "offset_10")  # offset_10: x + 10, so |mean| / std is about 10
# our kernel's threads fold at most this many values each in the checked shapes (count / 512)
BN_VALUES_PER_THREAD = 256


def batchnorm_bound(dtype: str, what: str) -> tuple[float, str]:
    """Bound on |ours - torch| / max(|torch|, 1) for BatchNorm's output (`what` = "y") or its
    updated running statistics ("running"), `dtype` being the compared tensor's storage type."""
    # the statistics come from another reduction order: each side's mean is off by about
    # |mean| k u and its variance by var k u, with k = 256 values per thread plus log2(512) tree
    # levels; y = (x - mean) / std moves by (1 + |mean|/std) k u, twice (ours and torch's)
    base = 2 * (1 + 10) * (BN_VALUES_PER_THREAD + 9) * 2.0 ** -24
    why = "statistics in another order: 2 · (1 + |mean|/std) · (k + log2 t) · u, |mean|/std ≤ 10, k ≤ 256, t = 512"
    if dtype == "float32":
        return base, why
    if what == "y":
        return base + STORAGE_ULP[dtype], why + "; then the stores may round to adjacent values: one ulp"
    # a running statistic is rounded to storage at every update on both sides; an earlier difference
    # shrinks by (1 - momentum) per update, so a few updates can leave two ulps
    return base + 2 * STORAGE_ULP[dtype], why + "; rounded to storage at every update: two ulps after a few updates"


SOFTMAX_FAMILIES = ("normal", "large", "neg_inf", "pos_inf")
MANTISSA = {"float32": 23, "float16": 10, "bfloat16": 7}


def softmax_bound(threads: int, dtype: str, N: int) -> tuple[int, str]:
    """Bound on the distance to torch.softmax, in ulps of the storage type at torch's output, for a
    kernel whose rows are reduced by `threads` threads."""
    import math
    # relative error of one side, in u: <= 6 u per element a thread folds (the add, the term's exp
    # and x - m, the online rescale), 4 u per tree level, 3 u for the last exp and the division.
    # torch's threads fold at most ceil(N / 32) elements each (a row has at least one warp).
    ours = 6 * -(-N // threads) + 4 * int(math.log2(threads)) + 3
    theirs = 6 * -(-N // 32) + 4 * 5 + 3
    fp32 = ours + theirs  # a relative error of c u is less than c ulps
    why = "float32: (6 · ceil(N/t) + 4 · log2 t + 3) u ours plus (6 · ceil(N/32) + 23) u torch's"
    if dtype == "float32":
        return fp32, why
    # the two float32 results differ by fp32 float32-ulps, a 2^(23 - m)-th of that in storage ulps,
    # and their roundings by at most one more
    return 1 + (fp32 >> (23 - MANTISSA[dtype])), why + "; scaled to the storage type's ulp, plus one for the rounding"
