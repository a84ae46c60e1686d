#!/usr/bin/env bash
# Nsight Compute on torch's own vectorized LayerNorm forward (and, for scale, the copy kernel):
# instructions executed, issue-slot use and DRAM throughput, for bf16 65536 x 768 and fp32 4096 x 1024.
# Usage on a GPU machine with ncu: OUT=dir bash scripts/gpu/ncu_torch_forward.sh [fast]
# writes $OUT/ncu_DTYPE_MxN.csv; with `fast`, the same for reimpl.fast's kernel ($OUT/ncu_fast_DTYPE_MxN.csv).
WHICH=${1:-torch}
set -euo pipefail
OUT=${OUT:-.}
METRICS=smsp__inst_executed.sum,smsp__thread_inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,gpu__time_duration.sum
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
for shape in "bf16 65536 768" "fp32 4096 1024"; do
  set -- $shape
  # the third launch: past any first-call effects
  if [ "$WHICH" = fast ]; then KERNEL=fast_layer_norm; NAME=ncu_fast_$1_$2x$3; else KERNEL=vectorized_layer_norm_kernel; NAME=ncu_$1_$2x$3; fi
  PYTHONPATH=$PWD ncu --csv --metrics "$METRICS" -k regex:$KERNEL --launch-skip 2 --launch-count 1 \
      python3 /tmp/ncu_ln.py "$1" "$2" "$3" "$WHICH" > "$OUT/$NAME.csv"
  echo "== $WHICH $shape"; grep -v "^==" "$OUT/$NAME.csv" | tail -6
done
