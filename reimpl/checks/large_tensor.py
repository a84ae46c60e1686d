"""Inputs past 2^31 and 2^32 elements: does each implementation give every row the bits of the same
row normalized alone, forward and dX?

torch 2.11's vectorized forward and both grad-input kernels address a row as `blockIdx.x * N`, an
unsigned 32-bit product: from element 2^32 on it wraps, so a row past that boundary is read from,
and written to, the row 2^32 / N rows earlier. Newer releases form the offset in 64 bits (their
copies of layer_norm_kernel.cu, reference/host_dispatch.json). This check runs torch itself, the
mirror, reimpl.fast and, where their cubins are at hand, the releases' own kernels under the host
mirror (reimpl/checks/releases.py), on bf16 (M, 1024) inputs whose rows cross 2^31 and 2^32, and
compares chosen rows with the same rows run alone (a small tensor, far from any boundary).
Used by tests/gpu/test_large_tensor_gpu.py, which writes results/large_tensor.json.
"""
from __future__ import annotations

N = 1024
SHAPES = {"past_2^31": (2 ** 21 + 64, N), "past_2^32": (2 ** 22 + 64, N)}


def rows_to_check(M: int) -> list[int]:
    """Rows at both ends, around each power-of-two element boundary inside M x N, and the last."""
    rows = {0, 1, M // 2, M - 2, M - 1}
    for b in (2 ** 31, 2 ** 32):
        r = b // N
        if r < M:
            rows |= {r - 1, r, r + 1}
    return sorted(r for r in rows if 0 <= r < M)


def implementations() -> dict:
    """name -> (forward(x, w, b) -> y, grad_input(dy, x, mean, rstd, w, b) -> dX)."""
    import torch
    from .. import api
    out = {
        "torch 2.11": (lambda x, w, b: torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5),
                       lambda dy, x, m, r, w, b: torch.ops.aten.native_layer_norm_backward(
                           dy, x, [N], m, r, w, b, [True, False, False])[0]),
    }
    def ours(kernels):
        return (lambda x, w, b: api.native_layer_norm(x, [N], w, b, 1e-5, kernels=kernels),
                lambda dy, x, m, r, w, b: api.native_layer_norm_backward(
                    dy, x, [N], m, r, w, b, (True, False, False), kernels=kernels)[0])
    out["reimpl (mirror)"] = ours("mirror")
    from ..mirror import release
    from ..upstream import releases
    from .releases import cubin_path, release_runtime
    for version in releases.RELEASES:
        if cubin_path(version).is_file():
            rt = release_runtime(version)

            def fwd(x, w, b, rt=rt, v=version):
                with release.use(v):  # the release's host dispatch over its kernels
                    return api._native_layer_norm(x, [N], w, b, 1e-5, rt=rt)

            def bwd(dy, x, m, r, w, b, rt=rt, v=version):
                with release.use(v):
                    return api.native_layer_norm_backward(dy, x, [N], m, r, w, b, (True, False, False), rt=rt)[0]
            out[f"torch {version} kernels"] = (fwd, bwd)
    out["reimpl (fast)"] = ours("fast")  # last: its own index arithmetic, the one not read from torch
    return out


def check(shape_name: str) -> list[dict]:
    """One record per implementation and direction: the rows checked and those that differ from the
    row run alone."""
    import torch
    M, n = SHAPES[shape_name]
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(M, n, device="cuda", dtype=torch.bfloat16, generator=g)
    dy = torch.randn(M, n, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g)
    rows = rows_to_check(M)
    idx = torch.tensor(rows, device="cuda")
    # the reference: the same rows, alone in a small tensor (torch's own op; far from any boundary)
    y_ref, m_ref, r_ref = torch.ops.aten.native_layer_norm(x[idx].contiguous(), [n], w, b, 1e-5)
    dx_ref = torch.ops.aten.native_layer_norm_backward(dy[idx].contiguous(), x[idx].contiguous(), [n], m_ref, r_ref,
                                                       w, b, [True, False, False])[0]
    records = []
    for name, (fwd, bwd) in implementations().items():
        y, mean, rstd = fwd(x, w, b)
        bad_y = _bad_rows(y[idx], y_ref, rows)
        del y
        dx = bwd(dy, x, mean, rstd, w, b)
        bad_dx = _bad_rows(dx[idx], dx_ref, rows)
        del dx, mean, rstd
        torch.cuda.empty_cache()
        records.append({"shape": shape_name, "M": M, "N": n, "elements": M * n, "implementation": name,
                        "rows_checked": rows, "forward_rows_wrong": bad_y, "dx_rows_wrong": bad_dx})
    return records


def _bad_rows(got, ref, rows) -> list[int]:
    import torch
    same = (got.view(torch.int16) == ref.view(torch.int16)).all(dim=1).tolist()
    return [r for r, ok in zip(rows, same) if not ok]
