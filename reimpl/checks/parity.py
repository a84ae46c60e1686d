"""Bitwise comparison of the mirror with torch, shared by `python -m reimpl parity` and the tests."""
from __future__ import annotations

import torch


def bit_mismatches(ours: torch.Tensor, theirs: torch.Tensor) -> int:
    """Elements whose bit patterns differ; NaN equals NaN at the same position (payloads may differ)."""
    if ours.dtype != theirs.dtype or ours.shape != theirs.shape:
        return max(ours.numel(), theirs.numel(), 1)
    int_type = {8: torch.int64, 4: torch.int32, 2: torch.int16}[ours.element_size()]
    a, b = ours.contiguous(), theirs.contiguous()
    both_nan = torch.isnan(a) & torch.isnan(b)
    return int(((a.view(int_type) != b.view(int_type)) & ~both_nan).sum().item())


def compare_case(case) -> tuple[int, int, list[str]]:
    """(elements compared, elements differing, messages) for one forward or backward case."""
    args = case.make_args("cuda")
    theirs = case.run_torch(*args)
    ours = case.run_ours(*args)
    bad, total, elements = [], 0, 0
    for name, o, t in zip(case.output_names, ours, theirs, strict=True):
        if o is None or t is None:  # an output the mask left out
            if (o is None) != (t is None):
                bad.append(f"{case.id}: {name} is {'None' if o is None else 'a tensor'} in ours, not in torch")
                total += 1
            continue
        if o.shape != t.shape or o.dtype != t.dtype or o.stride() != t.stride():
            bad.append(f"{case.id}: {name} has shape/dtype/stride {tuple(o.shape)}/{o.dtype}/{o.stride()}, "
                       f"torch {tuple(t.shape)}/{t.dtype}/{t.stride()}")
            total += max(t.numel(), 1)
            continue
        n = bit_mismatches(o, t)
        total += n
        elements += t.numel()
        if n:
            bad.append(f"{case.id}: {name} differs in {n} of {t.numel()} elements")
    return elements, total, bad


def check_cases(cases) -> list[str]:
    bad = []
    for c in cases:
        bad += compare_case(c)[2]
    return bad
