"""CPU-only: our `_check_layer_norm_inputs` (and aten::rms_norm's checks) raise torch's messages.
torch's CPU kernels run the same shared checks, so torch on this machine is the reference."""
import pytest
import torch

from reimpl.mirror.input_checks import _check_rms_norm_inputs_symint
from reimpl.mirror.input_checks import _check_layer_norm_inputs

CASES = {
    "shape_mismatch": (torch.zeros(8, 512), [1024], None, None),
    "empty_normalized_shape": (torch.zeros(8, 512), [], None, None),
    "weight_shape": (torch.zeros(8, 512), [512], torch.zeros(256), None),
    "bias_shape": (torch.zeros(8, 512), [512], torch.zeros(512), torch.zeros(2, 256)),
    "input_fewer_dims": (torch.zeros(512), [2, 512], None, None),
    "multi_dim_mismatch": (torch.zeros(2, 3, 4), [3, 5], None, None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_norm_check_messages(name):
    x, ns, w, b = CASES[name]
    with pytest.raises(RuntimeError) as theirs:
        torch.ops.aten.native_layer_norm(x, ns, w, b, 1e-5)
    with pytest.raises(RuntimeError) as ours:
        _check_layer_norm_inputs(x, ns, w, b)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("name", ["shape_mismatch", "empty_normalized_shape", "weight_shape", "input_fewer_dims",
                                  "multi_dim_mismatch"])
def test_rms_norm_check_messages(name):
    x, ns, w, _ = CASES[name]
    with pytest.raises((RuntimeError, ValueError)) as theirs:
        torch.rms_norm(x, ns, w, 1e-5)
    with pytest.raises((RuntimeError, ValueError)) as ours:
        _check_rms_norm_inputs_symint(x, tuple(ns), w)
    assert isinstance(ours.value, type(theirs.value))
    assert str(ours.value) == str(theirs.value)


def test_m_and_n():
    assert _check_layer_norm_inputs(torch.zeros(2, 3, 4, 5), (4, 5), None, None) == (6, 20)
    assert _check_layer_norm_inputs(torch.zeros(0, 7), (7,), None, None) == (0, 7)
