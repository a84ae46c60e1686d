"""A LayerNorm backward (DTYPE M N; bf16 65536 768 unless given) for Nsight Compute on reimpl.fast's
route of two kernels, once with torch's GammaBeta tile after the fast dX kernel and once with the
chains kernel and its finish: warm-up calls outside the profiled range, then one call of each
inside it (cudaProfilerStart/Stop). Run under
  ncu --profile-from-start off -k regex:'GammaBeta|chains' --section SpeedOfLight --section Occupancy
      --section WarpStateStats --section LaunchStats python scripts/gpu/chains_ncu.py DTYPE M N"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl import fast  # noqa: E402
from reimpl.checks.bench import profiled_once  # noqa: E402
from reimpl.fast import backward  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
dname, M, N = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else ("bf16", 65536, 768)
x, dy = (torch.randn(M, N, device="cuda", dtype=DTYPES[dname]) for _ in range(2))
w, b = (torch.randn(N, device="cuda", dtype=DTYPES[dname]) for _ in range(2))
_, mean, rstd = torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)
backward.ENABLED = False  # dX in a kernel of its own on both routes
for floor in (1 << 62, 0):  # torch's GammaBeta, then the chains kernel
    backward.CHAINS_MIN_ELEMENTS = floor
    fast.fast_runtime().plans.clear()
    profiled_once(lambda: fast.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b))
