#!/usr/bin/env bash
# The main job: set up, compile the mirror, and check it against torch bit for bit.
# With an NVIDIA GPU (torch built for CUDA, CuPy for CUDA 13): the full parity run over the case
# matrix and the random sweep. Without one: compile for sm_90 and print launch plans, which is as
# far as a CPU can go. Then it builds the docs site and serves it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv --system-site-packages .venv
. .venv/bin/activate
# torch: a machine with an NVIDIA driver and no torch gets the pin (PyPI's Linux wheel of 2.11.0 is
# the CUDA 13.0 build of git 70d99e998b49); a machine that has torch keeps it, and `parity` (or `doctor`)
# says which release it is and what the version matrix says about its bits. Without a GPU, parity
# cannot run, so the CPU wheel on this image's disk is enough.
if ! python -c "import torch" 2>/dev/null; then
  if nvidia-smi -L >/dev/null 2>&1; then
    python -m pip install -q "torch==2.11.0"
  else
    python -m pip install -q "torch==2.13.0"
  fi
fi
if python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  python -m pip install -q -e ".[gpu,docs]"
  python -m reimpl compile --arch "sm_$(python -c 'import torch; a, b = torch.cuda.get_device_capability(); print(f"{a}{b}")')"
  python -m reimpl parity "$@"   # prints `doctor`'s report first
else
  python -m pip install -q -e ".[docs]"
  python -m reimpl doctor
  python -m reimpl compile --arch sm_90
  echo "No CUDA GPU here: parity needs one. The launch plans the host mirror makes:"
  for shape in 4096,1024 64,1023; do
    python -m reimpl plan --dtype bf16 --shape "$shape"
  done
  python -m reimpl plan --dtype fp32 --shape 64,1024 --x-offset 1
fi
# The reading site: build it strictly, then serve it (REIMPL_SERVE=0 builds only, e.g. in CI).
NO_MKDOCS_2_WARNING=1 python -m mkdocs build --strict --site-dir site
if [ "${REIMPL_SERVE:-1}" != "0" ]; then
  echo "Serving the site at http://127.0.0.1:${REIMPL_PORT:-8000}/ (Ctrl-C to stop)"
  python -m http.server --bind 127.0.0.1 --directory site "${REIMPL_PORT:-8000}"
fi
