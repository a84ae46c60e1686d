#!/usr/bin/env bash
# Unpack the peer-kernel wheels (quack-kernels + CuTe DSL, Liger-Kernel) into DEST on the GPU machine,
# which has no network, no unzip, and Python 3.12. The nvidia-cutlass-dsl-libs-cu13 wheel (~92 MB) is larger
# than one carry, so it travels `split -b 50000000` into .whl/a/<wheel>.part-aa and .whl/b/<wheel>.part-ab
# (two carries); here the parts are joined back under the wheel's own name. Any folder under WHEEL_ROOT may
# hold a file (a copy kept in a third ignored folder works); duplicates by name are taken once.
# Not `pip install --target`: it does not merge the wheels that share nvidia_cutlass_dsl/dsl_packages/cutlass.
# Usage, from the repo root: bash scripts/gpu/unpack_peers.sh DEST [WHEEL_ROOT=.whl]
set -euo pipefail
DEST=${1:?usage: bash scripts/gpu/unpack_peers.sh DEST [WHEEL_ROOT]}; ROOT=${2:-.whl}
mkdir -p "$DEST"; DEST=$(cd "$DEST" && pwd)
JOIN=$(mktemp -d); trap 'rm -rf "$JOIN"' EXIT
uniq_by_name() { find "$@" -printf '%f %p\n' | sort -u -k1,1 | cut -d' ' -f2-; }  # one path per file name
for first in $(uniq_by_name "$ROOT" -type f -name '*.whl.part-aa'); do
  whl=$(basename "${first%.part-aa}")
  uniq_by_name "$ROOT" -type f -name "$whl.part-*" | xargs cat > "$JOIN/$whl"  # parts in suffix order
done
for w in $(uniq_by_name "$ROOT" "$JOIN" -type f -name '*.whl'); do
  echo "unpack $(basename "$w")"; python3 -m zipfile -e "$w" "$DEST"  # fails on a missing part (bad zip/CRC)
done
test -d "$DEST/nvidia_cutlass_dsl/dsl_packages/cutlass"
echo "export PYTHONPATH=$DEST:$DEST/nvidia_cutlass_dsl/dsl_packages\${PYTHONPATH:+:\$PYTHONPATH}"
echo "# or: export REIMPL_PEERS_DIR=$DEST  (reimpl.checks.peers adds both entries itself)"
