"""Measure LayerNorm's siblings against torch on the GPU (reimpl.checks.siblings_errors): every softmax
kernel on every family, dtype and shape, and BatchNorm (our torch-level modules and our kernel) on
every case of the table; write both tables as JSON with the environment stamp.
Usage (a CUDA machine): python scripts/gpu/siblings_errors.py results/siblings_errors.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl.checks import siblings_errors as se  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.ladder.accuracy import SOFTMAX_FAMILIES  # noqa: E402


def main(out: str) -> None:
    sm = []
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for family in SOFTMAX_FAMILIES:
            for M, N in se.softmax_shapes():
                sm += se.measure_softmax(dtype, family, M, N)
        print("softmax", dtype, "done", flush=True)
    bn = [se.measure_batchnorm(*case) for case in se.batchnorm_cases()]
    print("batchnorm done", flush=True)
    Path(out).write_text(json.dumps({**stamp(), "softmax": sm, "batchnorm": bn}, indent=0) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
