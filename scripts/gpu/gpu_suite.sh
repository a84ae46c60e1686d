#!/usr/bin/env bash
# The whole GPU check in one call (for the lent H100; any CUDA machine with torch + CuPy works):
# environment stamp, torch's recorded launches (forward and backward), the GPU test suite with its
# summary, the benchmarks, the numerics example for the docs, and torch's own headers for reference/.
# Results go to $OUT (default: ./gpu-out). STEPS picks a subset; the device tool allows 10 minutes a
# command, so the suite is usually run as two calls, e.g. STEPS="env record_bwd tests" then
# STEPS="bench bench_bwd numerics".
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 REIMPL_CACHE_DIR=${REIMPL_CACHE_DIR:-/tmp/reimpl-cache}
STEPS=${STEPS:-"env record record_bwd tests bench bench_bwd host ladder siblings numerics headers anchor"}
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }

if has env; then
  python3 - > "$OUT/env.json" <<'PY'
import json, subprocess, torch, cupy
from reimpl.device import nvrtc
from reimpl.checks.record import stamp
d = stamp()
d["cupy"] = cupy.__version__
d["nvrtc"] = ".".join(map(str, nvrtc.version()))
d["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.split()[0]  # one line per GPU
print(json.dumps(d, indent=1))
PY
  cat "$OUT/env.json"
fi
if has record; then
  python3 -m reimpl record-launches --out "$OUT/torch_launches_forward.json" || echo "RECORD FAILED"
fi
if has record_bwd; then
  python3 -m reimpl record-launches --backward --out "$OUT/torch_launches_backward.json" || echo "RECORD_BWD FAILED"
fi
if has tests; then
  REIMPL_GPU_SUMMARY="$OUT/gpu_summary.json" python3 -m pytest -q -x --maxfail=30 -p no:cacheprovider \
      ${PYTEST_ARGS:-tests} > "$OUT/pytest.log" 2>&1
  # the process's own status: a crash after pytest's last line (at exit) shows only here
  echo $? > "$OUT/pytest_exit"
  echo "pytest exit $(cat "$OUT/pytest_exit")"; tail -25 "$OUT/pytest.log"
fi
if has bench; then
  python3 -m reimpl bench --out "$OUT/bench_forward.md" || echo "BENCH FAILED"
fi
if has bench_bwd; then
  python3 -m reimpl bench --backward --out "$OUT/bench_backward.md" || echo "BENCH_BWD FAILED"
fi
if has numerics; then
  python3 scripts/gpu/numerics_example.py "$OUT/numerics_example.json" || echo "NUMERICS FAILED"
fi
if has headers; then
  TI=$(python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'include'))")
  tar -C "$TI" -czf "$OUT/torch_headers.tgz" ATen/native/cuda/block_reduce.cuh ATen/native/cuda/thread_constants.h \
      ATen/native/SharedReduceOps.h ATen/cuda/DeviceUtils.cuh ATen/native/layer_norm.h c10/cuda/CUDAMathCompat.h \
      ATen/native/cuda/MemoryAccess.cuh 2>&1 | tail -2
fi
if has anchor; then
  # torch's C++ error for M > maxGridSize names the upstream line it was raised from: a check on our line map.
  TORCH_SHOW_CPP_STACKTRACES=1 python3 - > "$OUT/anchor.txt" 2>&1 <<'PY'
import torch
x = torch.empty(2**31, 1, dtype=torch.float16, device="cuda")
try:
    torch.ops.aten.native_layer_norm(x, [1], None, None, 1e-5)
except RuntimeError as e:
    print(str(e)[:3000])
PY
  grep -m3 "layer_norm_kernel.cu" "$OUT/anchor.txt"
fi
if has host; then
  # host time per call beside torch, with and without launch plans, and a cProfile of ours
  python3 scripts/gpu/host_bench.py "$OUT/host_overhead.json" || echo "HOST FAILED"
fi
if has ladder; then
  python3 scripts/gpu/ladder_errors.py "$OUT/ladder_errors.json" || echo "LADDER_ERRORS FAILED"
fi
if has siblings; then
  python3 scripts/gpu/siblings_errors.py "$OUT/siblings_errors.json" || echo "SIBLINGS_ERRORS FAILED"
  python3 scripts/gpu/siblings_bench.py "$OUT/siblings_bench.json" || echo "SIBLINGS_BENCH FAILED"
fi
