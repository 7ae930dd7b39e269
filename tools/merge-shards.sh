#!/bin/sh
# The last step of a sharded run: merges DIR/shard-*/ffpa_*_results.json (tools/run-shard.sh) into
# DIR/merged/results.json with its tables, CSV and chart, and the shards' tuning caches into
# FFPA_TUNING_CACHE (default DIR/merged/tuning.json), the fastest entry per key. Exit 2 when a
# shard is missing or incomplete, or the shards are not of one run (ffpa-bench merge lists why);
# FFPA_ALLOW_MIXED=1 merges shards of different tool versions, GPU models, configs or flags.
#
#   tools/merge-shards.sh [DIR]     DIR: FFPA_OUT of the shards, default ffpa-out
#
# FFPA_BENCH: the ffpa-bench binary (default build/ffpa-bench).
set -eu
dir=${1:-${FFPA_OUT:-ffpa-out}}
set --
for c in "$dir"/shard-*/tuning.json; do
  if [ -e "$c" ]; then set -- "$@" "$c"; fi
done
if [ $# -gt 0 ]; then
  set -- --tuning-cache "${FFPA_TUNING_CACHE:-$dir/merged/tuning.json}" --caches "$@"
fi
if [ -n "${FFPA_ALLOW_MIXED:-}" ]; then set -- --allow-mixed "$@"; fi
set -- "$@" -- "$dir/merged/results.json"
for f in "$dir"/shard-*/ffpa_*_results.json; do
  if [ ! -e "$f" ]; then
    echo "merge-shards.sh: no shard results in $dir/shard-*/" >&2
    exit 2
  fi
  set -- "$@" "$f"
done
mkdir -p "$dir/merged"
exec "${FFPA_BENCH:-build/ffpa-bench}" merge "$@"
