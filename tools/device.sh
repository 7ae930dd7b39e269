#!/usr/bin/env bash
# Runs on the GPU machine (the H200) over a copy of the tree. Binaries are built on the dev machine
# (tools/stage.sh) and carried in .carry/. Usage:
#   tools/device.sh tests [CATCH_FILTER]   GPU test binaries (all, or those matching the filter)
#   tools/device.sh bench NAME ARGS...     ffpa-bench ARGS, results under $OUT/NAME
# Several steps can be chained: tools/device.sh tests -- bench smoke --config configs/smoke.json
# Logs and results go under $OUT (they come back to the dev machine), one NAME.tgz per bench.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.carry}
OUT=${OUT:-/tmp/ffpa-out}
mkdir -p "$OUT"
cudnn_lib=$(python3 -c "import nvidia.cudnn as m; print(m.__path__[0])" 2>/dev/null)/lib
export LD_LIBRARY_PATH="$cudnn_lib:${LD_LIBRARY_PATH:-}"
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$PWD/.cache}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >"$OUT/nvidia-smi.csv" 2>&1
rc=0
while [ $# -gt 0 ]; do
  step=$1; shift
  args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  case $step in
    tests)
      for t in "$BIN"/gpu_*; do
        echo "== $t ${args[*]:-}"
        "$t" ${args[@]+"${args[@]}"} 2>&1 | tee -a "$OUT/gpu_tests.log" | tail -n 3
        [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
      done ;;
    bench)
      name=${args[0]}; args=("${args[@]:1}")
      echo "== ffpa-bench ${args[*]} (results in $name/)"
      "$BIN/ffpa-bench" "${args[@]}" --out "$OUT/$name" >"$OUT/$name.stdout" 2>"$OUT/$name.log"
      r=$?; [ $r -eq 0 ] || rc=1
      echo "exit $r"; tail -n 40 "$OUT/$name.stdout"
      # The device tool returns at most 8 files: one archive per run (results, stdout, log).
      tar -czf "$OUT/$name.tgz" -C "$OUT" "$name" "$name.stdout" "$name.log" &&
        rm -rf "${OUT:?}/$name" "$OUT/$name.stdout" "$OUT/$name.log" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
exit $rc
