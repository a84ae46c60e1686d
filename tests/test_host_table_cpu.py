"""CPU-only: the training guide's host-cost table is drawn from results/host_overhead.json, and says
"not measured yet" without it (a fixture here, not a committed result)."""
from reimpl.docsite import host_table

FIXTURE = {
    "device": "GPU", "torch": "2.11.0", "cuda": "13.0", "date": "2026-01-01", "shape": [8, 1024],
    "dtype": "float32", "method": "m",
    "host_us": {"F.layer_norm": 10.0, "reimpl.layer_norm": 15.0, "aten.native_layer_norm": 12.0,
                "reimpl.native_layer_norm": 18.0, "F.rms_norm": 9.0, "reimpl.rms_norm": 18.0,
                "torch.ops.reimpl.native_layer_norm": 40.0, "torch LayerNorm module, grad": 20.0,
                "reimpl LayerNorm module, grad": 30.0, "torch LayerNorm fwd+bwd": 100.0,
                "reimpl LayerNorm fwd+bwd": 150.0},
    "host_us_without_plans": {"reimpl.layer_norm": 40.0},
    "pipelined_4096x1024_us": {"F.layer_norm": 16.0, "reimpl.layer_norm": 20.0},
    "cprofile_reimpl_layer_norm": "\n".join([
        "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)",
        "     1000    0.020    0.000    0.100    0.000 /home/someone/repo/reimpl/api.py:80(_plan_call)",
        "     1000    0.010    0.000    0.010    0.000 {built-in method torch.empty}",
        "     5000    0.005    0.000    0.005    0.000 {method 'data_ptr' of 'torch._C.TensorBase' objects}",
        "     1000    0.004    0.000    0.120    0.000 /home/someone/repo/reimpl/functional.py:26(layer_norm)"]),
}


def test_table_rows_and_ratios():
    text = host_table.host_table(FIXTURE)
    assert "| `F.layer_norm` | 10.0 | `reimpl.layer_norm` | 15.0 | 1.50 | 40.0 |" in text
    assert "| `F.rms_norm` | 9.0 | `reimpl.rms_norm` | 18.0 | 2.00 | – |" in text
    assert "`reimpl.layer_norm` 20.0 us" in text


def test_missing_results_say_so():
    assert "Not measured yet" in host_table.host_table(None)
    assert "Not measured yet" in host_table.host_profile(None)



def test_profile_is_a_table_by_stage_without_machine_paths():
    text = host_table.host_profile(FIXTURE)
    assert "cProfile of 1000 calls" in text and "/home/" not in text
    assert "| the public API and the plan lookup | 24.0 | reimpl/api.py (_plan_call), reimpl/functional.py (layer_norm) |" in text
    assert "| allocation of the outputs (torch.empty) | 10.0 | torch.empty |" in text
    assert "| tensor queries (data_ptr, device, contiguity) | 5.0 | Tensor.data_ptr |" in text
