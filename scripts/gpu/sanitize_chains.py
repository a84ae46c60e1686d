"""The chains kernel and its finish on rows whose words leave a slab partly empty, rows of 16-byte
pieces and of single words, bases off the 16-byte boundary, M in and past whole tiles and rings,
every ring size, for compute-sanitizer: memcheck (no copy or store leaves the tensors; each tensor
its own allocation with the caching allocator off, so an over-read past the end shows) and racecheck
(no shared-memory stage is read while a copy into it may still be landing, or refilled while read).
Each run's gradients are compared with torch's.
Usage (a CUDA machine):
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python scripts/gpu/sanitize_chains.py
  compute-sanitizer --tool racecheck python scripts/gpu/sanitize_chains.py"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl import fast  # noqa: E402
from reimpl.fast import backward  # noqa: E402

SHAPES = ((5, 66), (300, 130), (1000, 770), (2100, 1024), (513, 2))


def main():
    backward.ENABLED, backward.CHAINS_MIN_ELEMENTS, backward.DEEP_RING_BLOCKS_PER_SM = False, 0, 0
    rt = fast.fast_runtime()
    runs = bad = 0
    for S in backward.CHAIN_STAGES:
        backward.CHAIN_STAGE = S
        for dtype in (torch.float32, torch.bfloat16):
            for M, N in SHAPES:
                for offset in (0, 2):  # a base off the 16-byte boundary: copies of a word
                    rt.plans.clear()
                    x, dy = (torch.randn(M * N + offset, device="cuda", dtype=dtype)[offset:].view(M, N)
                             for _ in range(2))
                    w, b = (torch.randn(N, device="cuda", dtype=dtype) for _ in range(2))
                    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)
                    before = rt.chains_launches
                    got = fast.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b)
                    want = torch.ops.aten.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b, [True] * 3)
                    torch.cuda.synchronize()
                    runs += rt.chains_launches > before
                    bad += not all(torch.equal(a.view(torch.int16 if a.element_size() == 2 else torch.int32),
                                               c.view(torch.int16 if c.element_size() == 2 else torch.int32))
                                   for a, c in zip(got, want))
    print(f"chains kernel runs: {runs}, differing from torch: {bad}")
    sys.exit(1 if bad or not runs else 0)


if __name__ == "__main__":
    main()
