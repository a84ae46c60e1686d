"""Record torch's forward LayerNorm/RMSNorm bits on a CUDA machine, for the CPU emulator's tests.

Usage (torch 2.11 with CUDA): python scripts/gpu/golden_vectors.py tests/golden/emulator_golden_forward.npz

Inputs are stored, not regenerated: torch's CPU and CUDA generators give different values for the
same seed, so a CPU test could not rebuild them from a `Case`. Everything is stored as raw bits.
Layout (one compressed npz): `meta` (JSON: stamp and the list of cases, `Case.as_dict()` each),
and per case i the arrays c{i}_x, c{i}_w, c{i}_b (absent when None), c{i}_out, c{i}_mean (layer
norm only), c{i}_rstd; fp16/bf16 as uint16, fp32 as uint32, fp64 as uint64.
"""
from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reimpl.checks.cases import DTYPES, VALUE_KINDS, Case  # noqa: E402

BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def golden_cases() -> list[Case]:
    out = []
    ops = ("layer_norm", "rms_norm")
    for op, dt in itertools.product(ops, DTYPES):
        affines = ((True, True), (True, False), (False, True), (False, False)) if op == "layer_norm" \
            else ((True, False), (False, False))
        for w, b in affines:
            out.append(Case(op, dt, (5, 256), weight=w, bias=b, seed=1))               # vectorized (fp64: fallback)
            out.append(Case(op, dt, (5, 254), weight=w, bias=b, seed=2))               # N % 4 != 0
            out.append(Case(op, dt, (5, 256), weight=w, bias=b, x_offset=1, seed=3))   # misaligned input
            if w:
                out.append(Case(op, dt, (3, 256), weight=w, bias=b, w_offset=1, seed=4))
            if b:
                out.append(Case(op, dt, (3, 256), weight=w, bias=b, b_offset=1, seed=5))
    for op, dt, kind, n in itertools.product(ops, DTYPES, VALUE_KINDS, (256, 254)):
        out.append(Case(op, dt, (4, n), values=kind, seed=11))
    for op, dt in itertools.product(ops, ("fp32", "bf16")):
        for n in (1, 2, 3, 4, 8, 12, 100, 2048, 2052):                                 # short rows; > one stride
            out.append(Case(op, dt, (3, n), seed=20 + n))
        out.append(Case(op, dt, (2, 3, 8, 16), norm_ndim=2, seed=30))
        for eps in (0.0, 0.1, 1e-12):
            out.append(Case(op, dt, (4, 128), eps=eps, values="small", seed=31))
    for dt in DTYPES:
        out.append(Case("rms_norm", dt, (4, 128), eps=None, seed=32))
    return out


def main(out_path: str) -> None:
    import torch
    from reimpl.checks.record import stamp
    cases = golden_cases()
    arrays = {}
    for i, case in enumerate(cases):
        with torch.no_grad():
            x, w, b = case.make_inputs("cuda")
            outs = case.run_torch(x, w, b)
        torch.cuda.synchronize()
        for name, t in (("x", x), ("w", w), ("b", b), *zip(case.output_names, outs)):
            if t is None:
                continue
            t = t.detach().contiguous().cpu()
            size = t.element_size()
            as_int = {2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
            arrays[f"c{i}_{name}"] = t.view(as_int).numpy().view(BITS[size])
    meta = {**stamp(), "cases": [c.as_dict() for c in cases]}
    np.savez_compressed(out_path, meta=np.array(json.dumps(meta)), **arrays)
    print(json.dumps({"out": out_path, "cases": len(cases), **{k: v for k, v in meta.items() if k != "cases"}}))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
