#!/usr/bin/env bash
# Builds for the H200 (sm_90a only, to stay small) into build-dev/ and copies the binaries the GPU
# machine needs into .carry/ (git-ignored), to be carried by the device tool.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=build-dev FFPA_CUDA_ARCHS=90a tools/build.sh >/dev/null
rm -rf .carry && mkdir -p .carry
cp build-dev/ffpa-bench .carry/
find build-dev/tests -maxdepth 1 -name "gpu_*" -type f -executable -exec cp {} .carry/ \;
strip .carry/* 2>/dev/null || true
du -sh .carry
