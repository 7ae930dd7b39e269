// The results data model: what a run measured. The runner fills it, the report layer renders and
// serializes it (report/results_json.hpp), compare diffs two of them. Nothing here formats text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/types.hpp"

namespace ffpa {

// Version 2 renamed the rows' "mask" and "mask_dtype" to "bias" and "bias_dtype"; files of
// version 1 (kResultsSchemaVersionMaskKeys) are still read.
constexpr int kResultsSchemaVersion = 2;
constexpr int kResultsSchemaVersionMaskKeys = kResultsSchemaVersion - 1;

struct TimingStats {
  double median_ms = 0, mean_ms = 0, min_ms = 0, max_ms = 0, stdev_ms = 0;
  int samples = 0;
  double total_gpu_s = 0;     // sum of sample times
  bool timed_out = false;     // stopped by --timeout before the noise target
  double sm_clock_mhz = 0;    // mean SM clock read over the samples (0 if not readable)
  int throttled_samples = 0;  // samples with SM clock < 75% of the default clock
  double rel_stdev() const { return median_ms > 0 ? stdev_ms / mean_ms : 0; }
};

struct TensorCheck {
  std::string tensor;  // "o", "lse", "dq", "dk", "dv", "dbias"
  double max_abs = 0;  // max |out - ref_fp32|
  double rel_rms = 0;  // ||out - ref_fp32||_2 / ||ref_fp32||_2
  double bound = 0;    // 2 * max|ref_lowprec - ref_fp32| + atol
  int64_t nonfinite = 0;
  bool pass = false;
  std::string note;  // set when the tensor was not compared: why (e.g. "different RNG stream")
};

enum class Status { ok, failed, skipped };
std::string to_string(Status);
std::optional<Status> parse_status(const std::string&);

// One configuration a tuning search tried: its median time (the search's short timing, not the
// row's final one), or why it did not run.
struct Trial {
  Knobs config;
  double median_ms = 0;  // the first pass's time; 0 when it did not run
  std::string reason;    // why it did not run (refused, did not compile, failed); empty when timed
  double sm_clock_mhz = 0;  // the first pass's mean SM clock (0 if not read)
  double final_ms = 0;  // the mean of its times in the finals (tuning/finals.hpp); 0 if not in them
};

// One implementation measured on one row: an FFPA variant or a baseline.
struct Measurement {
  std::string impl;  // "ffpa-fwd-sm80", "cudnn", "unfused"
  std::string kind;  // "ffpa" or "baseline"
  Status status = Status::skipped;
  std::string reason;         // why skipped or failed; empty when ok
  Knobs config;               // tuning parameters used (FFPA variants)
  std::string config_source;  // "default", "tuned", "cache"
  std::vector<Trial> trials;  // a search's configurations in grid order; empty without a search
  TimingStats timing;
  double tflops = 0;
  int64_t peak_mem_bytes = 0;   // peak device memory the tool held while running this row
  int64_t extra_mem_bytes = 0;  // workspace beyond inputs/outputs (e.g. unfused S/P)
  std::string includes;         // what the timed region covers (e.g. bwd: "preprocess+dkdv+dq")
  bool checked = false;
  std::vector<TensorCheck> checks;
  bool correct() const;  // checked and every tensor passed
};

// The GPU a row ran on; index -1 when not known (files written before rows named it).
struct DeviceRef {
  std::string host;
  int index = -1;  // CUDA device ordinal on that host
  bool operator==(const DeviceRef& o) const { return host == o.host && index == o.index; }
};

struct Row {
  int plan_index = -1;  // PlanItem::index; -1 in files written before rows carried it
  DeviceRef device;
  std::string case_name;
  Pass pass = Pass::fwd;
  Dtype dtype = Dtype::bf16;
  Shape shape;
  Causal causal = Causal::none;
  BiasKind bias = BiasKind::none;
  BiasDtype bias_dtype = BiasDtype::fp32;
  double dropout = 0;
  double flops = 0;
  std::optional<Measurement> ffpa;       // best FFPA variant (absent when none is registered)
  std::vector<Measurement> ffpa_others;  // the pass's other FFPA variants (slower or refused)
  std::vector<Measurement> baselines;    // in the order of --baseline
  std::string key() const;               // "case/pass/dtype/B.Hq.Hkv.Nq.Nkv.D": stable row id
};

struct Environment {
  std::string gpu;
  std::string arch;
  int sm_count = 0;
  int sm_clock_mhz = 0;
  int memory_clock_mhz = 0;
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;
  std::string driver;
  std::string cuda_runtime;
  std::string cudnn;  // version actually loaded, or "not loaded"
  std::string git_commit;
  std::string build_flags;
  std::string command_line;
  std::string started_at;  // ISO 8601 UTC
  std::string host;
};

// The plan a results file belongs to and the part of it the file holds: what `merge` checks
// before it puts shards together.
struct PlanInfo {
  std::string config;       // the case matrix file as found
  std::string config_hash;  // FNV-1a of its bytes, 16 hex digits
  std::string flags;        // the options that decide the rows and how they are measured
  int total = 0;            // items of the whole plan
  int shard = 0, shards = 1;
  std::vector<int> items;  // plan indices this file is to hold, ascending
  bool operator==(const PlanInfo& o) const {
    return config == o.config && config_hash == o.config_hash && flags == o.flags &&
           total == o.total && shard == o.shard && shards == o.shards && items == o.items;
  }
};

struct Results {
  int schema_version = kResultsSchemaVersion;  // loaded files are upgraded to it in memory
  std::string tool_version;
  Environment env;
  std::string timing_mode;       // "cold", "hot" or "profile" (one launch a row, --profile)
  std::optional<PlanInfo> plan;  // absent in files written before --shard existed
  std::vector<Row> rows;
  bool complete = false;  // false while a sweep is still running or was interrupted
};

// Measurements that failed: status failed, or checked and wrong. A run with any exits 1.
int failed_measurements(const Results&);

}  // namespace ffpa
