"""The LayerNorm backward (bf16 16384 x 4096 unless M N are given) for Nsight Compute on both of
reimpl.fast's routes: warm-up calls outside the profiled range, then inside it (cudaProfilerStart/
Stop) one call of the route of two kernels (fast dX, torch's GammaBeta: the chains kernel set aside)
and one of the fused kernel with its finish (backward.ENABLED)."""
import sys
import torch
sys.path.insert(0, '.')
from reimpl import fast  # noqa: E402
from reimpl.checks.bench import profiled_once  # noqa: E402
from reimpl.fast import backward  # noqa: E402

M, N = (int(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (16384, 4096)
backward.CHAINS_MIN_ELEMENTS = 1 << 62
dt = torch.bfloat16
x, dy = (torch.randn(M, N, device="cuda", dtype=dt) for _ in range(2))
w, b = (torch.randn(N, device="cuda", dtype=dt) for _ in range(2))
_, mean, rstd = torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)
for enabled in (False, True):
    backward.ENABLED = enabled
    fast.fast_runtime().plans.clear()
    profiled_once(lambda: fast.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b))
