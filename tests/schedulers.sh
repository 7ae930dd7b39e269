#!/bin/sh
# The Slurm and Kubernetes recipes in tools/ shard a plan exactly: every array task (pod) runs its
# --shard, and the shards' --dry-run tables together hold every plan item once.
#   tests/schedulers.sh FFPA_BENCH SOURCE_DIR
set -eu
bench=$1
cd "$2"
. "$(dirname "$0")/sh_support.sh"
items() { sed -n 's/^| \([0-9][0-9]*\) |.*/\1/p'; }  # the "#" column of --dry-run

# Slurm: 3 array tasks of the batch script (its #SBATCH lines are comments to sh).
args="--config configs/smoke.json --D 320,512 --dry-run"
# shellcheck disable=SC2086
"$bench" $args | items | sort -n >"$tmp/whole"
[ -s "$tmp/whole" ] || fail "no plan items in the unsharded --dry-run"
: >"$tmp/slurm"
for i in 0 1 2; do
  # shellcheck disable=SC2086
  SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_COUNT=3 FFPA_BENCH=$bench FFPA_OUT=$tmp/out \
    bash tools/slurm/ffpa-bench.sbatch $args >"$tmp/task$i"
  grep -q "(shard $i/3 of a plan of" "$tmp/task$i" || fail "Slurm task $i did not run shard $i/3"
  items <"$tmp/task$i" >>"$tmp/slurm"
done
sort -n "$tmp/slurm" | cmp -s - "$tmp/whole" || fail "Slurm shards do not partition the plan"

# Kubernetes: the Indexed Job's command and environment, run once per completion index.
python3 - tools/k8s/ffpa-bench-shards.yaml tools/k8s/ffpa-bench-merge.yaml >"$tmp/k8s" <<'PY'
import shlex, sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
merge = yaml.safe_load(open(sys.argv[2]))["spec"]["template"]["spec"]["containers"][0]
spec = job["spec"]
c = spec["template"]["spec"]["containers"][0]
env = {e["name"]: e["value"] for e in c["env"]}
assert spec["completionMode"] == "Indexed", "not an Indexed Job"
assert spec["completions"] == int(env["FFPA_SHARDS"]), "completions != FFPA_SHARDS"
assert spec["parallelism"] <= spec["completions"], "parallelism > completions"
assert merge["command"][-1] == env["FFPA_OUT"], "the merge Job reads another directory"
# The image holds the repository at workingDir; here it is the current directory.
command = [a.replace(c["workingDir"] + "/", "./", 1) for a in c["command"]]
print(spec["completions"])
print(shlex.join(command))
PY
n=$(sed -n 1p "$tmp/k8s")
command=$(sed -n 2p "$tmp/k8s")
# The manifest's own arguments plus a --dry-run: the same plan, no GPU.
eval "set -- $command --config configs/smoke.json --dry-run"
prog=$1
shift
"$bench" "$@" | items | sort -n >"$tmp/whole"
: >"$tmp/pods"
i=0
while [ "$i" -lt "$n" ]; do
  JOB_COMPLETION_INDEX=$i FFPA_SHARDS=$n FFPA_BENCH=$bench FFPA_OUT=$tmp/out \
    "$prog" "$@" >"$tmp/pod$i"
  grep -q "(shard $i/$n of a plan of" "$tmp/pod$i" || fail "pod $i did not run shard $i/$n"
  items <"$tmp/pod$i" >>"$tmp/pods"
  i=$((i + 1))
done
sort -n "$tmp/pods" | cmp -s - "$tmp/whole" || fail "Kubernetes shards do not partition the plan"

# Without an index the script refuses.
if FFPA_SHARDS=2 FFPA_BENCH=$bench tools/run-shard.sh --dry-run 2>/dev/null; then
  fail "run-shard.sh ran without a shard index"
fi
echo "ok: Slurm 3 tasks, Kubernetes $n pods"
