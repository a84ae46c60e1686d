"""The study ladder: the LayerNorm kernels readers learn from, from the textbook loop to apex's
fused shape, each one idea on from the rung below, all with one launcher signature
(`rungs.run(name, x, weight, bias, eps) -> (y, mean, rstd)`). They are not meant to match torch's
bits; each rung's error is measured and bounded per input family (tests/gpu/test_ladder_gpu.py).

    registry.py      every study kernel declared once: idea, credit, file, launch, bound rule, run line
    cuda/ln_*.cu     the CUDA rungs, one file each; cuda/ladder.cuh their contract and affine step
    rungs.py         the CUDA rungs' launcher; launch.py what every CUDA launcher here shares
    triton_rungs.py  the Triton rungs (forward and backward)
    accuracy.py      the stated error bounds, by rule
    cuda/common.cuh  storage conversions and the Welford state and merge, shared by the kernels
    cuda/reduce.cuh  the warp and block reductions (reduce, then broadcast) every kernel here uses

LayerNorm's siblings, the same reduce-then-broadcast pattern (each with its own launcher):

    batchnorm.py, cuda/batchnorm.cu   BatchNorm: torch-level modules and a training-forward kernel
    batchnorm_split.py, cuda/batchnorm_split.cu
                                      BatchNorm split over many blocks per channel, Chan's merge,
                                      forward and backward, NCHW and channels-last
    softmax.py, cuda/softmax.cu       softmax: three-pass, online (m, d) and one-read kernels, a NumPy
                                      model; launch.regs_plan picks the one-read shape
    cross_entropy.py                  cross-entropy fused with its gradient (cuda/softmax.cu's row pass)

Layer: ladder. May import: device. (The same NVRTC path and runtime as the mirror.)
"""
