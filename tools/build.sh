#!/usr/bin/env bash
# Sets up (tools/setup.sh), configures and builds ffpa-bench and its tests into ${BUILD_DIR:-build}.
# FFPA_CUDA_ARCHS (default 80;89;90a) selects the nvcc targets; JOBS the parallelism;
# BUILD_TARGET one target alone (e.g. ffpa-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
export BUILD_DIR
tools/setup.sh
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
  -DFFPA_CUDNN_FRONTEND_INCLUDE="$(cat "$BUILD_DIR/.cudnn_frontend_include")" \
  -DFFPA_NVDISASM="$(cat "$BUILD_DIR/.nvdisasm")" \
  -DFFPA_CUDA_ARCHS="${FFPA_CUDA_ARCHS:-80;89;90a}" >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" ${BUILD_TARGET:+--target "$BUILD_TARGET"}
