"""Which torch release's host dispatch the mirror follows: the pin's, unless told otherwise.

The host code of newer releases was read from dated copies of layer_norm_kernel.cu
(reference/host_dispatch.json). On NVIDIA GPUs two of its changes alter what the host does, both
from the copies that stand for 2.14: the fallback forward kernels get a leading int64 M (their CUDA
code never reads it), and the huge-M GammaBeta path sizes each scratch buffer {grid.y, N} from its
own gradient and views the sum back to the gradient's shape (2.11 sizes both by dgamma's last
dimension). `use("2.14.1")` makes the mirror do both; everything else it launches is the same in
every release read. The device code of a release comes with its cubin, not from here: with M in
the argument list, only a 2.14 cubin can run the fallback forward (reimpl/checks/releases.py).

    with release.use("2.14.1"), runtime.use(release_runtime("2.14.1")):
        layer_norm_cuda(...)            # 2.14's launches, on 2.14's kernels
"""
from __future__ import annotations

import contextlib
import contextvars

PIN = "2.11.0"
RELEASES = ("2.11.0", "2.12.1", "2.13.0", "2.14.1")
# the first release taken to carry each host change, and how sure that is (reference/host_dispatch.json)
HUGE_M_BUFFERS_PER_TENSOR = "2.14.0"   # in the July and September copies only: inferred, low-medium confidence
FALLBACK_FORWARD_TAKES_M = "2.14.0"    # 2.14.1's cubin and the same two copies: read and measured

_current: contextvars.ContextVar = contextvars.ContextVar("reimpl_release", default=PIN)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("+")[0].split(".")[:3])


def current() -> str:
    return _current.get()


def at_least(version: str) -> bool:
    return _key(current()) >= _key(version)


@contextlib.contextmanager
def use(version: str):
    """Follow `version`'s host dispatch inside the block (this context only, as the runtime)."""
    if _key(version) < _key(PIN):
        raise ValueError(f"the mirror follows torch {PIN} and later, not {version}")
    token = _current.set(version)
    try:
        yield version
    finally:
        _current.reset(token)
