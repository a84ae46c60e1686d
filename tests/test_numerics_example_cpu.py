"""CPU: the pure parts of scripts/gpu/numerics_example.py (which runs on a GPU): bit patterns, the diff
rows the docs render, the two placements of the same values, and the seed search."""
import importlib.util

import torch

from tests.site_helpers import ROOT

spec = importlib.util.spec_from_file_location("numerics_example", ROOT / "scripts" / "gpu" / "numerics_example.py")
ne = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ne)


def test_bits_and_diff_rows():
    a = torch.tensor([1.0, -2.0, 3.0])
    b = a.clone()
    b[2] = torch.nextafter(b[2], torch.tensor(10.0))
    assert ne.bits(a)[:2] == [0x3F800000, 0xC0000000]
    n, rows = ne.diff_rows(a, b, x=torch.tensor([7.0, 8.0, 9.0]))
    assert n == 1 and rows == [{"index": 2, "aligned": "0x40400000", "offset": "0x40400001", "aligned_value": "3.0",
                                "offset_value": repr(b[2].item()), "x": "9.0"}]
    assert ne.bits(torch.tensor([-1.0], dtype=torch.bfloat16)) == [0xBF80]


def test_both_paths_use_the_same_values_at_an_offset_of_one_element():
    x = torch.randn(1, 16)
    a, o, run_a, run_o = ne.both_paths(x)
    assert run_a()[0].data_ptr() != run_o()[0].data_ptr()
    assert torch.equal(a[0], o[0])  # on the CPU both placements take the same kernel


def test_search_returns_the_first_seed_that_differs(monkeypatch):
    calls = []

    def fake_both_paths(x):
        seed = int(x[0, 0])
        calls.append(seed)
        same = (torch.zeros(2),)
        other = (torch.ones(2),) if seed == 3 else same
        return same, other, None, None

    monkeypatch.setattr(ne, "both_paths", fake_both_paths)
    seed, tries, *_ = ne.search(lambda s: torch.full((1, 4), float(s)), max_seeds=10)
    assert (seed, tries, calls) == (3, 4, [0, 1, 2, 3])
