// Results <-> JSON (the run's machine-readable record; compare and report read it back).
//
// Schema (schema_version 2; version 1 is read too, with "mask" and "mask_dtype" for "bias" and
// "bias_dtype"; a loaded file is upgraded to the current version in memory): {"schema_version",
// "tool_version", "complete", "timing_mode", "env": {...}, "plan": {"config", "config_hash",
// "flags", "total", "shard", "shards", "items"} | null, "rows": [{"plan_index", "device": {"host",
// "index"}, "case", "pass", "dtype", "shape": {B,Hq,Hkv,Nq,Nkv,D}, "causal", "bias", "bias_dtype",
// "dropout", "flops", "ffpa": Measurement | null, "baselines": [...]}]}. Every field is written and
// every field is required on reading (plan, plan_index, device, trials and ffpa_others may be
// absent in older files); unknown and duplicate keys are refused, and so is an ok measurement
// without a positive, finite median and finite spread, or a check that passes with NaN/Inf. Knobs
// are written as [[name, value], ...] to keep their order. Doubles round-trip exactly; NaN and
// infinities (possible in error figures) are written as the strings "nan", "inf", "-inf".
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/results.hpp"

namespace ffpa {

nlohmann::json to_json(const Results&);
// Throws InputError(file, JSON pointer, reason) on a missing or mistyped field, an unknown enum
// spelling or a schema_version this build does not read.
Results results_from_json(const nlohmann::json&, const std::string& file);
// One row or environment alone, as in a results file (a --devices worker sends them to the pool);
// the readers throw InputError naming `where`.
nlohmann::json row_to_json(const Row&);
Row row_from_json(const nlohmann::json&, const std::string& where);
nlohmann::json env_to_json(const Environment&);
Environment env_from_json(const nlohmann::json&, const std::string& where);
// Parses a results file's text; InputError names `file`, the line and column or JSON pointer.
Results parse_results(const std::string& text, const std::string& file);
// Reads (at most kMaxInputBytes) and parses a results file; InputError names the file on any
// failure.
Results load_results(const std::filesystem::path&);

// The results' JSON, written with write_file_atomic (core/files.hpp).
void write_results_atomic(const std::filesystem::path&, const Results&);

}  // namespace ffpa
