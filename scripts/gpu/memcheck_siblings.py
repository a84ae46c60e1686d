"""Run the one-read softmax and the fused cross-entropy on rows that do not start on a 16-byte word
(odd widths) and on a base that is not aligned, every plan kind, for compute-sanitizer's memcheck:
no load or store may leave the tensors. Each tensor gets its own allocation when the caching
allocator is off, so an over-read past the end shows.
Usage (a CUDA machine):
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python scripts/gpu/memcheck_siblings.py"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl.ladder import cross_entropy, softmax  # noqa: E402

WIDTHS = (7, 100, 1001, 5001, 50257, 128257, 262143)  # warp, block, cluster and shared-memory plans


def main():
    runs = 0
    for dtype in (torch.float32, torch.bfloat16):
        for N in WIDTHS:
            M = 3
            x = torch.randn(M, N, device="cuda", dtype=dtype)
            y = softmax.run("one_read", x)
            base = torch.randn(M * N + 1, device="cuda", dtype=dtype)
            softmax.run("one_read", base[1:].view(M, N))  # a base off the 16-byte boundary
            t = torch.randint(0, N, (M,), device="cuda")
            cross_entropy.loss_and_grad(x, t)
            torch.cuda.synchronize()
            assert torch.allclose(y.float().sum(-1), torch.ones(M, device="cuda"), atol=1e-2)
            runs += 3
    print(f"{runs} launches done")


if __name__ == "__main__":
    main()
