"""The public peer kernels the GPU benchmarks compare against, each optional: Liger-Kernel (Triton) and
quack (CuTe DSL, through nvidia-cutlass-dsl).

Neither is installed on the GPU machine, which has no network. Their wheels travel in the ignored folders
.whl/a and .whl/b (the CUDA 13 library wheel is split across the two); `bash scripts/gpu/unpack_peers.sh
DEST`, run there from the repository root, unpacks them and prints the PYTHONPATH to add: DEST and
DEST/nvidia_cutlass_dsl/dsl_packages. Setting REIMPL_PEERS_DIR=DEST does the same: this module puts both
folders at the front of sys.path before its first peer import.

Each accessor returns a callable, or None with the reason in UNAVAILABLE[name] (the import's error, or no
CUDA device). Peer imports happen inside the accessors, so importing this module needs neither a GPU nor
the peers. Signatures as read in liger-kernel 0.8.5 and quack-kernels 0.6.5 (nvidia-cutlass-dsl 4.8.1).
Liger is taken from its submodules (liger_kernel.ops.softmax, ...): the liger_kernel.ops package may
swap in another backend's op on some devices, the submodules are always its plain Triton kernels.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path

import torch

UNAVAILABLE: dict[str, str] = {}  # accessor name -> why it returned None

# stamp name -> (module whose presence counts, distribution that carries the version)
_DISTS = {"liger_kernel": ("liger_kernel", "liger-kernel"), "triton": ("triton", "triton"),
          "quack": ("quack", "quack-kernels"), "cutlass_dsl": ("cutlass", "nvidia-cutlass-dsl"),
          "tvm_ffi": ("tvm_ffi", "apache-tvm-ffi")}


def _add_peers_dir() -> None:
    """REIMPL_PEERS_DIR=DEST: DEST and its dsl_packages on sys.path (the wheel's .pth that adds the
    latter is unpacked into DEST too, but Python runs .pth files only from site-packages)."""
    dest = os.environ.get("REIMPL_PEERS_DIR")
    if dest:
        for p in (os.path.join(dest, "nvidia_cutlass_dsl", "dsl_packages"), dest):
            if p not in sys.path:
                sys.path.insert(0, p)


def _apex_dir() -> str | None:
    """REIMPL_APEX_DIR: where scripts/gpu/build_apex_layer_norm.py built apex's fused LayerNorm."""
    return os.environ.get("REIMPL_APEX_DIR")


def versions() -> dict:
    """name -> version string, or None where the module cannot be found. Reads metadata only: importing
    quack would load the CuTe DSL compiler (seconds), too much for a stamp. apex's is the commit its
    sources came from, where it was built."""
    _add_peers_dir()
    out = {}
    commit = Path(_apex_dir() or ".") / "COMMIT"
    out["apex"] = commit.read_text().strip() if _apex_dir() and commit.is_file() else None
    for name, (module, dist) in _DISTS.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        try:
            out[name] = importlib.metadata.version(dist) if found else None
        except importlib.metadata.PackageNotFoundError:
            out[name] = "unknown"  # importable but without its dist-info
    return out


def _load(name: str, build):
    """build() imports the peer and returns the callable; any failure gives None and a reason."""
    _add_peers_dir()
    try:
        fn = build()
    except Exception as e:  # ImportError, or a peer's own import-time setup failing (wrong Python, no CUDA)
        UNAVAILABLE[name] = f"{type(e).__name__}: {e}"
        return None
    if not torch.cuda.is_available():  # it imported, but its kernels only run on a GPU
        UNAVAILABLE[name] = "imported, but torch sees no CUDA device"
        return None
    UNAVAILABLE.pop(name, None)
    return fn


def liger_softmax():
    """f(x): softmax over the last dim (LigerSoftmaxFunction.apply(input_), liger_kernel/ops/softmax.py)."""
    def build():
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
        return LigerSoftmaxFunction.apply
    return _load("liger_softmax", build)


def liger_cross_entropy():
    """f(logits, target) -> mean loss with autograd. LigerCrossEntropyFunction.apply(_input, target, weight,
    ignore_index=-100, ..., reduction="mean", ...) returns (loss, z_loss, token_accuracy, predicted_tokens)
    (liger_kernel/ops/cross_entropy.py). When logits.requires_grad, its forward writes the gradient into
    the logits' own storage (Liger's memory trick): pass a copy where the values are needed again."""
    def build():
        from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
        return lambda logits, target: LigerCrossEntropyFunction.apply(logits, target, None)[0]
    return _load("liger_cross_entropy", build)


def liger_layer_norm():
    """f(x, w, b, eps) (LigerLayerNormFunction.apply(X, W, B, eps), liger_kernel/ops/layer_norm.py)."""
    def build():
        from liger_kernel.ops.layer_norm import LigerLayerNormFunction
        return LigerLayerNormFunction.apply
    return _load("liger_layer_norm", build)


def liger_rms_norm():
    """f(x, w, eps): LigerRMSNormFunction.apply(X, W, eps, offset=0.0, casting_mode="llama", in_place=True,
    row_mode=None) (liger_kernel/ops/rms_norm.py), as Llama uses it, except in_place=False: in place, its
    backward writes dx over dy, and a benchmark reuses one dy across calls."""
    def build():
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        return lambda x, w, eps: LigerRMSNormFunction.apply(x, w, eps, 0.0, "llama", False)
    return _load("liger_rms_norm", build)


def apex_layer_norm():
    """f(x, w, b, eps): apex's fused LayerNorm forward, fused_layer_norm_cuda.forward_affine(input,
    normalized_shape, gamma, beta, epsilon) -> [output, mean, invvar] (apex csrc/layer_norm_cuda.cpp),
    built by scripts/gpu/build_apex_layer_norm.py into REIMPL_APEX_DIR."""
    def build():
        apex = _apex_dir()
        if not apex:
            raise ImportError("REIMPL_APEX_DIR is not set (scripts/gpu/build_apex_layer_norm.py builds it)")
        if apex not in sys.path:
            sys.path.insert(0, apex)
        import fused_layer_norm_cuda
        return lambda x, w, b, eps: fused_layer_norm_cuda.forward_affine(x, (x.shape[-1],), w, b, eps)[0]
    return _load("apex_layer_norm", build)


def quack_softmax():
    """f(x), x of shape (M, N), with autograd (quack.softmax.softmax(x), quack/softmax.py)."""
    def build():
        from quack.softmax import softmax
        return softmax
    return _load("quack_softmax", build)


def quack_cross_entropy():
    """f(logits, target) -> mean loss with autograd. quack.cross_entropy.cross_entropy(x, target,
    lse_partial=None, weight=None, ignore_index=-100, reduction="mean", inplace_backward=False)
    (quack/cross_entropy.py); logits (M, N), target (M,)."""
    def build():
        from quack.cross_entropy import cross_entropy
        return lambda logits, target: cross_entropy(logits, target)
    return _load("quack_cross_entropy", build)


def quack_rms_norm():
    """f(x, w, eps) with autograd. quack.rmsnorm.rmsnorm(x, weight=None, bias=None, residual=None,
    out_dtype=None, residual_dtype=None, eps=1e-6, prenorm=False, weight_offset=0.0) (quack/rmsnorm.py);
    weight may be fp32, fp16 or bf16."""
    def build():
        from quack.rmsnorm import rmsnorm
        return lambda x, w, eps: rmsnorm(x, w, eps=eps)
    return _load("quack_rms_norm", build)


def quack_layer_norm():
    """f(x, w, b, eps), forward only: quack.rmsnorm.layernorm_fwd(x, weight, bias=None, eps=1e-6,
    return_rstd=False, return_mean=False) (quack/rmsnorm.py) asserts 2-D x and fp32 weight and bias. The
    wrapper converts w and b with .float() on every call (a no-op for fp32): two N-element casts, small
    next to the M x N pass; pass fp32 w and b to keep them out of a timing."""
    def build():
        from quack.rmsnorm import layernorm_fwd
        return lambda x, w, b, eps: layernorm_fwd(x, w.float(), b.float(), eps)
    return _load("quack_layer_norm", build)
