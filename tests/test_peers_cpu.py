"""reimpl.checks.peers imports without a GPU or the peers, and each accessor gives a callable or None
with its reason recorded (on a CPU machine mostly None)."""
import sys

import pytest

from reimpl.checks import peers

ACCESSORS = ("apex_layer_norm", "liger_softmax", "liger_cross_entropy", "liger_layer_norm", "liger_rms_norm",
             "quack_softmax", "quack_cross_entropy", "quack_rms_norm", "quack_layer_norm")


def test_versions():
    v = peers.versions()
    assert {"apex", "liger_kernel", "triton", "quack", "cutlass_dsl"} <= set(v)
    assert all(x is None or (isinstance(x, str) and x) for x in v.values())


@pytest.mark.parametrize("name", ACCESSORS)
def test_accessor_callable_or_reason(name):
    fn = getattr(peers, name)()
    if fn is None:
        reason = peers.UNAVAILABLE.get(name)
        assert isinstance(reason, str) and reason.strip(), reason
    else:
        assert callable(fn) and name not in peers.UNAVAILABLE


def test_peers_dir_on_path(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "path", list(sys.path))  # restored after the test
    monkeypatch.setenv("REIMPL_PEERS_DIR", str(tmp_path))
    peers._add_peers_dir()
    assert sys.path[:2] == [str(tmp_path), str(tmp_path / "nvidia_cutlass_dsl" / "dsl_packages")]
