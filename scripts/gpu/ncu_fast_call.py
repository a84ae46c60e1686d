"""Three calls of reimpl.fast.layer_norm (weight and bias) on one shape, for Nsight Compute to profile
the third: ncu --launch-skip 2 --launch-count 1 -k regex:fast_layer_norm ... python
scripts/gpu/ncu_fast_call.py DTYPE M N [before] (DTYPE: bf16 or fp32; `before`: rows the lane kernel
would take go to the kernel they took before it). results/fast_forward_probe.json keeps one such
profile, with its command."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl import fast  # noqa: E402
from reimpl.fast import forward  # noqa: E402

dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[sys.argv[1]]
M, N = int(sys.argv[2]), int(sys.argv[3])
if sys.argv[4:] == ["before"]:
    forward.lane_vectors = lambda T, N: None
x = torch.randn(M, N, device="cuda", dtype=dt)
w, b = torch.randn(N, device="cuda", dtype=dt), torch.randn(N, device="cuda", dtype=dt)
for _ in range(3):
    fast.layer_norm(x, (N,), w, b, 1e-5)
torch.cuda.synchronize()
