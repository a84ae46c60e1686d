"""The pytest plugin (entry point `pytest11: reimpl`): fixtures that parametrize a test over the
repository's case matrix, so that a user's parity test is three lines:

    from reimpl.testing import assert_matches_torch
    def test_my_layer_norm(layer_norm_case):
        assert_matches_torch(my_layer_norm, "layer_norm", layer_norm_case)

Fixtures: `layer_norm_case`, `rms_norm_case` (forward) and `layer_norm_backward_case`,
`rms_norm_backward_case`, one test per case, named by the case's id. `--reimpl-dtypes fp32,bf16`
narrows the dtypes (default fp32, fp16, bf16).
"""
from __future__ import annotations

FIXTURES = {"layer_norm_case": ("layer_norm", False), "rms_norm_case": ("rms_norm", False),
            "layer_norm_backward_case": ("layer_norm", True), "rms_norm_backward_case": ("rms_norm", True)}


def pytest_addoption(parser):
    parser.addoption("--reimpl-dtypes", default="fp32,fp16,bf16",
                     help="dtypes of the reimpl.testing case fixtures (comma-separated: fp32, fp16, bf16, fp64)")


def pytest_generate_tests(metafunc):
    for name, (op, backward) in FIXTURES.items():
        if name in metafunc.fixturenames:
            from .verdict import default_cases
            dtypes = tuple(metafunc.config.getoption("--reimpl-dtypes").split(","))
            cases = default_cases(op, dtypes, backward)
            metafunc.parametrize(name, cases, ids=[c.id for c in cases])
