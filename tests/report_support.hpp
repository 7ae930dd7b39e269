// What the report tests share: a run with every kind of row the renderers must handle, and the
// comparison against golden files.
#pragma once

#include <string>

#include "core/results.hpp"

namespace ffpa::test {

// A run shaped like the default sweep on the H200 with every kind of row the tables must render.
Results sample_results();
// Compares `actual` with tests/golden/<name>; FFPA_UPDATE_GOLDEN=1 rewrites the golden instead (do
// it only on purpose and review the diff).
void check_golden(const std::string& name, const std::string& actual);

}  // namespace ffpa::test
