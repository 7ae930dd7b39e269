// Number and label formatting shared by the markdown, CSV, chart and compare renderers, so the
// same measurement reads the same everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/results.hpp"

namespace ffpa {

std::string format_ms(double ms);             // "11.42", "0.0123"
std::string format_tflops(double tflops);     // "385T", "1.8T", "0.69T"
std::string format_speedup(double ratio);     // "2.90x"
std::string format_bytes(int64_t bytes);      // "8.50 GiB", "512 MiB"
std::string format_duration(double seconds);  // "0:07", "12:30", "1:02:03"

// Text safe inside a markdown table cell: '|' escaped, line breaks as spaces.
std::string markdown_cell(const std::string&);

// "cuDNN" for "cudnn"; other names unchanged.
std::string display_name(const std::string& impl);
// The case name with what the name may not say: causal alignment, e.g. "causal (bottom-right)".
std::string case_label(const Row&);

// Checked and some tensor out of bound (or non-finite).
bool correctness_failed(const Measurement&);
// Ran, and is not known to be wrong: its time may be compared.
bool usable(const Measurement&);
// The check with the largest error relative to its bound, or null without checks.
const TensorCheck* worst_check(const Measurement&);
// "FAIL (max err 3.1e-02 > 1.2e-03 on dq)" or "FAIL (<reason>)".
std::string fail_text(const Measurement&);
// "n/a (<reason>)".
std::string skip_text(const Measurement&);
// The usable baseline with the lowest median, or null.
const Measurement* fastest_baseline(const Row&);
const Measurement* find_baseline(const Row&, const std::string& impl);

// How the shapes of a run's rows spread: per field the most common value (first seen on a tie)
// and the other values, ascending. N is Nkv (the seed's "N"; Nq varies by case).
struct ShapeSummary {
  struct Field {
    int64_t common = 0;
    std::vector<int64_t> others;
  };
  Field B, H, N, D;
  // "B=1, N=8192 (also 8191), H=32, D=512"
  std::string text() const;
  // What a row's label must add for fields text() does not describe: "[H=8, Hkv=2]" or "".
  // N is left out: tables show Nq/Nkv.
  std::string note(const Row&) const;
};
ShapeSummary summarize_shapes(const std::vector<Row>&);

}  // namespace ffpa
