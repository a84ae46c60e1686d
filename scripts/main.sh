#!/usr/bin/env bash
# The main job: set up, compile the mirror, and check it against torch bit for bit, then build the
# reading site and serve it. With an NVIDIA GPU (torch built for CUDA, CuPy for CUDA 13): the
# doctor's verdict, a progress bar over the parity sweep and one table of results. Without one: the
# doctor's verdict, the compile for sm_90, and a paragraph on what a GPU would add.
# --verbose also prints every kernel's signature and the launch plans; other arguments go to `parity`.
set -euo pipefail
cd "$(dirname "$0")/.."
VERBOSE=0
ARGS=()
for a in "$@"; do
  case "$a" in --verbose|-v) VERBOSE=1 ;; *) ARGS+=("$a") ;; esac
done
QUIET=$([ "$VERBOSE" = 1 ] && echo "" || echo "--quiet")
PY=${PYTHON:-python3}
pip_quiet() {   # pip's own words only when it fails, and then only its errors
  local log; log=$(mktemp)
  python -m pip install -q "$@" >"$log" 2>&1 || { grep -E "^ERROR" "$log" | tail -2; rm -f "$log"; return 1; }
  rm -f "$log"
}
# the packages the interpreter that makes the venv sees: --system-site-packages passes on the base
# installation's, not those of a venv or conda env that interpreter may itself run in
OUTER=$("$PY" -c "import site; print('\n'.join(site.getsitepackages() + [site.getusersitepackages()]))" 2>/dev/null || true)
[ -d .venv ] || "$PY" -m venv --system-site-packages .venv
. .venv/bin/activate
SITE=$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
[ -z "$OUTER" ] || printf '%s\n' $OUTER > "$SITE/_outer_site_packages.pth"
# torch: a machine with an NVIDIA driver and no torch gets the pin (PyPI's Linux wheel of 2.11.0 is
# the CUDA 13.0 build of git 70d99e998b49); a machine that has torch keeps it, and the doctor says
# which release it is and what is known of its bits. Without a GPU, parity cannot run, so the CPU
# wheel is enough.
if ! python -c "import torch" 2>/dev/null; then
  PIN=$(nvidia-smi -L >/dev/null 2>&1 && echo "torch==2.11.0" || echo "torch==2.13.0")
  pip_quiet "$PIN" || { echo "torch is not installed here and pip could not fetch $PIN: install it, or run this"\
    "script with a Python that has torch (PYTHON=/path/to/python bash scripts/main.sh)."; exit 1; }
fi
# this package and its extras; offline, what is installed already serves (it runs from this folder)
installed() { pip_quiet "$@" || echo "(pip could not install $*; going on with what is installed)"; }
if python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  installed -e ".[gpu,docs]"
  python -m reimpl compile $QUIET --arch "sm_$(python -c 'import torch; a, b = torch.cuda.get_device_capability(); print(f"{a}{b}")')"
  python -m reimpl parity ${ARGS[@]+"${ARGS[@]}"}   # the doctor's report, a progress bar, one table
else
  installed -e ".[docs]"
  python -m reimpl doctor
  python -m reimpl compile $QUIET --arch sm_90
  if [ "$VERBOSE" = 1 ]; then
    echo "The launch plans the host mirror makes:"
    for shape in 4096,1024 64,1023; do python -m reimpl plan --dtype bf16 --shape "$shape"; done
    python -m reimpl plan --dtype fp32 --shape 64,1024 --x-offset 1
  fi
  cat <<'TEXT'

No CUDA GPU here. This run checked what a CPU can: your versions against the pin (above), and that
NVRTC compiles every mirrored kernel for the H100 (sm_90). `bash scripts/test.sh` goes further on a
CPU: launch plans against torch's recorded launches, the bit-exact emulator against its golden
vectors, and the site built and browsed. Comparing bits with torch's own kernels needs an NVIDIA
GPU: on one, this script runs the parity sweep over the case matrix. `--verbose` also prints every
kernel's signature and the launch plans.
TEXT
fi
# The reading site: build it strictly, then serve it (REIMPL_SERVE=0 builds only, e.g. in CI).
if ! python -c "import mkdocs, material" 2>/dev/null; then
  echo; echo "MkDocs is not installed here, so the reading site was not built (pip install -e '.[docs]')."
  exit 0
fi
NO_MKDOCS_2_WARNING=1 python -m mkdocs build --strict --site-dir site -q
echo
echo "The reading site is built in site/ (open site/index.html)."
if [ "${REIMPL_SERVE:-1}" != "0" ]; then
  echo "Serving it at http://127.0.0.1:${REIMPL_PORT:-8000}/ (Ctrl-C to stop)"
  python -m http.server --bind 127.0.0.1 --directory site "${REIMPL_PORT:-8000}" >/dev/null 2>&1
fi
