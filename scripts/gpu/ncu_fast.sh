#!/usr/bin/env bash
# Nsight Compute on torch's own kernel and on reimpl.fast's for the same call, on the ten shapes of
# results/fast_bench.json: instructions executed, issue-slot use, DRAM throughput and bytes, L2 hit
# rate, registers and achieved occupancy. ncu's default cache control flushes the caches before the
# profiled launch, so each kernel starts with a cold L2.
#   PASS=forward: layer_norm with weight and bias; torch's vectorized_layer_norm_kernel (third launch).
#   PASS=grad:    native_layer_norm_backward with weight, output_mask (dX only); torch's
#                 layer_norm_grad_input_kernel_vectorized against reimpl.fast's dX kernel (third launch).
#   PASS=l2:      the dX kernels and a copy on 4096x1024 and 65536x768 with --cache-control none: each
#                 profiled launch (and each of ncu's replays) finds the L2 as the same call left it, the
#                 state of the pipelined benchmark. The copy is x * 1, an elementwise kernel with
#                 x.clone()'s traffic: clone itself is a cudaMemcpyAsync, which ncu does not profile.
# Usage on a GPU machine with ncu: PASS=grad OUT=dir bash scripts/gpu/ncu_fast.sh
# writes $OUT/ncu_fast_$PASS.json (results/ keeps it) and the raw CSVs as $OUT/ncu_csv_$PASS.tar.gz.
set -euo pipefail
OUT=${OUT:-.}
PASS=${PASS:-forward}
CSV=$(mktemp -d)
METRICS=smsp__inst_executed.sum,smsp__thread_inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
SHAPES=("4096 1024" "65536 768" "16384 4096" "32768 8192" "8192 16384")
KERNELS="torch fast"
CACHE=all
case $PASS in
  forward) TORCH_KERNEL=vectorized_layer_norm_kernel; FAST_KERNEL=fast_layer_norm ;;
  grad) TORCH_KERNEL=layer_norm_grad_input_kernel_vectorized; FAST_KERNEL=fast_grad_input ;;
  l2) TORCH_KERNEL=layer_norm_grad_input_kernel_vectorized; FAST_KERNEL=fast_grad_input
      SHAPES=("4096 1024" "65536 768"); KERNELS="copy torch fast"; CACHE=none ;;
  *) echo "PASS is forward, grad or l2" >&2; exit 2 ;;
esac
cat > /tmp/ncu_ln.py <<'PY'
import sys, torch
import torch.nn.functional as F
from reimpl import fast
dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[sys.argv[1]]
M, N = int(sys.argv[2]), int(sys.argv[3])
which, what = sys.argv[4], sys.argv[5]
x = torch.randn(M, N, device="cuda", dtype=dt); w = torch.randn(N, device="cuda", dtype=dt); b = torch.randn_like(w)
if which == "copy":
    fn = lambda: x * 1
elif what == "forward":
    fn = (lambda: fast.layer_norm(x, (N,), w, b)) if which == "fast" else (lambda: F.layer_norm(x, (N,), w, b))
else:
    dy = torch.randn_like(x)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, (N,), w, None, 1e-5)
    if which == "fast":
        fn = lambda: fast.native_layer_norm_backward(dy, x, (N,), mean, rstd, w, None, (True, False, False))
    else:
        fn = lambda: torch.ops.aten.native_layer_norm_backward(dy, x, (N,), mean, rstd, w, None, [True, False, False])
for _ in range(3):
    fn()
torch.cuda.synchronize()
PY
for dtype in fp32 bf16; do
  for shape in "${SHAPES[@]}"; do
    set -- $shape
    for which in $KERNELS; do
      # the third launch: past any first-call effects
      case $which in
        fast) KERNEL=$FAST_KERNEL ;; torch) KERNEL=$TORCH_KERNEL ;; copy) KERNEL=vectorized_elementwise_kernel ;;
      esac
      PYTHONPATH=$PWD ncu --csv --cache-control $CACHE --metrics "$METRICS" -k regex:$KERNEL --launch-skip 2 --launch-count 1 \
          python3 /tmp/ncu_ln.py "$dtype" "$1" "$2" "$which" "$PASS" > "$CSV/ncu_${which}_${dtype}_$1x$2.csv"
    done
  done
done
PYTHONPATH=$PWD python3 - "$CSV" "$OUT" "$PASS" "$TORCH_KERNEL" <<'PY'
import csv, json, sys
from pathlib import Path
from reimpl.checks.record import stamp
csv_dir, out, what, torch_kernel = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
cases = []
for path in sorted(csv_dir.glob("ncu_*_*_*x*.csv")):
    _, which, dtype, shape = path.stem.split("_")
    M, N = map(int, shape.split("x"))
    rows = list(csv.reader(line for line in path.read_text().splitlines() if not line.startswith("==")))
    head = rows[0]
    m = {r[head.index("Metric Name")]: float(r[head.index("Metric Value")].replace(",", "")) for r in rows[1:]}
    cases.append({"kernel": {"torch": "torch", "fast": "reimpl.fast", "copy": "copy"}[which], "dtype": dtype, "M": M, "N": N,
                  "kernel_us": m["gpu__time_duration.sum"] / 1000,
                  "warp_instructions": int(m["smsp__inst_executed.sum"]),
                  "thread_instructions": int(m["smsp__thread_inst_executed.sum"]),
                  "thread_instructions_per_element": m["smsp__thread_inst_executed.sum"] / (M * N),
                  "issue_active_pct": m["smsp__issue_active.avg.pct_of_peak_sustained_active"],
                  "dram_throughput_pct_of_peak": m["dram__throughput.avg.pct_of_peak_sustained_elapsed"],
                  "dram_bytes": int(m["dram__bytes.sum"]),
                  "dram_read_bytes": int(m["dram__bytes_read.sum"]),
                  "dram_write_bytes": int(m["dram__bytes_write.sum"]),
                  "l2_hit_rate_pct": m["lts__t_sector_hit_rate.pct"],
                  "registers": int(m["launch__registers_per_thread"]),
                  "achieved_occupancy_pct": m["sm__warps_active.avg.pct_of_peak_sustained_active"]})
order = {(d, m, n): i for i, (d, m, n) in enumerate((d, m, n) for d in ("fp32", "bf16") for m, n in
         ((4096, 1024), (65536, 768), (16384, 4096), (32768, 8192), (8192, 16384)))}
cases.sort(key=lambda c: (order[(c["dtype"], c["M"], c["N"])], ("copy", "torch", "reimpl.fast").index(c["kernel"])))
call = ("third launch of layer_norm with weight and bias" if what == "forward" else
        "third launch of native_layer_norm_backward with weight, output_mask asking for dX only")
cache = ("--cache-control none: the L2 as the previous launch of the same call left it; copy is x * 1"
         if what == "l2" else "ncu's default cache control: caches flushed before the profiled launch")
d = {"what": f"Nsight Compute on torch's {torch_kernel} and on reimpl.fast's kernel for the same call ({call}); "
             + cache,
     "command": f"PASS={what} OUT=dir bash scripts/gpu/ncu_fast.sh", **stamp(), "cases": cases}
(out / f"ncu_fast_{what}.json").write_text(json.dumps(d, indent=1) + "\n")
for c in cases:
    print(f"{c['kernel']:12} {c['dtype']} {c['M']}x{c['N']}: {c['kernel_us']:.1f} us, "
          f"{c['thread_instructions_per_element']:.1f} instr/elem, issue {c['issue_active_pct']:.0f}%, "
          f"DRAM {c['dram_throughput_pct_of_peak']:.0f}%, L2 hit {c['l2_hit_rate_pct']:.0f}%, "
          f"{c['registers']} regs, occ {c['achieved_occupancy_pct']:.0f}%")
PY
tar -czf "$OUT/ncu_csv_$PASS.tar.gz" -C "$CSV" .
