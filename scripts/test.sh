#!/usr/bin/env bash
# Set up a virtual environment and run the test suite. On a machine without a GPU the CPU tests
# (NVRTC compile for sm_90, launch plans against torch's recorded launches, shape checks, manifest,
# the docs site built strictly and browsed in headless chromium) run and the GPU tests skip, each
# saying why; on a GPU machine everything runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# torch first, so the project's torch>=2.11 is already met (here a CPU wheel; on a GPU machine, yours)
python -c "import torch" 2>/dev/null || python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[test,docs]"
# the docs tests drive Debian's chromium headless; install it where it is missing (CI runs as root)
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi
NO_MKDOCS_2_WARNING=1 python -m mkdocs build --strict --site-dir site   # missing snippets are errors
python -m pytest -q -p no:cacheprovider "$@"
