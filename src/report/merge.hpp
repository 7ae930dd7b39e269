// Puts the results files of one run's shards (--shard I/N) back together: one results file in plan
// order, as if one process had run the whole plan.
#pragma once

#include <string>
#include <vector>

#include "core/results.hpp"

namespace ffpa {

struct ResultsFile {
  std::string file;
  Results results;
};

// Refuses (InputError, exit 2) inputs without a plan record, rows without a plan index, rows of
// another plan, duplicate rows and missing rows (each listed), and, unless allow_mixed, inputs
// whose tool version or commit, GPU model, timing mode, config or flags differ from the first
// one's. The result keeps the first input's environment (shards sorted by number); it is complete
// when every input is.
Results merge_results(std::vector<ResultsFile> inputs, bool allow_mixed);

}  // namespace ffpa
