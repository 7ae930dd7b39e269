// Compares two runs (BASE and NEW) measurement by measurement.
//
// Matching: rows by Row::key(); within a row the FFPA slot (Row::ffpa, the best FFPA variant,
// whatever its name, so a change of winning variant is not a disappearance; the change is
// noted) and each baseline by implementation name. A key seen twice in one file: the first wins
// (a warning says so).
//
// Timing rule, with b / n the BASE / NEW medians and sb / sn their sample stdevs:
//   allowed = max(threshold_pct/100 * b, min(noise_k * (sb + sn), kMaxNoisePct/100 * b))
//   slower  iff n - b > allowed;  faster iff b - n > allowed;
//   a change beyond the threshold but inside the noise band is "within noise" (clean).
// Sample stdevs overstate the uncertainty of a median, so noise_k = 2 is conservative: a noisy
// run cannot fail the comparison by its noise alone. The band is capped (a warning says when) so
// that a very noisy run cannot hide a large regression either.
//
// The loader refuses files whose ok measurements lack a positive, finite median or a finite
// stdev (exit 2); an entry without a usable NEW time fails all the same. A NEW measurement that
// was not checked while BASE's was gets a warning.
//
// Errors (exit code kExitRegression):
//   - the FFPA measurement got slower;
//   - any measurement failed in NEW (status failed or wrong results): the unfused baseline is
//     this project's code and a wrong cuDNN result means our binding of it is wrong;
//   - a row that had an ok measurement in BASE is missing from NEW, or its FFPA measurement
//     went from ok to skipped or missing.
// Informational only: baselines getting slower or faster, or disappearing from a row that still
// exists (they follow the installed library versions and --baseline, not this project's
// kernels), FFPA getting faster, new rows and measurements, measurements that now run.
#pragma once

#include <string>
#include <vector>

#include "core/results.hpp"

namespace ffpa {

constexpr int kExitRegression = 1;
constexpr double kMaxNoisePct = 25;  // the widest noise band, percent of BASE

enum class Verdict {
  unchanged,  // within the threshold
  noise,      // beyond the threshold, inside the noise band
  slower,
  faster,
  failed,     // failed or wrong in NEW
  missing,    // in BASE, not in NEW
  skipped,    // ran in BASE, skipped in NEW
  added,      // in NEW only
  recovered,  // failed or skipped in BASE, runs in NEW
  not_run,    // skipped or failed in BASE, skipped in NEW
};
std::string to_string(Verdict);

struct CompareEntry {
  std::string key;   // Row::key()
  std::string kind;  // "ffpa" or "baseline"
  std::string impl;  // NEW's name, or BASE's when missing in NEW
  Verdict verdict = Verdict::unchanged;
  bool error = false;
  double base_ms = 0, new_ms = 0;  // medians, 0 when not measured
  double allowed_ms = 0;           // the band above; 0 without two timings
  std::string detail;              // reason, failure, or "impl a -> b"
  double change_pct() const { return base_ms > 0 && new_ms > 0 ? 100 * (new_ms / base_ms - 1) : 0; }
};

struct CompareReport {
  double threshold_pct = 5;
  double noise_k = 2;
  std::string base_desc, new_desc;    // GPU, commit, start time of each run
  std::vector<std::string> warnings;  // different GPU, timing mode, cuDNN; partial runs
  std::vector<CompareEntry> entries;  // BASE order, then what only NEW has
  int errors() const;
  int count(Verdict) const;
  int exit_code() const { return errors() > 0 ? kExitRegression : 0; }
};

CompareReport compare(const Results& base, const Results& now, double threshold_pct,
                      double noise_k = 2.0);
std::string render_compare_markdown(const CompareReport&);

}  // namespace ffpa
