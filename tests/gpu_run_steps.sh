#!/bin/sh
# tools/gpu-run.sh's packed binaries and BUDGET, with fake test binaries (no GPU): the binaries
# come out of $BIN/bins.tar.xz before the first step; under BUDGET a step's timeout is cut to the
# seconds left (a binary stopped there gets a line saying so) and a step with fewer than 15 left
# is skipped, with a line and exit status 1.
#   tests/gpu_run_steps.sh SOURCE_DIR
set -eu
src=$1
. "$(dirname "$0")/sh_support.sh"
mkdir -p "$tmp/pack" "$tmp/stage"
printf '#!/bin/sh\necho "fake ran $*"\n' >"$tmp/pack/gpu_fake"
printf '#!/bin/sh\nsleep 60\n' >"$tmp/pack/gpu_slow"
chmod +x "$tmp/pack/gpu_fake" "$tmp/pack/gpu_slow"
tar -cJf "$tmp/stage/bins.tar.xz" -C "$tmp/pack" gpu_fake gpu_slow
run() { OUT=$tmp/out BIN=$tmp/stage "$@" bash "$src/tools/gpu-run.sh" tests fake one -- \
  tests slow -- tests fake two; }

before=$(date +%s)
if run env BUDGET=17 >"$tmp/stdout" 2>&1; then
  fail "a chain cut by its budget exited 0: $(cat "$tmp/stdout")"
fi
took=$(($(date +%s) - before))
[ ! -e "$tmp/stage/bins.tar.xz" ] || fail "the archive is left beside the unpacked binaries"
[ -x "$tmp/stage/gpu_fake" ] || fail "gpu_fake not unpacked"
grep -q "fake ran one" "$tmp/out/gpu_tests.log" || fail "the first step did not run"
grep -q "^== skipped: tests fake two (budget spent" "$tmp/stdout" ||
  fail "no skip line for the last step: $(cat "$tmp/stdout")"
! grep -q "fake ran two" "$tmp/out/gpu_tests.log" || fail "the last step ran past the budget"
# The slow step was stopped at the budget (17 s), not at its own 60 s or TEST_TIMEOUT's 300,
# and the log says it was stopped (Catch would report the stop as a failed case).
[ "$took" -lt 45 ] || fail "the chain took $took s under a 17 s budget"
grep -q "^== .*gpu_slow stopped at its time limit" "$tmp/out/gpu_tests.log" ||
  fail "no stop line for the slow binary: $(cat "$tmp/out/gpu_tests.log")"
! grep -q "gpu_fake stopped" "$tmp/out/gpu_tests.log" || fail "a stop line for a finished binary"

# Without BUDGET every step runs (nothing slow this time).
rm -rf "$tmp/out"
OUT=$tmp/out BIN=$tmp/stage bash "$src/tools/gpu-run.sh" tests fake one -- tests fake two \
  >"$tmp/stdout" 2>&1 || fail "an unbounded chain failed: $(cat "$tmp/stdout")"
grep -q "fake ran two" "$tmp/out/gpu_tests.log" || fail "the second step did not run"
echo "gpu-run steps: ok"
