#!/usr/bin/env bash
# Runs on the GPU machine over a copy of the tree that holds .stage/ (tools/stage.sh: binaries
# and the kernels compiled ahead). Usage:
#   tools/gpu-run.sh tests [WHICH [FILTER]]  GPU test binaries: WHICH = all or a comma list
#                                            (ffpa_bwd,cudnn), FILTER = Catch test filter
#   tools/gpu-run.sh bench NAME ARGS...     ffpa-bench ARGS, results under $OUT/NAME
#   tools/gpu-run.sh ab NAME ARGS...        alternated A/B: BENCH_BASE (a baseline ffpa-bench
#                                            staged beside) and the staged one run ARGS in turn,
#                                            AB_PAIRS times (default 2): NAME/base-I, NAME/new-I,
#                                            and `compare` of each pair in NAME/compare-I.md; the
#                                            baseline reads its grids from BASE_GRIDS_DIR
#                                            (default $BIN/base-grids where staged)
#   tools/gpu-run.sh ncu NAME KERNEL ARGS...    Nsight Compute (--set full) on the first launch
#                                            of kernel KERNEL (a regex) in `ffpa-bench --profile
#                                            ARGS`: NAME-details.txt (details page) and
#                                            NAME-sass.csv.gz (source page, for
#                                            tools/ncu_stalls.py); the report itself is dropped
#                                            (NCU_KEEP=1 keeps NAME.ncu-rep); NCU names the ncu
#                                            binary when it is not on the PATH
# Several steps can be chained: tools/gpu-run.sh tests -- bench smoke --config configs/smoke.json
# Logs and results go under $OUT (default gpu-out/), one NAME.tgz per bench, to be copied back.
# Benches share the tuning cache $OUT/tuning.json, seeded from .stage/tuning.json when present.
# BENCH_TIMEOUT (seconds) stops a bench early with BENCH_SIGNAL (default TERM; INT is Ctrl-C): its
# finished rows and its tuning cache are kept. BENCH names another ffpa-bench binary (an experiment
# build staged beside the normal one). BUDGET (seconds) bounds the whole chain, for a machine lent
# by the call: each step's bench and test timeouts are cut to what is left, and a step that would
# start with less than 15 s left is skipped with a line that says so (the exit status is then 1).
# A test binary stopped at its timeout gets a line in gpu_tests.log that says so.
# The binaries come packed ($BIN/bins.tar.xz, tools/stage.sh) and are unpacked first.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BIN=${BIN:-.stage}
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
cudnn_lib=$(python3 -c "import nvidia.cudnn as m; print(m.__path__[0])" 2>/dev/null)/lib
export LD_LIBRARY_PATH="$cudnn_lib:$PWD/$BIN/lib:${LD_LIBRARY_PATH:-}"
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$PWD/.cache}
mkdir -p "$XDG_CACHE_HOME"
if [ -f "$BIN/bins.tar.xz" ]; then
  tar -xJf "$BIN/bins.tar.xz" -C "$BIN" && rm -f "$BIN/bins.tar.xz"
fi
[ -f "$BIN/cubins.tar.xz" ] && tar -xJf "$BIN/cubins.tar.xz" -C "$XDG_CACHE_HOME"
[ -f "$BIN/tuning.json" ] && cp "$BIN/tuning.json" "$OUT/tuning.json"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >"$OUT/nvidia-smi.csv" 2>&1
# One ffpa-bench run under BENCH_TIMEOUT: BINARY OUT_DIR TUNING_CACHE LOG_PREFIX ARGS... (stdout
# and stderr into LOG_PREFIX.stdout and .log); returns the run's status.
run_bench() {
  local bin=$1 out=$2 cache=$3 logs=$4
  shift 4
  timeout -s "${BENCH_SIGNAL:-TERM}" "${BENCH_TIMEOUT:-3600}" "$bin" "$@" --out "$out" \
    --tuning-cache "$cache" >"$logs.stdout" 2>"$logs.log"
}
# Under BUDGET: cuts BENCH_TIMEOUT and TEST_TIMEOUT to the seconds left; fails (says what it
# skips: WHAT) when fewer than 15 are left.
start=$SECONDS
within_budget() {
  [ -n "${BUDGET:-}" ] || return 0
  local left=$((BUDGET - (SECONDS - start)))
  if [ "$left" -lt 15 ]; then
    echo "== skipped: $* (budget spent: ${left} s left)"
    return 1
  fi
  BENCH_TIMEOUT=$((${BENCH_TIMEOUT:-3600} < left ? ${BENCH_TIMEOUT:-3600} : left))
  TEST_TIMEOUT=$((${TEST_TIMEOUT:-300} < left ? ${TEST_TIMEOUT:-300} : left))
}
rc=0
while [ $# -gt 0 ]; do
  step=$1; shift
  args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  within_budget "$step ${args[*]}" || { rc=1; continue; }
  case $step in
    tests)
      which=${args[0]:-all}; filter=("${args[@]:1}")
      for t in "$BIN"/gpu_*; do
        [ "$which" = all ] || [[ ",$which," == *",${t##*/gpu_},"* ]] || continue
        echo "== $t ${filter[*]:-}"
        # A hung kernel must not eat the whole call.
        timeout "${TEST_TIMEOUT:-300}" "$t" ${filter[@]+"${filter[@]}"} 2>&1 |
          tee -a "$OUT/gpu_tests.log" | tail -n 3
        st=${PIPESTATUS[0]}
        # Catch reports the SIGTERM as a failure of the case it was in: say what it was.
        [ "$st" -ne 124 ] || echo "== $t stopped at its time limit (${TEST_TIMEOUT:-300} s): the" \
          "case it was in and the cases after it did not finish (the stop is not a failed check)" |
          tee -a "$OUT/gpu_tests.log"
        [ "$st" -eq 0 ] || rc=1
      done ;;
    bench)
      name=${args[0]}; args=("${args[@]:1}")
      echo "== ffpa-bench ${args[*]} (results in $name/)"
      run_bench "${BENCH:-$BIN/ffpa-bench}" "$OUT/$name" "$OUT/tuning.json" "$OUT/$name" \
        "${args[@]}"
      r=$?; [ $r -eq 0 ] || rc=1
      echo "exit $r"; tail -n 40 "$OUT/$name.stdout"
      # One archive per run (results, stdout, log): one file to copy back.
      tar -czf "$OUT/$name.tgz" -C "$OUT" "$name" "$name.stdout" "$name.log" &&
        rm -rf "${OUT:?}/$name" "$OUT/$name.stdout" "$OUT/$name.log" ;;
    ab)
      # Alternation puts the machine's drift (clocks, temperature, other tenants) on both sides;
      # each side keeps its own tuning cache, so that neither runs the other's choice.
      name=${args[0]}; args=("${args[@]:1}")
      base_bin=${BENCH_BASE:?ab needs BENCH_BASE: the baseline ffpa-bench binary}
      new_bin=${BENCH:-$BIN/ffpa-bench}
      base_grids=${BASE_GRIDS_DIR:-}
      if [ -z "$base_grids" ] && [ -d "$BIN/base-grids" ]; then
        base_grids=$(cd "$BIN/base-grids" && pwd)
      fi
      mkdir -p "$OUT/$name"
      for i in $(seq 1 "${AB_PAIRS:-2}"); do
        for side in base new; do
          bin=$new_bin; [ "$side" = base ] && bin=$base_bin
          within_budget "$side-$i" || { rc=1; continue; }
          echo "== $side-$i: $bin ${args[*]}"
          (
            if [ "$side" = base ] && [ -n "$base_grids" ]; then
              export FFPA_GRIDS_DIR=$base_grids
            fi
            run_bench "$bin" "$OUT/$name/$side-$i" "$OUT/$name/tuning-$side.json" \
              "$OUT/$name/$side-$i" "${args[@]}"
          ) || rc=1
        done
        # The verdict is the reading, not the step's status: a slower NEW is a result too.
        "$new_bin" compare --threshold "${AB_THRESHOLD:-1}" "$OUT/$name/base-$i/"*_results.json \
          "$OUT/$name/new-$i/"*_results.json >"$OUT/$name/compare-$i.md" 2>&1
        grep -E '^\*\*Result|^\| ' "$OUT/$name/compare-$i.md"
      done
      tar -czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "${OUT:?}/$name" ;;
    ncu)
      name=${args[0]}; kernel=${args[1]}; args=("${args[@]:2}")
      ncu=${NCU:-ncu}
      echo "== ncu $kernel: ffpa-bench --profile ${args[*]} (results in $name-*)"
      timeout "${BENCH_TIMEOUT:-3600}" "$ncu" --set full --import-source no -k "regex:$kernel" \
        --launch-count 1 -o "$OUT/$name" "${BENCH:-$BIN/ffpa-bench}" --profile "${args[@]}" \
        --out "$OUT/$name-run" >"$OUT/$name.log" 2>&1
      r=$?
      if [ $r -eq 0 ] && [ -f "$OUT/$name.ncu-rep" ]; then
        "$ncu" -i "$OUT/$name.ncu-rep" --page details >"$OUT/$name-details.txt" 2>&1
        "$ncu" -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass |
          gzip >"$OUT/$name-sass.csv.gz"
        [ "${NCU_KEEP:-0}" = 1 ] || rm -f "$OUT/$name.ncu-rep"
        grep -E '^ +Duration|Registers Per Thread' "$OUT/$name-details.txt"
        python3 tools/ncu_stalls.py "$OUT/$name-sass.csv.gz" --top 10 || rc=1
      else
        echo "exit $r, or no report (kernel $kernel not launched?)"; tail -n 5 "$OUT/$name.log"
        rc=1
      fi
      rm -rf "${OUT:?}/$name-run" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
exit $rc
