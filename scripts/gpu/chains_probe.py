"""Kernel times (torch's profiler, CUPTI) of reimpl.fast's backward routes for dgamma and dbeta,
beside torch's: the fast dX kernel followed by torch's GammaBeta tile; by the chains kernel (each
ring of S stages, forced) and the finish; the fused kernel with its finish (where its plan takes the
width, the floor of MIN_ROW_BYTES set aside); and `plan`, the route reimpl.fast's plan takes by
default. Every gradient asked for; five calls each after warm-up; each route's bits compared with
torch's. Writes a JSON record, with the plan's constants as `route` and, given an ncu text report
of scripts/gpu/chains_ncu.py (--ncu FILE DTYPE M N), its figures as `ncu`.
Usage: python scripts/gpu/chains_probe.py OUT.json [quick] [--ncu FILE DTYPE M N]"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from reimpl import fast  # noqa: E402
from reimpl.checks import ncu_report  # noqa: E402
from reimpl.checks.bench import kernel_us  # noqa: E402
from reimpl.checks.parity import bit_mismatches  # noqa: E402
from reimpl.checks.record import stamp  # noqa: E402
from reimpl.fast import backward, grad_input  # noqa: E402

SAVED = {k: getattr(backward, k) for k in ("ENABLED", "MIN_ROW_BYTES", "CHAINS_MIN_ELEMENTS", "CHAIN_STAGE",
                                           "TORCH_TILE_FLOAT_BYTES", "DEEP_RING_BLOCKS_PER_SM")}
SHAPES = ((65536, 768), (32768, 768), (16384, 1024), (65536, 1024), (4096, 1024), (2048, 1024), (1024, 1024),
          (32768, 1536), (32768, 2048),
          (16384, 2048), (16384, 3072), (16384, 4096), (8192, 4096), (4096, 4096), (8192, 6144), (16384, 5120),
          (4096, 8192), (8192, 8192), (2048, 12288), (2048, 16384), (1024, 16384), (8192, 16384), (512, 32768))
QUICK = ((65536, 768), (16384, 1024), (32768, 2048), (16384, 4096), (2048, 16384))
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def routes():
    """(name, backward settings) of each route of ours."""
    out = [("two_kernels", {"ENABLED": False, "CHAINS_MIN_ELEMENTS": 1 << 62})]
    out += [(f"chains_S{S}", {"ENABLED": False, "CHAINS_MIN_ELEMENTS": 0, "CHAIN_STAGE": S,
                              "TORCH_TILE_FLOAT_BYTES": 1 << 62, "DEEP_RING_BLOCKS_PER_SM": 0})
            for S in backward.CHAIN_STAGES]
    out.append(("fused", {"ENABLED": True, "MIN_ROW_BYTES": 0, "CHAINS_MIN_ELEMENTS": 1 << 62}))
    out.append(("plan", {}))
    return out


def route() -> dict:
    """The plan's constants these measurements choose between (reimpl/fast/backward.py)."""
    return {"min_row_bytes": SAVED["MIN_ROW_BYTES"], "max_width": 512 * max(backward.REGISTER_VECTORS),
            "min_elements": backward.MIN_ELEMENTS, "chains_min_elements": SAVED["CHAINS_MIN_ELEMENTS"],
            "torch_tile_float_bytes": SAVED["TORCH_TILE_FLOAT_BYTES"], "chain_stage": SAVED["CHAIN_STAGE"],
            "chain_stages": list(backward.CHAIN_STAGES), "deep_ring_blocks_per_sm": SAVED["DEEP_RING_BLOCKS_PER_SM"],
            "sms": torch.cuda.get_device_properties(0).multi_processor_count}


def ncu(path: str, dtype: str, M: str, N: str) -> dict:
    return {"shape": f"{dtype} {M} x {N} LayerNorm, weight and bias, every gradient",
            "command": "ncu --profile-from-start off -k regex:'GammaBeta|chains' --section SpeedOfLight --section "
                       f"Occupancy --section WarpStateStats --section LaunchStats python scripts/gpu/chains_ncu.py "
                       f"{dtype} {M} {N}",
            "kernels": ncu_report.launches(Path(path).read_text())}


def main(out: str, quick: bool = False, ncu_args: list | None = None) -> None:
    rows = []
    rt = fast.fast_runtime()
    for (M, N) in (QUICK if quick else SHAPES):
        for dname, dt in DTYPES.items():
            for op in ("layer_norm", "rms_norm"):
                x, dy = (torch.randn(M, N, device="cuda", dtype=dt) for _ in range(2))
                w, b = (torch.randn(N, device="cuda", dtype=dt) for _ in range(2))
                if op == "layer_norm":
                    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [N], w, b, 1e-5)

                    def theirs():
                        return torch.ops.aten.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b, [True] * 3)

                    def ours():
                        return fast.native_layer_norm_backward(dy, x, [N], mean, rstd, w, b)
                else:
                    _, rstd = torch.ops.aten._fused_rms_norm(x, [N], w, 1e-5)

                    def theirs():
                        return torch.ops.aten._fused_rms_norm_backward(dy, x, [N], rstd, w, [True, True])

                    def ours():
                        return fast.fused_rms_norm_backward(dy, x, [N], rstd, w)
                want = theirs()
                base = {"op": op, "dtype": dname, "M": M, "N": N}
                times = kernel_us(theirs)
                rows.append({**base, "route": "torch", "kernels_us": times, "total_us": sum(times.values()),
                             "bit_identical": True})
                for name, settings in routes():
                    for k, v in {**SAVED, **settings}.items():
                        setattr(backward, k, v)
                    rt.plans.clear()
                    launches = (rt.chains_launches, rt.fused_launches)
                    got = [ours() for _ in range(3)][-1]
                    took = (rt.chains_launches, rt.fused_launches) != launches
                    if name not in ("two_kernels", "plan") and not took:
                        continue  # the route does not take this shape
                    times = kernel_us(ours)
                    rows.append({**base, "route": name, "kernels_us": times, "total_us": sum(times.values()),
                                 "bit_identical": all(bit_mismatches(a, b) == 0 for a, b in zip(got, want))})
                print(op, dname, M, N, {r["route"]: round(r["total_us"], 1) for r in rows
                                        if (r["op"], r["dtype"], r["M"], r["N"]) == (op, dname, M, N)}, flush=True)
                del x, dy
                torch.cuda.empty_cache()
    for k, v in SAVED.items():
        setattr(backward, k, v)
    record = {**stamp(), "route": route(), "dx_rows_from_last": grad_input.ROWS_FROM_LAST,
              "method": "torch.profiler (CUPTI) kernel times, mean of 5 calls after 3 warm-up calls, every gradient "
                        "asked for; bit_identical: every gradient equals torch's", "rows": rows}
    if ncu_args:
        record["ncu"] = ncu(*ncu_args)
    Path(out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    args, ncu_args = ncu_report.split_args(sys.argv[1:])
    main(args[0], quick=len(args) > 1 and args[1] == "quick", ncu_args=ncu_args)
