"""The "Test your kernel against torch" page's tables, rendered at build time from what
scripts/gpu/judge_results.py measured on the GPU (results/judge_planted.json, judge_rungs.json,
batch_invariance.json) and from the variant table of reimpl/emulator/variants.py.

    {% judge_variants %}     each change the diagnosis tries, and what it means in a user's code
    {% judge_planted %}      each planted kernel judged on the H100: cases that differ, what the diagnosis named
    {% judge_rungs %}        the study ladder's rungs judged, with their diagnoses
    {% judge_example %}      the worked example's two Triton kernels judged
    {% batch_invariance %}   torch's own paths, checked for batch invariance
    {% judge_stamp %}        device, versions and date of those runs
    {% judge_report_example %}   a failure report as the judge prints it, computed at build time on the
                             CPU (a kernel with a two-pass variance against the emulator's torch bits)

Each renderer takes the loaded results (tests pass fixtures); a missing file renders a note.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ..emulator import variants as V

RESULTS = Path(__file__).resolve().parents[2] / "results"
FILES = {"planted": "judge_planted.json", "rungs": "judge_rungs.json", "batch": "batch_invariance.json"}
CMD = "python scripts/gpu/judge_results.py results"


def load(which: str):
    p = RESULTS / FILES[which]
    return json.loads(p.read_text()) if p.is_file() else None


def _missing(which: str) -> str:
    return f"*Not measured yet: run `{CMD}` on a GPU and commit `results/{FILES[which]}`.*\n"


def _stamp(d: dict) -> str:
    """The run's device, versions and date, closing a table's caption."""
    return f"{d['device']}, torch {d['torch']}" + (f", Triton {d['triton']}" if "triton" in d else "") + f", {d['date']}"


def _op(op: str) -> str:
    return "LayerNorm" if op == "layer_norm" else "RMSNorm"


def variants_table() -> str:
    rows = ["| name | the one change from torch's computation |", "|---|---|"]
    for key, (_, meaning) in V.SINGLE.items():
        rows.append(f"| `{key}` | {meaning} |")
    return "\n".join(rows) + "\n"


def _answers(failed: list[dict]) -> str:
    """The diagnoses of a list of failing cases, condensed: each answer with how many cases gave it."""
    seen = Counter()
    for f in failed:
        if f.get("error"):
            seen["raised: " + f["error"].split(":")[0]] += 1
        elif f.get("reproduced_by"):
            seen[" or ".join(f"`{k}`" for k in f["reproduced_by"])] += 1
        elif f.get("note"):
            seen[f["note"]] += 1
        else:
            seen[f"none; closest `{f['closest']}`, leaves it at {f['first_divergence'].split(' (')[0]}"] += 1
    return "; ".join(f"{k} ({n})" for k, n in seen.most_common())


def planted(data: dict | None) -> str:
    if data is None:
        return _missing("planted")
    rows = ["*Each planted build of `reimpl/testing/cuda/planted_layer_norm.cu`: cases that differ from torch's own "
            "op, how many of them the diagnosis names the planted change for, and the diagnoses (counts of cases). "
            "Method: judged against torch on the GPU over `reimpl.testing.proof.proof_cases` (fp32, fp16, bf16; "
            "N = 1000, 4096, 768; offset, normal, subnormal and small values; with and without the affine tensors). "
            f"{_stamp(data)}.*", "",
            "| planted change | op | cases that differ from torch | failing cases whose diagnosis names it |"
            " diagnoses, with the number of cases |", "|---|---|---|---|---|"]
    for r in data["rows"]:
        key, failed = r["planted"], r["failed"]
        named = sum(key in (f.get("reproduced_by") or []) for f in failed)
        differ = r["cases"] - r["cases_equal"]
        rows.append(f"| `{key}` | {_op(r['op'])} | {differ} of {r['cases']} | "
                    f"{named} of {len(failed)} | {_answers(failed) or 'all equal to torch'} |")
    return "\n".join(rows) + "\n"


def rungs(data: dict | None) -> str:
    if data is None:
        return _missing("rungs")
    rows = ["*Each rung of the study ladder: cases with torch's bits, and the diagnoses of the others (counts of "
            "cases). Method: judged against torch's own op on the GPU over `reimpl.testing.proof.rung_cases` (fp32 "
            f"and bf16; 64 x 4096 offset rows and 64 x 1000 normal rows). {_stamp(data)}.*", "",
            "| rung | op | cases with torch's bits | diagnoses of the others, with the number of cases |",
            "|---|---|---|---|"]
    for r in data["rows"]:
        if "rung" not in r:
            continue
        if "skipped" in r:
            rows.append(f"| `{r['rung']}` | {_op(r['op'])} | not run | {r['skipped']} |")
            continue
        rows.append(f"| [`{r['rung']}`](../ladder/rungs.md) | {_op(r['op'])} | {r['cases_equal']} of {r['cases']} | "
                    f"{_answers(r['failed']) or '-'} |")
    return "\n".join(rows) + "\n"


def example(data: dict | None) -> str:
    if data is None:
        return _missing("rungs")
    rows = ["*The worked example's Triton kernels: cases with torch's bits, and the diagnoses of the others (counts "
            "of cases). Method: judged against torch's own op on the GPU over `reimpl.testing.proof.proof_cases`, "
            f"returning mean and rstd too. {_stamp(data)}.*", "",
            "| kernel | cases with torch's bits | diagnoses of the others, with the number of cases |",
            "|---|---|---|"]
    for r in data["rows"]:
        if "example" in r:
            rows.append(f"| `{r['example']}` | {r['cases_equal']} of {r['cases']} | {_answers(r['failed']) or '-'} |")
    return "\n".join(rows) + "\n"


def batch(data: dict | None) -> str:
    if data is None:
        return _missing("batch")
    rows = [f"*torch's own paths: batch-invariance checks passed, of those run, per output (counts). Method: the "
            f"checks of `reimpl.testing.batch_invariance` on a batch of {data['rows'][0]['M']} rows, "
            f"forward and through autograd, on the GPU. {_stamp(data)}.*", "",
            "| path | torch takes | out: checks passed | dX: checks passed | dweight, dbias with zero-gradient rows "
            "appended |", "|---|---|---|---|---|"]
    by_label = {}
    for r in data["rows"]:
        by_label.setdefault((r["label"], r["path"]), []).append(r)
    for (label, path), rs in by_label.items():
        cells = {}
        for r in rs:
            for c in r["checks"]:
                key = "weights" if c["output"] in ("dweight", "dbias") else c["output"]
                ok, n = cells.get(key, (0, 0))
                cells[key] = (ok + (c["differ"] == 0), n + 1)
        fmt = lambda k: f"{cells[k][0]} of {cells[k][1]}" if k in cells else "-"  # noqa: E731
        rows.append(f"| {label} | {path} kernels | {fmt('out')} | {fmt('dX')} | {fmt('weights')} |")
    return "\n".join(rows) + "\n"


def stamp(datas: list) -> str:
    d = next((x for x in datas if x), None)
    if d is None:
        return _missing("planted")
    return (f"*Measured on an {d['device']} with torch {d['torch']} (CUDA {d['cuda']}), CuPy {d['cupy']}, "
            f"Triton {d['triton']}, on {d['date']}; the reference is torch's own op on the same tensors.*\n")


def report_example() -> str:
    """What `assert_matches_torch` prints for a kernel with a two-pass variance, on one case: judged
    on the CPU against the emulator (torch's H100 bits), so it is computed afresh at every build."""
    from ..checks.cases import Case
    from ..testing import judge, planted
    verdict = judge(planted.on_cpu("two_pass"), "layer_norm", [Case("layer_norm", "fp32", (64, 1000),
                                                                       values="offset", seed=5)], device="cpu")
    return "```text\n" + str(verdict) + "\n```\n"


def expand(kind: str, arg: str | None) -> str | None:
    """The directive's text, or None when `kind` is not one of this page's."""
    if arg:
        return None
    if kind == "judge_variants":
        return variants_table()
    if kind == "judge_planted":
        return planted(load("planted"))
    if kind == "judge_rungs":
        return rungs(load("rungs"))
    if kind == "judge_example":
        return example(load("rungs"))
    if kind == "batch_invariance":
        return batch(load("batch"))
    if kind == "judge_report_example":
        return report_example()
    if kind == "judge_stamp":
        return stamp([load("planted"), load("rungs"), load("batch")])
    return None
