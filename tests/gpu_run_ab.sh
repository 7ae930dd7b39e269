#!/bin/sh
# tools/gpu-run.sh's ab step, with fake ffpa-bench binaries (no GPU): the two binaries run the
# same arguments in turn (base-1, new-1, base-2, new-2), each side with its own tuning cache, and
# `compare` reads each pair; the baseline reads the grids staged for it (base-grids), the new
# binary the caller's; without BENCH_BASE the step refuses to run.
#   tests/gpu_run_ab.sh SOURCE_DIR
set -eu
src=$1
. "$(dirname "$0")/sh_support.sh"
# A fake ffpa-bench: logs its side and arguments, writes a results file into --out; `compare`
# logs the two files it is given and prints a verdict line.
fake() {
  cat >"$tmp/$1" <<FAKE
#!/bin/sh
if [ "\$1" = compare ]; then
  shift 3  # compare --threshold PCT
  echo "compare \$1 \$2" >>"$tmp/calls"
  echo "**Result: clean** (0 errors)"
  exit 0
fi
out= cache=
while [ \$# -gt 0 ]; do
  case \$1 in
    --out) out=\$2; shift ;;
    --tuning-cache) cache=\$2; shift ;;
  esac
  shift
done
echo "$1 \$out \$cache \${FFPA_GRIDS_DIR:-}" >>"$tmp/calls"
mkdir -p "\$out" && echo '{"side": "$1"}' >"\$out/ffpa_FAKE_results.json"
FAKE
  chmod +x "$tmp/$1"
}
fake base
fake new
run() { OUT=$tmp/out BIN=$tmp/stage "$@" bash "$src/tools/gpu-run.sh" ab pair --config configs/smoke.json; }

mkdir -p "$tmp/stage/base-grids"
run env BENCH_BASE="$tmp/base" BENCH="$tmp/new" AB_PAIRS=2 FFPA_GRIDS_DIR="$tmp/grids" \
  >"$tmp/stdout" 2>&1 || fail "ab exited non-zero: $(cat "$tmp/stdout")"
o=$tmp/out/pair
cat >"$tmp/expected" <<EXP
base $o/base-1 $o/tuning-base.json $tmp/stage/base-grids
new $o/new-1 $o/tuning-new.json $tmp/grids
compare $o/base-1/ffpa_FAKE_results.json $o/new-1/ffpa_FAKE_results.json
base $o/base-2 $o/tuning-base.json $tmp/stage/base-grids
new $o/new-2 $o/tuning-new.json $tmp/grids
compare $o/base-2/ffpa_FAKE_results.json $o/new-2/ffpa_FAKE_results.json
EXP
cmp -s "$tmp/calls" "$tmp/expected" || fail "calls differ: $(diff "$tmp/expected" "$tmp/calls")"
grep -q '^\*\*Result: clean' "$tmp/stdout" || fail "no compare verdict printed"
tar -tzf "$tmp/out/pair.tgz" >"$tmp/listing"
for f in pair/compare-1.md pair/compare-2.md pair/base-2/ffpa_FAKE_results.json pair/new-1.stdout; do
  grep -qx "$f" "$tmp/listing" || fail "$f not in pair.tgz"
done
[ ! -e "$o" ] || fail "the run's folder is left beside its archive"

# Without staged base grids both sides read the caller's.
rm -rf "$tmp/stage/base-grids" "$tmp/out" "$tmp/calls"
run env BENCH_BASE="$tmp/base" BENCH="$tmp/new" AB_PAIRS=1 FFPA_GRIDS_DIR="$tmp/grids" \
  >"$tmp/stdout" 2>&1 || fail "ab exited non-zero: $(cat "$tmp/stdout")"
head -n 1 "$tmp/calls" | grep -qx "base $o/base-1 $o/tuning-base.json $tmp/grids" ||
  fail "base side without staged grids: $(head -n 1 "$tmp/calls")"

if run env -u BENCH_BASE BENCH="$tmp/new" >"$tmp/stdout" 2>&1; then
  fail "ab ran without BENCH_BASE"
fi
grep -q "BENCH_BASE" "$tmp/stdout" || fail "no reason given without BENCH_BASE"
echo "gpu-run ab: ok"
