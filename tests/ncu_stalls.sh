#!/bin/sh
# tools/ncu_stalls.py on a small source page written here in Nsight Compute's CSV form (the
# kernel line, the column line, one line an instruction): the reasons' shares, the instructions
# ranked by samples with offsets from the kernel's first address, a range with running shares,
# regions with their opcodes and reasons, gzip input, and exit 2 with the reason for a file that
# is not a source page or a bad option.
#   tests/ncu_stalls.sh SOURCE_DIR
set -eu
src=$1
. "$(dirname "$0")/sh_support.sh"
tool="python3 $src/tools/ncu_stalls.py"
cat >"$tmp/page.csv" <<'CSV'
"Kernel Name","demo_kernel",
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_barrier","stall_long_sb","stall_barrier (Not Issued)"
"0x7f0000001000","      IMAD R1, R2, R3, RZ","10","100","0","10","0"
"0x7f0000001010","      BAR.SYNC.DEFER_BLOCKING 0x0","20","100","20","0","5"
"0x7f0000001020","      LDS R4, [R5]","60","100","50","10","9"
"0x7f0000001030","      FADD R6, R4, R1","10","100","0","10","0"
CSV
out=$($tool "$tmp/page.csv" --top 2)
echo "$out" | grep -q "^demo_kernel: 4 instructions, 100 samples" || fail "header: $out"
echo "$out" | grep -q "barrier *70.0 %" || fail "barrier share: $out"
echo "$out" | grep -q "long_sb *30.0 %" || fail "long_sb share: $out"
# The ranking: LDS (60 %) first, then the barrier (20 %), and no third line.
first=$(echo "$out" | grep "%  " | head -n 1)
echo "$first" | grep -q "^ *20 60.00%  LDS R4, \[R5\]  barrier:50 long_sb:10" || fail "first: $first"
[ "$(echo "$out" | grep -c "%  ")" -eq 2 ] || fail "--top 2: $out"
# A range, running shares, in address order.
out=$($tool "$tmp/page.csv" --from 10 --to 20)
echo "$out" | grep -q "^ *10 20.00%  20.00%" || fail "range first: $out"
echo "$out" | grep -q "^ *20 60.00%  80.00%" || fail "range running: $out"
echo "$out" | grep -q "IMAD" && fail "range holds an instruction before it: $out"
# Regions of 0x20 bytes: [0, 0x20) holds IMAD and the barrier (30 %), [0x20, 0x40) LDS and FADD
# (70 %), each with its opcodes and largest reasons; --min drops the smaller.
out=$($tool "$tmp/page.csv" --regions 20)
echo "$out" | grep -q "^ *0  30.0%  IMAD:1 BAR:1  barrier:20.0 long_sb:10.0" || fail "region 0: $out"
echo "$out" | grep -q "^ *20  70.0%  LDS:1 FADD:1  barrier:50.0 long_sb:20.0" || fail "region 20: $out"
out=$($tool "$tmp/page.csv" --regions 20 --min 50)
echo "$out" | grep -q "IMAD" && fail "--min keeps a smaller region: $out"
# gzip input reads the same.
gzip -c "$tmp/page.csv" >"$tmp/page.csv.gz"
[ "$($tool "$tmp/page.csv.gz" --top 2)" = "$($tool "$tmp/page.csv" --top 2)" ] || fail "gzip"
# Refusals: exit 2 with the file and the reason.
echo "a,b" >"$tmp/other.csv"
set +e
msg=$($tool "$tmp/other.csv" 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] || fail "not a source page: exit $rc"
echo "$msg" | grep -q "other.csv: not an Nsight Compute source page" || fail "message: $msg"
set +e
$tool "$tmp/page.csv" --from 10 >/dev/null 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "--from without --to: exit $rc"
set +e
msg=$($tool "$tmp/page.csv" --regions zz 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] || fail "--regions zz: exit $rc"
echo "$msg" | grep -q "\-\-regions: a positive size" || fail "--regions message: $msg"
echo "ncu_stalls: ok"
