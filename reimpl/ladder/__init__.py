"""The study ladder: the LayerNorm kernels readers learn from, from the textbook loop to apex's
fused shape, each one idea on from the rung below, all with one launcher signature
(`rungs.run(name, x, weight, bias, eps) -> (y, mean, rstd)`). They are not meant to match torch's
bits; each rung's error is measured and bounded per input family (tests/gpu/test_ladder_gpu.py).

    cuda/ladder.cu   the CUDA rungs
    rungs.py         their launch configurations and the launcher

Imports: reimpl.device only (the same NVRTC path and runtime as the mirror).
"""
