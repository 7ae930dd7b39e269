// Results <-> JSON (the run's machine-readable record; compare and report read it back).
//
// Schema (schema_version 1): {"schema_version", "tool_version", "complete", "timing_mode",
// "env": {...}, "plan": {"config", "config_hash", "flags", "total", "shard", "shards", "items"},
// "rows": [{"plan_index", "device": {"host", "index"}, "case", "pass", "dtype", "shape":
// {B,Hq,Hkv,Nq,Nkv,D}, "causal", "mask", "mask_dtype", "dropout", "flops", "ffpa": Measurement |
// null, "baselines": [...]}]}. Every field is written and every field is required on reading,
// except those older files lack
// ("plan", "plan_index", "device", "trials", "ffpa_others"); unknown keys are ignored.
// Knobs are written as [[name, value], ...] to keep their order. Doubles round-trip exactly;
// NaN and infinities (possible in error figures) are written as the strings "nan", "inf", "-inf".
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
// Reads and parses a results file; InputError names the file on any failure.
Results load_results(const std::filesystem::path&);

// Writes to a temporary file in the same directory, fsyncs it, renames it over `path` and fsyncs
// the directory: readers (and an interrupted sweep) see the old or the new file, never half of one.
// Creates missing parent directories. Throws RunError on a file system failure.
void write_file_atomic(const std::filesystem::path&, std::string_view bytes);
void write_results_atomic(const std::filesystem::path&, const Results&);

}  // namespace ffpa
