#!/usr/bin/env bash
# Installs what ffpa-bench needs to build, idempotently: Debian packages and the cudnn-frontend
# headers (PyPI wheel, pinned, --no-deps). CUDA 13 and cuDNN 9 are expected in /usr/local/cuda.
# Prints nothing but progress; the include directory of cudnn-frontend is written to
# build/.cudnn_frontend_include for tools/build.sh.
set -euo pipefail

CUDNN_FRONTEND_VERSION=1.32.0
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
frontend_include() {
  "$PY" - <<'PY'
import importlib.metadata as md, pathlib, sys
try:
    dist = md.distribution("nvidia-cudnn-frontend")
except md.PackageNotFoundError:
    sys.exit(1)
for f in dist.files or []:
    if str(f).endswith("include/cudnn_frontend.h"):
        print(pathlib.Path(dist.locate_file(f)).parent)
        sys.exit(0)
sys.exit(1)
PY
}
installed=$("$PY" -c "import importlib.metadata as m; print(m.version('nvidia-cudnn-frontend'))" 2>/dev/null || true)
if [ "$installed" != "$CUDNN_FRONTEND_VERSION" ]; then
  echo "setup: installing nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION (headers only, --no-deps)"
  "$PY" -m pip install -q --no-deps --disable-pip-version-check "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION" \
    || "$PY" -m pip install -q --no-deps --disable-pip-version-check --break-system-packages \
         "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION"
fi
inc=$(frontend_include) || { echo "setup: cudnn_frontend.h not found in the wheel" >&2; exit 1; }
mkdir -p "${BUILD_DIR:-build}"
echo "$inc" > "${BUILD_DIR:-build}/.cudnn_frontend_include"
echo "setup: ok (cudnn-frontend headers in $inc)"
