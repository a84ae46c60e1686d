#!/usr/bin/env bash
# Nsight Compute on the siblings (scripts/gpu/ncu_siblings.py says what and how): one ncu run per op,
# then the summary (OPS `ladder` alone: the ladder's top rungs, into ncu_ladder.json).
# Usage on a GPU machine with ncu: OUT=dir bash scripts/gpu/ncu_siblings.sh [OPS...]
set -uo pipefail
OUT=${OUT:-.}
OPS=${*:-softmax cross_entropy batchnorm}
M=$(python3 -c "import sys; sys.path.insert(0, 'scripts/gpu'); import ncu_siblings; print(ncu_siblings.METRICS)")
CSVS=()
for op in $OPS; do
  PYTHONPATH=$PWD ncu --csv --profile-from-start off --metrics "$M" python3 scripts/gpu/ncu_siblings.py run "$op" \
      > "$OUT/ncu_siblings_$op.csv" 2> "$OUT/ncu_siblings_$op.err" || tail -5 "$OUT/ncu_siblings_$op.err"
  CSVS+=("$OUT/ncu_siblings_$op.csv")
done
NAME=ncu_siblings; [ "$OPS" = ladder ] && NAME=ncu_ladder
PYTHONPATH=$PWD python3 scripts/gpu/ncu_siblings.py summarize "$OUT/$NAME.json" "${CSVS[@]}"
