#!/bin/sh
# Submits an N-shard ffpa-bench run as a Slurm array and its merge, which starts when every task
# has ended (afterany: a failed shard still lets merge say which rows are missing).
#
#   tools/slurm/submit.sh N [ffpa-bench args...]      e.g. tools/slurm/submit.sh 8 --tune max
#
# Results: $FFPA_OUT (default ffpa-out)/shard-I/ and, after the merge, .../merged/.
set -eu
n=${1:?usage: submit.sh N [ffpa-bench args...]}
shift
mkdir -p "${FFPA_OUT:-ffpa-out}"
jid=$(sbatch --parsable --array="0-$((n - 1))" tools/slurm/ffpa-bench.sbatch "$@")
sbatch --parsable --dependency="afterany:$jid" --job-name=ffpa-merge \
  --output="${FFPA_OUT:-ffpa-out}/slurm-%j-merge.log" --wrap tools/merge-shards.sh
echo "submitted array $jid (shards 0..$((n - 1))) and its merge"
