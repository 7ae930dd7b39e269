#!/bin/sh
# One shard of an ffpa-bench run under a job-array scheduler. The shard number comes from the
# scheduler (Slurm: SLURM_ARRAY_TASK_ID; Kubernetes Indexed Job: JOB_COMPLETION_INDEX), the shard
# count from FFPA_SHARDS (under Slurm SLURM_ARRAY_TASK_COUNT by default). Each shard writes into
# $FFPA_OUT/shard-I: its results and, unless FFPA_TUNING_CACHE names a shared one (the cache is
# saved under a file lock), its own tuning cache. tools/merge-shards.sh puts them together.
#
#   FFPA_SHARDS=8 JOB_COMPLETION_INDEX=3 tools/run-shard.sh --tune max --D 320,512,1024
#
# FFPA_BENCH: the ffpa-bench binary (default build/ffpa-bench). Arguments go to ffpa-bench; the
# shard's --shard, --out and --tuning-cache come first so that an argument given here fails as a
# duplicate rather than silently winning.
set -eu
index=${SLURM_ARRAY_TASK_ID:-${JOB_COMPLETION_INDEX:-}}
count=${FFPA_SHARDS:-${SLURM_ARRAY_TASK_COUNT:-}}
if [ -z "$index" ]; then
  echo "run-shard.sh: neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX is set" >&2
  exit 2
fi
if [ -z "$count" ]; then
  echo "run-shard.sh: FFPA_SHARDS (the number of shards) is not set" >&2
  exit 2
fi
out=${FFPA_OUT:-ffpa-out}/shard-$index
exec "${FFPA_BENCH:-build/ffpa-bench}" --shard "$index/$count" --out "$out" \
  --tuning-cache "${FFPA_TUNING_CACHE:-$out/tuning.json}" "$@"
