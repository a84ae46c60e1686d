#!/usr/bin/env bash
# Set up a virtual environment and run the test suite. On a machine without a GPU the CPU tests
# (NVRTC compile for sm_90, launch plans against torch's recorded launches, shape checks, manifest)
# run and the GPU tests skip, each saying why; on a GPU machine everything runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# torch first, so the project's torch>=2.11 is already met (here a CPU wheel; on a GPU machine, yours)
python -c "import torch" 2>/dev/null || python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[test]"
python -m pytest -q -p no:cacheprovider "$@"
