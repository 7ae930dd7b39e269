// Splitting a plan for job arrays (--shard I/N) and ordering it for a worker pool (--devices).
// Pure host code: the split depends only on the plan, so every host computes the same one for the
// same config and flags.
#pragma once

#include <string>
#include <vector>

#include "core/results.hpp"
#include "plan/plan.hpp"

namespace ffpa {

// Item indices (into plan.items) from the most estimated cost (FLOPs) to the least; ties keep plan
// order. A pool hands rows out in this order so that the longest row does not start last.
std::vector<int> longest_first(const Plan&);

// The shard (0..count-1) of every item: greedy longest-processing-time, each item in turn of
// longest_first() to the shard with the least estimated cost so far (lowest number on a tie).
std::vector<int> shard_assignment(const Plan&, int count);

// Keeps the items of shard `index` of `count`, in plan order; each keeps its PlanItem::index.
void keep_shard(Plan&, int index, int count);

// The flags that decide which rows a run has and how they are measured, in one canonical line:
// shards (and merged files) of one run agree on it. Output, device, cache and verbosity flags are
// left out.
std::string run_flags(const PlanRequest&, const RunSettings&);

// FNV-1a of the config file's bytes, 16 hex digits. Throws InputError naming the file when it
// cannot be read.
std::string config_hash(const std::string& path);

// What a results file of this plan records about it.
PlanInfo plan_info(const Plan&);

}  // namespace ffpa
