"""What the GPU proves about the toolkit, in one place for the GPU tests (tests/gpu/test_judge_gpu.py)
and the results script (scripts/gpu/judge_results.py): the cases each planted kernel is judged on,
the ladder's rungs as user kernels, the paths of torch whose batch invariance the page lists, and
the summary of a verdict that the results files hold.
"""
from __future__ import annotations

from ..checks.cases import Case

PROOF_DTYPES = ("fp32", "fp16", "bf16")


def proof_cases(op: str) -> list:
    """Shapes whose per-thread counts are unequal (N = 1000: 250 vectors on 128 threads) and equal
    (N = 4096), offset data (rounding shows most), subnormal rows (for flush-to-zero), eps 1e-5."""
    out = []
    for dt in PROOF_DTYPES:
        for shape, values in (((64, 1000), "offset"), ((64, 4096), "normal"), ((32, 1000), "subnormal"),
                              ((32, 768), "small")):
            out.append(Case(op, dt, shape, values=values, seed=5))
        out.append(Case(op, dt, (32, 1000), weight=False, bias=False, values="offset", seed=6))
    return out


def rung_cases(op: str) -> list:
    return [Case(op, dt, (64, 4096), values="offset", seed=9) for dt in ("fp32", "bf16")] + \
        [Case(op, dt, (64, 1000), seed=9) for dt in ("fp32", "bf16")]


def rung_fn(name: str, op: str):
    """A ladder rung (CUDA or Triton) with F.layer_norm's (or F.rms_norm's) arguments; rows are the
    trailing dimension only, so it judges 2-D cases."""
    from ..checks.ladder_errors import runner
    launch = runner(name)

    def run(x, normalized_shape, weight, bias, eps):
        if len(normalized_shape) != 1:
            raise ValueError(f"ladder rung {name} normalizes the last dimension only")
        y, mean, rstd = launch(x, weight, bias, 1e-5 if eps is None else eps)
        shape = tuple(x.shape[:-1]) + (1,)
        return (y, rstd.view(shape)) if op == "rms_norm" else (y, mean.view(shape), rstd.view(shape))
    if op == "rms_norm":
        return lambda x, ns, weight=None, eps=None: run(x, ns, weight, None, eps)
    return lambda x, ns, weight=None, bias=None, eps=1e-5: run(x, ns, weight, bias, eps)


def ladder_rungs() -> list[tuple[str, str]]:
    from ..ladder import registry
    return [(e.name, "rms_norm" if e.rms_norm else "layer_norm") for e in registry.ENTRIES if e.group == "ladder"]


# torch's paths whose batch invariance the page lists: (label, op, dtype, N, path)
BATCH_PATHS = (
    ("LayerNorm fp32, N = 1024", "layer_norm", "fp32", 1024, "vectorized"),
    ("LayerNorm bf16, N = 4096", "layer_norm", "bf16", 4096, "vectorized"),
    ("LayerNorm fp16, N = 768", "layer_norm", "fp16", 768, "vectorized"),
    ("LayerNorm fp32, N = 1022", "layer_norm", "fp32", 1022, "fallback"),
    ("LayerNorm bf16, N = 1023", "layer_norm", "bf16", 1023, "fallback"),
    ("RMSNorm bf16, N = 4096", "rms_norm", "bf16", 4096, "vectorized"),
    ("RMSNorm fp32, N = 1022", "rms_norm", "fp32", 1022, "fallback"),
)
BATCH_M = 64


def summarize(verdict) -> dict:
    """A verdict as the results files hold it: counts, and per failing case its differences and
    diagnosis."""
    failed = []
    for r in verdict.failed:
        item = {"case": r.case.id}
        if r.error:
            item["error"] = r.error
        item["differ"] = {d.output: d.differ for d in r.differences if not d.ok}
        item["max_ulp"] = {d.output: d.max_ulp for d in r.differences if not d.ok}
        if r.diagnosis is not None:
            d = r.diagnosis
            item["reproduced_by"] = d.reproduced_by
            item["closest"] = d.closest
            item["first_divergence"] = d.first_divergence
            item["note"] = d.note
        failed.append(item)
    return {"op": verdict.op, "backward": verdict.backward, "cases": len(verdict.results),
            "cases_equal": len(verdict.results) - len(verdict.failed), "failed": failed}


def batch_summary(report) -> dict:
    return {"op": report.op, "dtype": report.dtype, "N": report.N, "M": report.M,
            "checks": [{"name": c.name, "output": c.output, "what": c.what, "rows": c.rows, "differ": c.differ}
                       for c in report.checks]}
