#!/bin/sh
# tools/gpu-run.sh's ncu step, with a fake ncu and a fake ffpa-bench (no GPU): the profile runs
# `ffpa-bench --profile ARGS` under `ncu --set full -k regex:KERNEL --launch-count 1 -o NAME`,
# then the details page and the gzipped source page are exported, the report is dropped and
# tools/ncu_stalls.py summarises the source page; a failed profile fails the step.
#   tests/gpu_run_ncu.sh SOURCE_DIR
set -eu
src=$1
. "$(dirname "$0")/sh_support.sh"
mkdir -p "$tmp/stage"
# The fake ncu: a profile (-o REPORT) logs its arguments and writes REPORT.ncu-rep; an import
# (-i) prints a details page or a two-instruction source page.
cat >"$tmp/ncu" <<'FAKE'
#!/bin/sh
if [ "$1" = -i ]; then
  case "$*" in
    *"--page details"*) echo "    Duration                         ms         1.25" ;;
    *"--page source"*)
      echo '"Kernel Name","fake_kernel",'
      echo '"Address","Source","Warp Stall Sampling (All Samples)","stall_wait"'
      echo '"0x100","      HGMMA.64x64x16.F32.BF16 R0","30","30"'
      echo '"0x110","      EXIT","10","10"' ;;
  esac
  exit 0
fi
echo "$*" >>"$FAKE_LOG"
[ -n "${FAKE_FAIL:-}" ] && exit 1
while [ $# -gt 0 ]; do
  [ "$1" = -o ] && { touch "$2.ncu-rep"; break; }
  shift
done
FAKE
chmod +x "$tmp/ncu"
run() {
  OUT=$tmp/out BIN=$tmp/stage NCU=$tmp/ncu FAKE_LOG=$tmp/calls "$@" \
    bash "$src/tools/gpu-run.sh" ncu prof 'ffpa_bwd_sm90c_kernel' --case self-attn --D 512
}
(cd "$src" && run env) >"$tmp/stdout" 2>&1 || fail "ncu step failed: $(cat "$tmp/stdout")"
grep -q -- "--set full --import-source no -k regex:ffpa_bwd_sm90c_kernel --launch-count 1 -o $tmp/out/prof $tmp/stage/ffpa-bench --profile --case self-attn --D 512 --out $tmp/out/prof-run" "$tmp/calls" ||
  fail "profile command: $(cat "$tmp/calls")"
[ -s "$tmp/out/prof-details.txt" ] || fail "no details page"
gzip -dc "$tmp/out/prof-sass.csv.gz" | grep -q HGMMA || fail "no source page"
[ ! -e "$tmp/out/prof.ncu-rep" ] || fail "the report is kept without NCU_KEEP"
grep -q "fake_kernel: 2 instructions, 40 samples" "$tmp/stdout" || fail "no summary: $(cat "$tmp/stdout")"
grep -q "Duration" "$tmp/stdout" || fail "no duration printed"
(cd "$src" && run env NCU_KEEP=1) >"$tmp/stdout" 2>&1 || fail "NCU_KEEP run failed"
[ -e "$tmp/out/prof.ncu-rep" ] || fail "NCU_KEEP=1 dropped the report"
if (cd "$src" && run env FAKE_FAIL=1) >"$tmp/stdout" 2>&1; then
  fail "a failed profile passed"
fi
grep -q "no report" "$tmp/stdout" || fail "no reason for the failed profile: $(cat "$tmp/stdout")"
echo "gpu-run ncu: ok"
