#!/usr/bin/env bash
# Quick start, tests: set up, build, run every test. GPU tests report "skipped" without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh
cd build
ctest --output-on-failure -j "${JOBS:-$(nproc)}" "$@"
