// One CSV line per row x implementation with every number the run recorded, for spreadsheets
// and scripts. RFC 4180 quoting; numbers in their shortest exact form; a field that does not
// apply (timing of a skipped measurement, speedup without both times) is empty.
//
// speedup_vs_<baseline> = that baseline's median / this line's median, one column per baseline
// that appears anywhere in the results (1 on the baseline's own line). worst_tensor is the check
// with the largest max_abs / bound; checks lists every tensor check as "tensor=max_abs/bound"
// joined by ';'.
#pragma once

#include <string>
#include <vector>

#include "core/results.hpp"

namespace ffpa {

std::string render_csv(const Results&);
// Quotes a field when it holds a comma, a quote, a line break or edge spaces.
std::string csv_field(const std::string&);

}  // namespace ffpa
