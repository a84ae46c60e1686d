#!/usr/bin/env bash
# Step through vectorized_layer_norm_kernel's source with cuda-gdb, then measure what a -G build
# changes in the numerics (docs/guide/cuda-gdb.md). Needs an NVIDIA GPU, cuda-gdb, nvdisasm, CuPy, torch.
#   OUT=/tmp/cuda_gdb_demo bash scripts/gpu/cuda_gdb_demo.sh
# writes $OUT/cuda_gdb_session.txt (the whole cuda-gdb transcript), $OUT/debug_numerics.json and .txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/cuda_gdb_demo}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

# compile first, outside the debugger: the debuggee then loads the cached cubin
$PY scripts/gpu/cuda_gdb_demo.py build || exit 1
$PY scripts/gpu/cuda_gdb_demo.py commands "$OUT/demo.gdb" || exit 1
{
  cuda-gdb --version | head -n 2
  echo "\$ cuda-gdb -batch -x demo.gdb --args $PY scripts/gpu/cuda_gdb_demo.py run"
  cat "$OUT/demo.gdb" | sed 's/^/  (gdb) /'
  echo "--- transcript ---"
  timeout "${GDB_TIMEOUT:-300}" cuda-gdb -batch -x "$OUT/demo.gdb" --args "$PY" scripts/gpu/cuda_gdb_demo.py run 2>&1
  echo "--- cuda-gdb exit status $? ---"
} > "$OUT/cuda_gdb_session.txt" 2>&1
tail -n 5 "$OUT/cuda_gdb_session.txt"

$PY scripts/gpu/cuda_gdb_demo.py numerics --json "$OUT/debug_numerics.json" 2>&1 | tee "$OUT/debug_numerics.txt"
