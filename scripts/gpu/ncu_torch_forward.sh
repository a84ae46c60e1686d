#!/usr/bin/env bash
# Nsight Compute on torch's own vectorized LayerNorm forward and on reimpl.fast's kernel for the same
# call (layer_norm with weight and bias, third launch): instructions executed, issue-slot use, DRAM
# throughput, registers and achieved occupancy, on the ten shapes of results/fast_bench.json.
# Usage on a GPU machine with ncu: OUT=dir bash scripts/gpu/ncu_torch_forward.sh
# writes $OUT/ncu_torch_forward.json (results/ keeps it) and the raw CSVs as $OUT/ncu_csv.tar.gz.
set -euo pipefail
OUT=${OUT:-.}
CSV=$(mktemp -d)
METRICS=smsp__inst_executed.sum,smsp__thread_inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
cat > /tmp/ncu_ln.py <<'PY'
import sys, torch
import torch.nn.functional as F
dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[sys.argv[1]]
M, N = int(sys.argv[2]), int(sys.argv[3])
x = torch.randn(M, N, device="cuda", dtype=dt); w = torch.randn(N, device="cuda", dtype=dt); b = torch.randn_like(w)
if sys.argv[4] == "fast":
    from reimpl import fast
    fn = fast.layer_norm
else:
    fn = F.layer_norm
for _ in range(3):
    fn(x, (N,), w, b)
torch.cuda.synchronize()
PY
for dtype in fp32 bf16; do
  for shape in "4096 1024" "65536 768" "16384 4096" "32768 8192" "8192 16384"; do
    set -- $shape
    for which in torch fast; do
      # the third launch: past any first-call effects
      if [ "$which" = fast ]; then KERNEL=fast_layer_norm; else KERNEL=vectorized_layer_norm_kernel; fi
      PYTHONPATH=$PWD ncu --csv --metrics "$METRICS" -k regex:$KERNEL --launch-skip 2 --launch-count 1 \
          python3 /tmp/ncu_ln.py "$dtype" "$1" "$2" "$which" > "$CSV/ncu_${which}_${dtype}_$1x$2.csv"
    done
  done
done
PYTHONPATH=$PWD python3 - "$CSV" "$OUT" <<'PY'
import csv, json, sys
from pathlib import Path
from reimpl.checks.record import stamp
csv_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
cases = []
for path in sorted(csv_dir.glob("ncu_*_*_*x*.csv")):
    _, which, dtype, shape = path.stem.split("_")
    M, N = map(int, shape.split("x"))
    rows = list(csv.reader(line for line in path.read_text().splitlines() if not line.startswith("==")))
    head = rows[0]
    m = {r[head.index("Metric Name")]: float(r[head.index("Metric Value")].replace(",", "")) for r in rows[1:]}
    cases.append({"kernel": "torch" if which == "torch" else "reimpl.fast", "dtype": dtype, "M": M, "N": N,
                  "kernel_us": m["gpu__time_duration.sum"] / 1000,
                  "warp_instructions": int(m["smsp__inst_executed.sum"]),
                  "thread_instructions": int(m["smsp__thread_inst_executed.sum"]),
                  "thread_instructions_per_element": m["smsp__thread_inst_executed.sum"] / (M * N),
                  "issue_active_pct": m["smsp__issue_active.avg.pct_of_peak_sustained_active"],
                  "dram_throughput_pct_of_peak": m["dram__throughput.avg.pct_of_peak_sustained_elapsed"],
                  "dram_bytes": int(m["dram__bytes.sum"]),
                  "registers": int(m["launch__registers_per_thread"]),
                  "achieved_occupancy_pct": m["sm__warps_active.avg.pct_of_peak_sustained_active"]})
order = {(d, m, n): i for i, (d, m, n) in enumerate((d, m, n) for d in ("fp32", "bf16") for m, n in
         ((4096, 1024), (65536, 768), (16384, 4096), (32768, 8192), (8192, 16384)))}
cases.sort(key=lambda c: (order[(c["dtype"], c["M"], c["N"])], c["kernel"] != "torch"))
d = {"what": "Nsight Compute on torch's vectorized_layer_norm_kernel and on reimpl.fast's kernel for the same call "
             "(third launch of layer_norm with weight and bias)",
     "command": "OUT=dir bash scripts/gpu/ncu_torch_forward.sh", **stamp(), "cases": cases}
(out / "ncu_torch_forward.json").write_text(json.dumps(d, indent=1) + "\n")
for c in cases:
    print(f"{c['kernel']:12} {c['dtype']} {c['M']}x{c['N']}: {c['kernel_us']:.1f} us, "
          f"{c['thread_instructions_per_element']:.1f} instr/elem, issue {c['issue_active_pct']:.0f}%, "
          f"DRAM {c['dram_throughput_pct_of_peak']:.0f}%, {c['registers']} regs, occ {c['achieved_occupancy_pct']:.0f}%")
PY
tar -czf "$OUT/ncu_csv.tar.gz" -C "$CSV" .
