"""A bit-exact CPU emulator of the LayerNorm/RMSNorm kernels, forward and backward.

Each device function of reimpl/mirror/cuda/ has a NumPy twin of the same name, with the same statements in
the same order. A thread block runs as NumPy arrays with one entry per thread (the backward runs
many blocks side by side the same way); `__syncthreads` falls between phases; warp shuffles follow
PTX's shfl semantics. Float arithmetic is IEEE (NumPy keeps subnormals); where our compiled SASS
fuses a multiply-add into one FFMA/DFMA, the emulator calls `fp.fma` (one rounding) and says so
beside the line (results/sass_fma_table.md lists the SASS per source line). `rsqrtf` and
`rsqrt(double)` come from tables measured on the H100 (rsqrt.py, scripts/gpu/rsqrt_table.py,
scripts/gpu/rsqrt64_table.py). Every step can be recorded (trace.py) and compared with the GPU's own
trace (reimpl/checks/gpu_trace.py).

Modules:
  fp                   float32/float64 FMA, half and bfloat16 rounding, the element types
  rsqrt                rsqrtf and rsqrt(double) as the H100 computes them
  warp                 WARP_SHFL_DOWN / WARP_SHFL_XOR / WARP_SHFL on per-thread arrays
  block                a thread block's indices, and the launch loop over blocks
  welford              WelfordData, WelfordOps, WarpReduce, BlockReduce (SharedReduceOps.h, block_reduce.cuh)
  block_reduce         WarpReduceSum, BlockReduceSum (block_reduce.cuh)
  layer_norm_kernel    the forward kernels of layer_norm_kernel.cu
  layer_norm_backward  the backward kernels, and torch's .sum(0) that ends the partial GammaBeta path
  api                  the aten ops on NumPy arrays, path chosen by replaying the host mirror's launches
  trace, trace_view    step traces; tables, JSON and a pdb stop (`python -m reimpl trace`)
  torch_random         torch's CPU generator (torch.rand, torch.randn) in NumPy, bit for bit
  case_inputs          a checks case's CPU inputs from that twin: `python -m reimpl trace` without torch

Needs NumPy only: the host mirror runs here on stand-in tensors (reimpl/mirror/aten_shim.py).

Layer: emulator. May import: mirror, device.
"""
from .api import (backward_args, fused_rms_norm, fused_rms_norm_backward, native_layer_norm,
                  native_layer_norm_backward, run_backward_case, run_case)

__all__ = ["native_layer_norm", "fused_rms_norm", "native_layer_norm_backward", "fused_rms_norm_backward",
           "run_case", "run_backward_case", "backward_args"]
