"""Run the toolkit of reimpl.testing on the GPU and write what the "Test your kernel" page shows:
  judge_planted.json    each planted kernel (one change of torch's computation) judged, with its diagnosis
  judge_rungs.json      the study ladder's rungs and the worked example's Triton kernels judged
  batch_invariance.json torch 2.11's own paths checked for batch invariance, forward and backward
Usage (a CUDA machine): python scripts/gpu/judge_results.py OUTDIR"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from reimpl.checks.record import stamp  # noqa: E402
from reimpl.emulator import variants as V  # noqa: E402
from reimpl.testing import batch_invariance, judge, planted, proof  # noqa: E402


def _versions() -> dict:
    import cupy
    v = {"cupy": cupy.__version__}
    try:
        import triton
        v["triton"] = triton.__version__
    except ImportError:
        v["triton"] = None
    return v


def _write(out: Path, name: str, body: dict) -> None:
    (out / name).write_text(json.dumps({**stamp(), **_versions(), **body}, indent=1) + "\n")
    print("wrote", out / name, flush=True)


def planted_results() -> dict:
    rows = []
    for key in ["torch", *V.SINGLE]:
        for op in ("layer_norm", "rms_norm"):
            if key != "torch" and not V.applicable(V.SINGLE[key][0], op, 1000):
                continue
            verdict = judge(planted.on_gpu(key, op), op, proof.proof_cases(op))
            rows.append({"planted": key, **proof.summarize(verdict)})
            print(key, op, verdict.summary(), flush=True)
    return {"rows": rows}


def rung_results() -> dict:
    rows = []
    for name, op in proof.ladder_rungs():
        try:
            verdict = judge(proof.rung_fn(name, op), op, proof.rung_cases(op))
        except ImportError as e:  # a Triton rung without Triton
            rows.append({"rung": name, "op": op, "skipped": str(e)})
            continue
        rows.append({"rung": name, **proof.summarize(verdict)})
        print(name, verdict.summary(), flush=True)
    from functools import partial
    from reimpl.testing import triton_examples as TE
    for name in ("layer_norm_textbook", "layer_norm_torch_bits"):
        # with its mean and rstd returned, so that the diagnosis can say which step differs
        verdict = judge(partial(getattr(TE, name), return_stats=True), "layer_norm", proof.proof_cases("layer_norm"))
        rows.append({"example": name, **proof.summarize(verdict)})
        print(name, verdict.summary(), flush=True)
    return {"rows": rows}


def batch_results() -> dict:
    rows = []
    for label, op, dtype, N, path in proof.BATCH_PATHS:
        fn = F.layer_norm if op == "layer_norm" else F.rms_norm
        for backward in (False, True):
            rep = batch_invariance(fn, op, dtype, N, proof.BATCH_M, backward=backward)
            rows.append({"label": label, "path": path, "backward": backward, **proof.batch_summary(rep)})
            print(label, "backward" if backward else "forward", "ok" if rep.ok else "differs", flush=True)
    return {"rows": rows}


def main(outdir: str) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    assert torch.cuda.is_available()
    _write(out, "judge_planted.json", planted_results())
    _write(out, "batch_invariance.json", batch_results())
    _write(out, "judge_rungs.json", rung_results())


if __name__ == "__main__":
    main(sys.argv[1])
