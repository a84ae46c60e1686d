"""The study ladder: the LayerNorm kernels readers learn from, from the textbook loop to apex's
fused shape, each one idea on from the rung below, all with one launcher signature
(`rungs.run(name, x, weight, bias, eps) -> (y, mean, rstd)`). They are not meant to match torch's
bits; each rung's error is measured and bounded per input family (tests/gpu/test_ladder_gpu.py).

    cuda/ladder.cu   the CUDA rungs
    rungs.py         their launch configurations and the launcher
    cuda/common.cuh  storage conversions and the Welford state, merge and trees, shared by the kernels

LayerNorm's siblings, the same reduce-then-broadcast pattern (each with its own launcher):

    batchnorm.py, cuda/batchnorm.cu   BatchNorm: torch-level modules and a training-forward kernel
    softmax.py, cuda/softmax.cu       softmax: three-pass and online (m, d) kernels, a NumPy model

Imports: reimpl.device only (the same NVRTC path and runtime as the mirror).
"""
