"""Which of reimpl.fast's forward kernels a call's rows go to, asked by the pages that sort measured
cells by kernel (the site may read the fast plan only through here)."""
from __future__ import annotations

from ..fast import forward
from ..mirror import kernel_table as K

TYPES = {"fp32": K.float_, "bf16": K.BFloat16, "fp16": K.Half}


def takes_lanes(dtype: str, op: str, M: int, N: int, sms: int) -> bool:
    """Whether the plan gives M rows of N (16-byte aligned pointers) to the lane kernel on `sms` SMs."""
    T = TYPES[dtype]
    return forward.lane_vectors(T, N) is not None and forward.lane_rows(T, op == "rms_norm", M, N, sms)


def lane_warps() -> int:
    """The lane kernel's warps per block in the plan."""
    return forward.LANE_WARPS
