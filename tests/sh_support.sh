# Sourced by the host tests written in sh (gpu_run_ab.sh, gpu_run_ncu.sh, ncu_stalls.sh,
# schedulers.sh): a temporary folder $tmp removed at exit, and fail MESSAGE (to stderr, exit 1).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
