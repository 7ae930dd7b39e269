#!/usr/bin/env bash
# Installs what ffpa-bench needs to build, idempotently: Debian packages, the cudnn-frontend
# headers and nvdisasm (PyPI wheels, pinned, --no-deps; the compile tests read the kernels' SASS
# with nvdisasm, which the CUDA toolkit's compiler packages lack). CUDA 13 and cuDNN 9 are
# expected in /usr/local/cuda. Prints nothing but progress; the include directory of
# cudnn-frontend and the path of nvdisasm are written to build/.cudnn_frontend_include and
# build/.nvdisasm for tools/build.sh.
set -euo pipefail

CUDNN_FRONTEND_VERSION=1.32.0
NVDISASM_VERSION=13.5.37
DEBIAN_PACKAGES=(cmake g++ make git pkg-config python3 python3-pip python3-yaml libcli11-dev
  nlohmann-json3-dev libfmt-dev catch2 libcairo2-dev libssl-dev zlib1g-dev)

need_root() { if [ "$(id -u)" -ne 0 ]; then echo "sudo"; fi; }

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  $(need_root) apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $(need_root) apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: /usr/local/cuda/bin/nvcc not found: install the CUDA toolkit (12.x or 13.x)" >&2
  exit 1
fi
if [ ! -e /usr/local/cuda/include/cudnn.h ] && ! ls /usr/include/cudnn*.h >/dev/null 2>&1; then
  echo "setup: cudnn.h not found (expected in /usr/local/cuda/include): install cuDNN 9" >&2
  exit 1
fi

PY=${PYTHON:-python3}
# The file of wheel $1 whose path ends with $2, or status 1.
wheel_file() {
  "$PY" - "$1" "$2" <<'PY'
import importlib.metadata as md, pathlib, sys
try:
    dist = md.distribution(sys.argv[1])
except md.PackageNotFoundError:
    sys.exit(1)
for f in dist.files or []:
    if str(f).endswith(sys.argv[2]):
        print(pathlib.Path(dist.locate_file(f)))
        sys.exit(0)
sys.exit(1)
PY
}
pip_pinned() {  # NAME VERSION: installs NAME==VERSION (--no-deps) unless it is installed
  local installed
  installed=$("$PY" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || true)
  [ "$installed" = "$2" ] && return 0
  echo "setup: installing $1==$2 (--no-deps)"
  "$PY" -m pip install -q --no-deps --disable-pip-version-check "$1==$2" \
    || "$PY" -m pip install -q --no-deps --disable-pip-version-check --break-system-packages "$1==$2"
}
pip_pinned nvidia-cudnn-frontend "$CUDNN_FRONTEND_VERSION"
pip_pinned nvidia-cuda-nvdisasm "$NVDISASM_VERSION"
header=$(wheel_file nvidia-cudnn-frontend include/cudnn_frontend.h) ||
  { echo "setup: cudnn_frontend.h not found in the wheel" >&2; exit 1; }
nvdisasm=$(wheel_file nvidia-cuda-nvdisasm bin/nvdisasm) ||
  { echo "setup: nvdisasm not found in the wheel" >&2; exit 1; }
[ -x "$nvdisasm" ] || chmod +x "$nvdisasm"
mkdir -p "${BUILD_DIR:-build}"
dirname "$header" > "${BUILD_DIR:-build}/.cudnn_frontend_include"
echo "$nvdisasm" > "${BUILD_DIR:-build}/.nvdisasm"
echo "setup: ok (cudnn-frontend headers in $(dirname "$header"), nvdisasm $nvdisasm)"
