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
BN_MEAN_OVER_STD = 10  # the largest |mean| / std of the checked inputs (offset_10)
# bn_kernel's threads fold at most this many values each in the checked shapes (count / 512)
BN_VALUES_PER_THREAD = 256
# Rounding levels on one side's statistics. bn_kernel: k values per thread, then log2(512) tree
# levels. bn_split: fewer values per thread (k / U chunk merges plus the U additions inside a
# chunk), log2 of its block's (or tile's row-) threads, then the S slice states, merged S / 32 in a
# row by each lane of the finalize's warp and then over its 5 butterfly levels. Its plan
# (batchnorm_split.py) keeps that sum within the same number on every checked shape
# (tests/test_batchnorm_split_cpu.py asserts it), so one formula covers both kernels; torch's side
# is taken to need no more.
BN_LEVELS = BN_VALUES_PER_THREAD + 9
BN_WHAT = ("y", "running", "stats", "dx", "dweight", "dbias")


def batchnorm_bound(dtype: str, what: str) -> tuple[float, str]:
    """Bound on BatchNorm's distance to torch, `dtype` being the compared tensor's storage type.
    Forward, on |ours - torch| / max(|torch|, 1): the output ("y"), the updated running statistics
    ("running"), save_mean and save_invstd ("stats", float32). Backward, on |ours - torch| / scale:
    a sum's error is bounded by its terms' magnitudes, not by its value, which cancellation can make
    as small as it likes, so each gradient is measured against the magnitudes it is made of (x̂ =
    (x - mean) * invstd, E a mean over the channel; reimpl/checks/siblings_errors.py computes them):
    "dbias" against Σ|dy|, "dweight" against Σ|dy| (1 + |x̂|), "dx" against
    invstd |w| (|dy| + E|dy| + E|dy x̂|) (1 + |x̂|)."""
    if what not in BN_WHAT:
        raise ValueError(f"batchnorm_bound: what must be one of {BN_WHAT}, not {what!r}")
    # the statistics come from another reduction order: each side's mean is off by about
    # |mean| L u and its variance by var L u, L = BN_LEVELS; y = (x - mean) / std moves by
    # (1 + |mean|/std) L u, twice (ours and torch's)
    m, L, u = BN_MEAN_OVER_STD, BN_LEVELS, 2.0 ** -24
    base = 2 * (1 + m) * L * u
    why = ("statistics in another order: 2 · (1 + |mean|/std) · L · u, |mean|/std ≤ 10, L = k + log2 t "
           "(+ S/32 + 5 for bn_split's S slices) ≤ 265 (bn_kernel: k ≤ 256, t = 512)")
    store = 0.0 if dtype == "float32" else STORAGE_ULP[dtype]
    # a 16-bit store rounds each side's float32 result: adjacent values, one ulp of the value, which
    # the backward's scales bound from above
    stored = "; then the stores may round to adjacent values: one ulp"
    if what == "stats":
        return base, why
    if what == "y":
        return base + store, why + (stored if store else "")
    if what == "running":
        if not store:
            return base, why
        # a running statistic is rounded to storage at every update on both sides; an earlier
        # difference shrinks by (1 - momentum) per update, so a few updates can leave two ulps
        return base + 2 * store, why + "; rounded to storage at every update: two ulps after a few updates"
    levels = "L ≤ 265 as for y, |mean|/std ≤ 10"
    if what == "dbias":
        # sum(dy) in another order on each side: L u of the sum of magnitudes, twice
        return (2 * L * u + store,
                f"sum(dy) in another order: 2 · L · u of Σ|dy|, {levels}" + (stored if store else ""))
    if what == "dweight":
        # sum(dy * (x - mean)) * invstd on each side: the sum's order (L u Σ|dy x̂|), the mean's
        # error times Σ|dy| ((|mean|/std) L u), invstd's relative error ((1 + |mean|/std) L u)
        return (4 * (1 + m) * L * u + store,
                f"Σ dy (x − mean) · invstd: its order, the mean's error times Σ|dy|, invstd's error: "
                f"4 · (1 + |mean|/std) · L · u of Σ|dy| (1 + |x̂|), {levels}" + (stored if store else ""))
    # dx = (dy - mean_dy - x̂ · invstd · mean_dy_xmu) · invstd · w, each side: mean_dy is off by
    # L u E|dy|; mean_dy_xmu by L u (E|dy x̂| + |mean|/std E|dy|) / invstd, however much of it
    # cancellation leaves, and that error is multiplied by |x̂| invstd; the mean's error shifts x̂ by
    # (|mean|/std) L u; invstd's relative error (1 + |mean|/std) L u enters once outside and twice in
    # the projection. Summed: (1 + |mean|/std) L u (|dy| + 2 E|dy| + E|dy x̂| + |x̂| (E|dy| + 4 E|dy x̂|))
    # times invstd |w|, within 4 (1 + |mean|/std) L u of the scale; twice for both sides.
    return (8 * (1 + m) * L * u + store,
            f"mean_dy and the projection's mean_dy_xmu are sums, cancelling as they may; with invstd's error: "
            f"8 · (1 + |mean|/std) · L · u of invstd |w| (|dy| + E|dy| + E|dy x̂|) (1 + |x̂|), {levels}"
            + (stored if store else ""))


SOFTMAX_FAMILIES = ("normal", "large", "neg_inf", "pos_inf")
MANTISSA = {"float32": 23, "float16": 10, "bfloat16": 7}
MIN_EXP = {"float32": -126, "float16": -14, "bfloat16": -126}  # the smallest normal's exponent


def fast_exp_u(dtype: str) -> int:
    """What the one-read kernels' exp adds, in u = 2^-24, where they take ex2.approx.ftz of
    (x - m) log2(e) + 64 (16-bit storage): 2^-22 = 4 u of its own; the FFMA's rounding, at most
    2^-24 (64 + |x - m| log2 e) in the exponent, (44 + |x - m|) u on the result; and x - m rounded
    where torch's expf takes the same difference unrounded by a second step, |x - m| u. An exp that
    does not underflow to 0 has |x - m| < 104: 4 + 148 + 104 = 256 u."""
    return 0 if dtype == "float32" else 256


# A row split into parts that each take their exps against their own maximum m_p and are rescaled by
# exp(m_p - m) (the one-read kernels' warps, and every block of a cluster): the exponent is rounded
# twice (x - m_p, m_p - m) where torch rounds x - m once, at most 2 |x - m| u apart, and |x - m| < 104
# wherever the output does not underflow; plus the rescale's own exp and the product.
SPLIT_U = 2 * 104 + 3


def softmax_bound(threads: int, dtype: str, N: int, parts: int = 1) -> tuple[int, str]:
    """Bound on the distance to torch.softmax, in ulps of the storage type at torch's output, for a
    kernel whose rows are reduced by `threads` threads, in `parts` parts rescaled apart."""
    import math
    # relative error of one side, in u: <= 6 u per element a thread folds (the add, the term's exp
    # and x - m, the online rescale), 4 u per tree level, 3 u for the last exp and the division.
    # torch's threads fold at most ceil(N / 32) elements each (a row has at least one warp).
    ours = 6 * -(-N // threads) + 4 * int(math.log2(threads)) + 3 + fast_exp_u(dtype) + (SPLIT_U if parts > 1 else 0)
    theirs = 6 * -(-N // 32) + 4 * 5 + 3
    fp32 = ours + theirs  # a relative error of c u is less than c ulps
    count = ("(6 · ceil(N/t) + 4 · log2 t + 3) u ours (t: the threads that reduce a row; u = 2^-24) plus "
             "(6 · ceil(N/32) + 23) u torch's; a row split into "
             f"parts (warps, a cluster's blocks) whose exps take their own maximum, {SPLIT_U} u more for each part's "
             "rescale")
    if dtype == "float32":
        return fp32, "float32: " + count
    # the two float32 results differ by fp32 float32-ulps, a 2^(23 - m)-th of that in storage ulps,
    # and their roundings by at most one more
    return 1 + (fp32 >> (23 - MANTISSA[dtype])), (
        f"bf16 and fp16: the float32 count, {count}, plus {fast_exp_u('bfloat16')} u for ex2.approx; scaled to the "
        "storage type's ulp, plus one for the rounding")


def cross_entropy_bound(threads: int, N: int, M: int, dtype: str, parts: int = 1) -> tuple[dict, str]:
    """Bounds on the fused cross-entropy (reimpl/ladder/cross_entropy.py) against a float64
    reference on the same stored logits: K, the relative error of d in u = 2^-24, as softmax_bound
    counts ours, plus the log and the two subtractions; then
      loss: |ours - ref| <= K u (1 + max |x|) + (log2 M + 2) u |ref|   (the rows' sum and the scale)
      grad: |ours - ref| / scale <= K u p + u + (2^-m |ref| + 2^(e_min - m)) / scale
    p the float64 probability, m the storage type's mantissa bits, e_min its smallest normal's
    exponent (the subnormal spacing, where a tiny probability lands)."""
    import math
    K = 6 * -(-N // threads) + 4 * int(math.log2(threads)) + 8 + fast_exp_u(dtype) + (SPLIT_U if parts > 1 else 0)
    terms = {"K": K, "u": 2.0 ** -24, "rows": math.log2(max(M, 1)) + 2, "store": 2.0 ** -MANTISSA[dtype],
             "tiny": 2.0 ** (MIN_EXP[dtype] - MANTISSA[dtype])}
    why = (f"K = 6 · ceil(N/t) + 4 · log2 t + 8, t the threads that reduce a row, u = 2^-24 (+ {fast_exp_u('bfloat16')} "
           f"with 16-bit storage: ex2.approx; + {SPLIT_U} for a row split "
           "into parts rescaled apart: warps, a cluster's blocks); loss within K u (1 + max|x|) + (log2 M + 2) u |loss|: log(d) + m - "
           "x[target] cancels down to the size of the logits; gradient within K u p + u + one storage ulp + the "
           "subnormal spacing, in units of the scale")
    return terms, why
