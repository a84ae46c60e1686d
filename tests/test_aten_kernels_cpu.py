"""CPU-only: reimpl.in_torch registers our four entry points as aten's CUDA kernels and gives torch
its own back: the dispatcher's CUDA entry for each op names reimpl/aten_kernels.py while installed and
is what it was before afterwards, blocks nest, a failed block still uninstalls, an unknown provider
is refused before anything is registered, and installing needs no GPU. (That torch's calls then give
torch's bits is tests/gpu/test_in_torch_gpu.py's.)"""
import pytest
import torch

import reimpl
from reimpl import aten_kernels


def _cuda_entries():
    """Each op's CUDA line of the dispatcher's table ('' where the op has no CUDA kernel)."""
    out = []
    for op in aten_kernels._OPS:
        lines = torch._C._dispatch_dump(f"aten::{op}").splitlines()
        out.append(next((line for line in lines if line.startswith("CUDA:")), ""))
    return out


def test_install_replaces_each_cuda_kernel_and_uninstall_restores_it():
    before = _cuda_entries()
    assert not any("aten_kernels.py" in line for line in before)
    with reimpl.in_torch("mirror"):
        assert aten_kernels.installed() == "mirror"
        assert all("reimpl/aten_kernels.py" in line for line in _cuda_entries())
    assert aten_kernels.installed() is None and _cuda_entries() == before


def test_blocks_nest_and_a_failing_block_still_restores():
    before = _cuda_entries()
    with reimpl.in_torch("mirror"):
        with reimpl.fast.in_torch():  # installing the fast provider needs no GPU: its runtime is made on first call
            assert aten_kernels.installed() == "fast"
        assert aten_kernels.installed() == "mirror"
    with pytest.raises(KeyError):
        with reimpl.in_torch("mirror"):
            raise KeyError("inside")
    assert aten_kernels.installed() is None and _cuda_entries() == before


def test_an_unknown_provider_registers_nothing():
    before = _cuda_entries()
    with pytest.raises(ValueError, match="kernels must be one of"):
        with reimpl.in_torch("triton"):
            pass
    assert aten_kernels.installed() is None and _cuda_entries() == before


def test_cpu_calls_are_untouched():
    x = torch.randn(4, 8)
    want = torch.nn.functional.layer_norm(x, (8,))
    with reimpl.in_torch("mirror"):
        got = torch.nn.functional.layer_norm(x, (8,))
    assert torch.equal(got, want)
