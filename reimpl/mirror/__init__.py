"""Torch 2.11.0's LayerNorm/RMSNorm under upstream's names: the CUDA half in cuda/ (one file per
upstream file), the host half in layer_norm_kernel.py, the shape checks of layer_norm.h in
input_checks.py, the few at:: helpers the host half calls in aten_shim.py, and the kernel
templates with their instantiations in kernel_table.py. The host half calls torch where upstream
calls at:: (allocation, dtypes), and the device through reimpl.device.runtime, as upstream does
through its globals.

Layer: mirror. May import: device.
"""
