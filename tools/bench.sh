#!/usr/bin/env bash
# Quick start, main job: set up, build, run ffpa-bench with the given arguments
# (default: the smoke matrix). On a machine without a GPU it says so and shows the plan instead.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--config configs/smoke.json)
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bench: no GPU on this machine: showing the plan (--dry-run) instead of timing it"
  exec build/ffpa-bench "${args[@]}" --dry-run
fi
exec build/ffpa-bench "${args[@]}"
