// Tuning grids: which knob values `--tune fast` and `--tune max` try for one FFPA variant.
// One JSON file per variant, configs/grids/<variant>.json; the format is in
// configs/grids/README.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "tuning/mode.hpp"
#include "variants/op.hpp"

namespace ffpa {

struct GridKnob {
  std::string name;
  std::vector<int64_t> values;  // every value, in file order: --tune max
  std::vector<int64_t> fast;    // the subset --tune fast tries, in file order
};

struct Grid {
  std::string file;     // where it was loaded from, for messages
  std::string variant;  // the variant it tunes
  std::string comment;
  std::vector<GridKnob> knobs;  // in file order: the order of every Knobs it produces
  std::vector<std::string> knob_names() const;
};

// A grid larger than this in max mode is refused: a typo must not start a day-long search.
constexpr int64_t kMaxGridPoints = 100000;

// Parses and validates a grid. `where` names the source in errors. Throws InputError(where,
// JSON pointer, reason) for invalid JSON, unknown or missing keys, wrong types, empty or
// duplicate value lists, fast values that are not knob values, and oversized grids.
Grid parse_grid(const std::string& text, const std::string& where);
// parse_grid on a file; InputError if it cannot be read.
Grid load_grid(const std::string& path);
// Loads <dir>/<variant>.json and checks that it names `variant`.
Grid load_variant_grid(const std::string& variant, const std::string& dir);

// The configurations a tuning mode tries: the cartesian product of the knob values (max) or of
// the fast subsets (fast), the last knob varying fastest, each Knobs in the grid's knob order.
// none: empty, the runner uses the variant's default_knobs(problem) (or a cached configuration).
std::vector<Knobs> grid_points(const Grid&, TuneMode);
int64_t grid_size(const Grid&, TuneMode);

// Whether the grid declares exactly the variant's knobs, in the same order, so that a variant and
// its grid cannot drift apart (the reason names the difference).
Support check_grid_matches(const Grid&, const std::vector<std::string>& knob_names);

}  // namespace ffpa
