#!/usr/bin/env bash
# Stages a build for a GPU machine: builds for sm_90a (H100/H200, one arch to stay small) into
# build-dev/, compiles the kernels a run will need into a cubin cache (ARGS: the ffpa-bench
# arguments of that run; none: the default matrix), and packs the binaries (bins.tar.xz) and the
# cache (cubins.tar.xz) into .stage/ (git-ignored). STAGE_TESTS: the GPU test binaries to take, a
# comma list of names without gpu_ (default all; none: no test binary), to stay under a transfer
# limit. Copy the tree with .stage/ to the GPU machine and run tools/gpu-run.sh
# there. Usage: tools/stage.sh [FFPA-BENCH ARGS...] [-- ARGS OF ANOTHER RUN ...]: the kernels of
# every run (sets of arguments separated by --) go into the one cache.
# STAGE_DIR: the folder to stage into instead of .stage (one staged run can then travel while the
# next is compiled; tools/gpu-run.sh reads it as BIN).
# STAGE_BASE=REV also stages REV's ffpa-bench as .stage/ffpa-bench-base, with its kernels of the
# run in the same cache and its own grids in .stage/base-grids (REV's knobs may differ): the
# baseline of `tools/gpu-run.sh ab` (built in build-base/, a worktree of its own, kept between
# stagings so that a new REV rebuilds only what changed).
set -euo pipefail
cd "$(dirname "$0")/.." || exit 2
stage=${STAGE_DIR:-.stage}
BUILD_DIR=build-dev FFPA_CUDA_ARCHS=90a tools/build.sh >/dev/null
rm -rf "$stage" && mkdir -p "$stage"/cache
stage_abs=$(cd "$stage" && pwd)
cp build-dev/ffpa-bench "$stage"/
if [ -n "${STAGE_BASE:-}" ]; then
  rev=$(git rev-parse --verify "$STAGE_BASE^{commit}")
  if [ -d build-base/src ]; then
    git -C build-base/src checkout -q --detach "$rev"
  else
    git worktree prune
    git worktree add -q --detach build-base/src "$rev"
  fi
  (cd build-base/src && BUILD_DIR=../build FFPA_CUDA_ARCHS=90a BUILD_TARGET=ffpa-bench \
    tools/build.sh >/dev/null)
  cp build-base/build/ffpa-bench "$stage"/ffpa-bench-base
  cp -r build-base/src/configs/grids "$stage"/base-grids
fi
for t in build-dev/tests/gpu_*; do
  [ -f "$t" ] && [ -x "$t" ] || continue
  case ${STAGE_TESTS:-all} in
    all) ;;
    *) [[ ",$STAGE_TESTS," == *",${t##*/gpu_},"* ]] || continue ;;
  esac
  cp "$t" "$stage"/
done
strip "$stage"/ffpa-bench* "$stage"/gpu_* 2>/dev/null || true
# The GPU machine has the CUDA toolkit and cuDNN but not every library we link (Cairo for the
# charts): carry the rest; tools/gpu-run.sh puts the staged lib/ on the library path.
mkdir -p "$stage"/lib
ldd "$stage"/ffpa-bench | awk '/=> \// {print $3}' |
  grep -v -E '/lib(c|m|stdc\+\+|gcc_s|pthread|dl|rt|cuda|cudnn[^/]*|nvrtc[^/]*|cublas[^/]*|cudart)\.so' |
  xargs -r cp -L -t "$stage"/lib/
compile_with() {  # BINARY ARGS: the kernels `BINARY ARGS` would use, into the staged cache
  local bench=$1
  shift
  XDG_CACHE_HOME="$stage_abs"/cache $bench "$@" --compile-only sm_90a \
    --tuning-cache "$stage"/cache/no-tuning.json >/dev/null
}
compile_run() {  # for each staged binary, with its grids
  compile_with build-dev/ffpa-bench "$@"
  [ -z "${STAGE_BASE:-}" ] ||
    FFPA_GRIDS_DIR="$stage_abs"/base-grids compile_with "$stage"/ffpa-bench-base "$@"
}
run_args=()
for a in "$@"; do
  if [ "$a" = "--" ]; then
    compile_run "${run_args[@]}"
    run_args=()
  else
    run_args+=("$a")
  fi
done
compile_run "${run_args[@]}"
rm -f "$stage"/cache/no-tuning.json
# Cubins compress ~10x, binaries ~3x: the transfer to the GPU machine is limited to tens of MiB.
tar -cJf "$stage"/cubins.tar.xz -C "$stage"/cache ffpa-bench && rm -rf "$stage"/cache
(cd "$stage" && shopt -s nullglob && bins=(ffpa-bench* gpu_* lib) &&
  tar -cJf bins.tar.xz "${bins[@]}" && rm -rf "${bins[@]}")
du -sh "$stage"
