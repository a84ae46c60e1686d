"""Record torch's LayerNorm/RMSNorm backward bits on a CUDA machine, for the CPU emulator's tests.

Usage (torch 2.11 with CUDA): python scripts/gpu/golden_vectors_backward.py tests/golden/emulator_golden_backward.npz

Three groups, in one compressed npz with a `meta` entry (JSON: reimpl.checks.record.stamp(), the groups):

- `cases`: small `BackwardCase`s (reimpl/checks/cases_backward.py) covering both grad-input kernels, every
  GammaBeta tile with aligned_grid true and false, every dtype, LN and RMS, the affine combinations,
  every output_mask and the value kinds in the input and in grad_out. Inputs are torch's (made on the
  GPU, mean and rstd from torch's forward) and are stored, as raw bits: b{i}_dy, _x, _mean, _rstd,
  _w, _b; outputs b{i}_dX, _dgamma, _dbeta (RMS: _dX, _dweight), absent where None.
- `tall`: the partial GammaBeta path (M > 65536 and N < 2112 on the H100: tile <32,1,32>, then
  torch's `.sum(0)`). These inputs run to millions of elements, so they are not stored: they come from
  `counter_values`, a hash of (seed, index) in NumPy that any machine recomputes bit for bit, and meta
  keeps the sha256 of their bytes so the test can tell. Outputs t{i}_<name>; dX is not asked for (the
  grad-input kernels are covered by `cases`).
- `sums`: `.sum(0)` alone on (R, N) tensors of each dtype, R and N as the partial path makes them
  (also the wide ones, too large for `tall`), inputs from `counter_values` again; outputs s{i}_out,
  and in meta the reduce kernel torch launched (profiler: name, grid, block) to check the emulated
  launch configuration against.

Bits: fp16/bf16 as uint16, fp32 as uint32, fp64 as uint64.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reimpl.checks.cases import DTYPES  # noqa: E402
from reimpl.checks.cases_backward import BackwardCase  # noqa: E402

BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}
STORAGE = {"fp32": np.float32, "fp64": np.float64, "fp16": np.float16, "bf16": np.uint16}
ACC = {"fp32": np.float32, "fp64": np.float64, "fp16": np.float32, "bf16": np.float32}
KINDS = ("offset", "small", "large", "subnormal", "zeros", "inf", "nan")


# ---- small cases, inputs from torch ----------------------------------------------------------------
def golden_cases() -> list[BackwardCase]:
    out = []
    for op, dt in itertools.product(("layer_norm", "rms_norm"), DTYPES):
        ln = op == "layer_norm"
        seed = iter(range(1000))

        def C(shape, **kw):
            kw.setdefault("mask", (True, kw.get("weight", True), kw.get("bias", True) and ln))
            kw.setdefault("bias", ln)
            return BackwardCase(op, dt, shape, seed=next(seed), **kw)
        # grad input: the vectorized kernel (N % 4 == 0, every pointer aligned; never fp64) and the
        # plain one for each reason; N within one stride of 512, a tail of 1..3, more than one stride
        out += [C((3, 256)), C((2, 254)), C((2, 256), x_offset=1), C((2, 256), dy_offset=1),
                C((2, 256), w_offset=1), C((2, 260), x_offset=4, dy_offset=4)]
        out += [C((3, n)) for n in (1, 2, 3, 7)] + [C((1, 1030))]
        # GammaBeta tiles by M: <32,1,8> < 64 <= <32,8,64> < 128 <= <32,16,128> < 256 <= <32,32,256>;
        # aligned_grid = M % rows_per_block_y == 0 and N % 32 == 0
        # (the aligned ones, 32 columns wide, without dX: the grad-input kernel is per row and the
        # file stays small)
        out += [C((m, 32), mask=(False, True, ln)) for m in (8, 64, 128, 256)]
        out += [C((m, n)) for m, n in ((13, 40), (100, 9), (200, 5), (300, 3), (1, 33))]
        # affine combinations (the full ones are above)
        if ln:
            out += [C((3, 256), bias=False), C((3, 254), weight=False), C((70, 4), weight=False, bias=False)]
        else:
            out += [C((3, 256), weight=False), C((70, 4), weight=False)]
        # every output_mask (full masks are above), on a multi-tile shape
        for mask in itertools.product((False, True), repeat=3 if ln else 2):
            if all(mask):
                continue
            out.append(C((66, 4), mask=tuple(mask) + ((False,) if not ln else ())))
        # value kinds, in the input (x: mean/rstd follow) and in grad_out
        for i, kind in enumerate(KINDS):
            out.append(C((12, 20 if i % 2 else 19), values=kind))
            out.append(C((20, 19 if i % 2 else 20), dy_values=kind))
        # normalized over two dims; three leading dims
        out += [C((2, 3, 4, 6), norm_ndim=2), C((2, 3, 5, 8))]
    return out


# ---- counter-based inputs (NumPy only: the same bits on every machine) --------------------------------
def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def counter_values(seed: int, n: int, kind: str = "wide") -> np.ndarray:
    """n float64 values from a hash of (seed, index). "wide": +-(1 + u) * 2^e, e in [-8, 4] (sums of
    such values round differently in different orders); "positive": 0.25 + 4u (rstd); "special":
    "wide" with about 2% of +-inf, NaN, +-0 and values in the subnormal range of every dtype."""
    with np.errstate(over="ignore"):
        i = np.arange(n, dtype=np.uint64)
        key = np.uint64((seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF)
        z1 = _mix(key + i * np.uint64(2))
        z2 = _mix(key + i * np.uint64(2) + np.uint64(1))
    u = (z1 >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    if kind == "positive":
        return 0.25 + 4.0 * u
    e = (z2 % np.uint64(13)).astype(np.int64) - 8
    sign = np.where((z2 >> np.uint64(8)) & np.uint64(1), -1.0, 1.0)
    v = sign * np.ldexp(1.0 + u, e)                      # exact scaling by 2^e
    if kind == "special":
        pick = (z2 >> np.uint64(16)) % np.uint64(50)
        specials = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 2.0 ** -140, -(2.0 ** -1030),
                             2.0 ** -20, -(2.0 ** -130)])
        v = np.where(pick < len(specials), specials[np.minimum(pick, len(specials) - 1).astype(np.int64)], v)
    elif kind != "wide":
        raise ValueError(kind)
    return v


def to_storage(v: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values as the dtype's NumPy storage (bf16: bits, rounded through float32)."""
    from reimpl.emulator.fp import float_to_bf16_bits
    with np.errstate(over="ignore", under="ignore"):
        if dtype == "bf16":
            return float_to_bf16_bits(v.astype(np.float32))
        return v.astype(STORAGE[dtype])


def tall_cases() -> list[dict]:
    """The partial path: mask never asks for dX; R = min(32768 // ceil(N/32), ceil(M/32))."""
    out = []

    def T(op, dt, M, N, mask=None, **kw):
        ln = op == "layer_norm"
        mask = mask or ((False, True, True) if ln else (False, True))
        out.append(dict(op=op, dtype=dt, M=M, N=N, mask=list(mask), weight=True, bias=ln,
                        seed=1000 + len(out), x_kind=kw.get("x_kind", "wide"), dy_kind=kw.get("dy_kind", "wide")))
    for N in (1, 2, 3, 8, 33, 100):
        T("layer_norm", "fp32", 65537, N)
    T("layer_norm", "fp32", 65568, 32)                       # aligned_grid true
    T("layer_norm", "fp32", 100000, 64)                      # R = 3125: .sum(0) over 25 CTAs
    T("layer_norm", "fp32", 1048577, 8)                      # R = 32768; the M loop runs twice
    T("layer_norm", "fp32", 65537, 4, x_kind="special", dy_kind="special")
    for dt in ("bf16", "fp16"):
        for N in (1, 8, 36):
            T("layer_norm", dt, 65537, N)
    T("layer_norm", "fp64", 65537, 1)
    T("layer_norm", "fp64", 65537, 8)
    T("rms_norm", "fp32", 65537, 5)
    T("rms_norm", "bf16", 65537, 2)
    T("rms_norm", "fp16", 100000, 64)
    T("rms_norm", "fp64", 65537, 1)
    T("layer_norm", "bf16", 65537, 8, mask=(False, False, True))   # dbeta alone: torch 2.11 returns it empty
    T("layer_norm", "fp16", 65537, 8, mask=(False, True, False))
    return out


def tall_inputs(c: dict) -> dict:
    """(dy, x, mean, rstd, w, b) of a tall case, in storage dtypes (mean None for RMS)."""
    M, N, dt, s = c["M"], c["N"], c["dtype"], c["seed"]
    acc = ACC[dt]
    d = {"dy": to_storage(counter_values(s, M * N, c["dy_kind"]), dt).reshape(M, N),
         "x": to_storage(counter_values(s + 1_000_000, M * N, c["x_kind"]), dt).reshape(M, N),
         "mean": counter_values(s + 2_000_000, M).astype(acc) if c["op"] == "layer_norm" else None,
         "rstd": counter_values(s + 3_000_000, M, "positive").astype(acc),
         "w": to_storage(counter_values(s + 4_000_000, N), dt) if c["weight"] else None,
         "b": to_storage(counter_values(s + 5_000_000, N), dt) if c["bias"] else None}
    return d


def sum_probes() -> list[dict]:
    out = []
    shapes = ((2049, 1), (2049, 2), (2049, 3), (2049, 6), (2049, 8), (2049, 33), (2049, 100), (1365, 768),
              (496, 2111), (3125, 64), (8193, 4), (32768, 8), (32768, 1))
    for dt in ("fp32", "bf16", "fp16", "fp64"):
        for R, N in shapes:
            out.append(dict(dtype=dt, R=R, N=N, seed=5000 + len(out), kind="wide"))
        for R, N in ((2049, 1), (2049, 12)):
            out.append(dict(dtype=dt, R=R, N=N, seed=5000 + len(out), kind="special"))
    return out


def probe_input(p: dict) -> np.ndarray:
    return to_storage(counter_values(p["seed"], p["R"] * p["N"], p["kind"]), p["dtype"]).reshape(p["R"], p["N"])


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        if a is not None:
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


# ---- recording ----------------------------------------------------------------------------------
def _bits(t) -> np.ndarray:
    import torch
    t = t.detach().contiguous().cpu()
    size = t.element_size()
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[size]).numpy().view(BITS[size])


def _cuda(a: np.ndarray | None, dt: str):
    """A storage-dtype array as a CUDA tensor of dt (bf16 from its bits)."""
    import torch
    if a is None:
        return None
    t = torch.from_numpy(np.ascontiguousarray(a))
    if dt == "bf16" and a.dtype == np.uint16:
        t = t.view(torch.bfloat16)
    return t.cuda()


def main(out_path: str) -> None:
    import torch
    from reimpl.checks.record import stamp
    arrays, meta_cases, meta_tall, meta_sums = {}, [], [], []
    for i, case in enumerate(golden_cases()):
        dy, x, mean, rstd, w, b = case.make_args("cuda")
        with torch.no_grad():
            outs = case.run_torch(dy, x, mean, rstd, w, b)
        torch.cuda.synchronize()
        for name, t in (("dy", dy), ("x", x), ("mean", mean), ("rstd", rstd), ("w", w), ("b", b),
                        *zip(case.output_names, outs)):
            if t is not None:
                arrays[f"b{i}_{name}"] = _bits(t)
        meta_cases.append(case.as_dict())
    for i, c in enumerate(tall_cases()):
        d = tall_inputs(c)
        ns = [c["N"]]
        dev = {k: _cuda(v, c["dtype"] if k in ("dy", "x", "w", "b") else "acc") for k, v in d.items()}
        with torch.no_grad():
            if c["op"] == "layer_norm":
                outs = torch.ops.aten.native_layer_norm_backward(dev["dy"], dev["x"], ns, dev["mean"], dev["rstd"],
                                                                 dev["w"], dev["b"], c["mask"])
                names = ("dX", "dgamma", "dbeta")
            else:
                outs = torch.ops.aten._fused_rms_norm_backward(dev["dy"], dev["x"], ns, dev["rstd"], dev["w"],
                                                               c["mask"])
                names = ("dX", "dweight")
        torch.cuda.synchronize()
        for name, t in zip(names, outs):
            if t is not None:
                arrays[f"t{i}_{name}"] = _bits(t)
        meta_tall.append({**c, "sha256": digest(*d.values())})
        del dev, outs
    from reimpl.checks.record import profile_launches
    for i, p in enumerate(sum_probes()):
        a = probe_input(p)
        t = _cuda(a, p["dtype"])
        out = t.sum(0)
        arrays[f"s{i}_out"] = _bits(out)
        launches = profile_launches(lambda: t.sum(0))
        meta_sums.append({**p, "sha256": digest(a), "launches": launches})
    props = torch.cuda.get_device_properties(0)
    meta = {**stamp(), "multiProcessorCount": props.multi_processor_count,
            "maxThreadsPerMultiProcessor": props.max_threads_per_multi_processor,
            "cases": meta_cases, "tall": meta_tall, "sums": meta_sums}
    np.savez_compressed(out_path, meta=np.array(json.dumps(meta)), **arrays)
    print(json.dumps({"out": out_path, "cases": len(meta_cases), "tall": len(meta_tall), "sums": len(meta_sums),
                      **{k: v for k, v in meta.items() if k not in ("cases", "tall", "sums")}}))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
