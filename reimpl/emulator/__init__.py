"""A bit-exact CPU emulator of the forward LayerNorm/RMSNorm kernels (issue 5, forward part).

Each device function of reimpl/cuda/ has a NumPy twin of the same name, with the same statements in
the same order. A thread block runs as NumPy arrays with one entry per thread; `__syncthreads`
falls between phases; warp shuffles follow PTX's shfl semantics. Float arithmetic is IEEE single
(NumPy keeps subnormals); where our compiled SASS fuses a multiply-add into one FFMA, the emulator
calls `fp.fma` (one rounding) and says so beside the line. `rsqrtf` comes from a table measured on
the H100 (see rsqrt.py and scripts/rsqrt_table.py).

Modules:
  fp                  float32/float64 FMA, half and bfloat16 rounding, the element types
  rsqrt               rsqrtf from the measured table; the double rsqrt
  warp                WARP_SHFL_DOWN / WARP_SHFL_XOR / WARP_SHFL on per-thread arrays
  block               a thread block's indices, and the launch loop over blocks
  welford             WelfordData, WelfordOps, WarpReduce, BlockReduce (SharedReduceOps.h, block_reduce.cuh)
  layer_norm_kernel   the forward kernels of layer_norm_kernel.cu
  api                 native_layer_norm / fused_rms_norm on NumPy arrays, path chosen by the host mirror
"""
from .api import fused_rms_norm, native_layer_norm, run_case

__all__ = ["native_layer_norm", "fused_rms_norm", "run_case"]
