#include "report/format.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace ffpa {

std::string format_ms(double ms) {
  // Two decimals like the seed's tables; below 0.1 ms keep three significant digits instead.
  if (!std::isfinite(ms)) return "?";
  if (ms >= 0.1) return fmt::format("{:.2f}", ms);
  return fmt::format("{:.3g}", ms);
}

std::string format_tflops(double t) {
  if (!std::isfinite(t)) return "?";
  if (t >= 10) return fmt::format("{:.0f}T", t);
  if (t >= 1) return fmt::format("{:.1f}T", t);
  if (t >= 0.01) return fmt::format("{:.2f}T", t);
  return fmt::format("{:.2g}T", t);
}

std::string format_speedup(double r) {
  if (!std::isfinite(r)) return "?";
  return fmt::format("{:.2f}x", r);
}

std::string format_bytes(int64_t b) {
  const double v = static_cast<double>(b);
  if (b >= (int64_t(1) << 30)) return fmt::format("{:.2f} GiB", v / double(1 << 30));
  if (b >= (int64_t(1) << 20)) return fmt::format("{:.0f} MiB", v / double(1 << 20));
  if (b >= (int64_t(1) << 10)) return fmt::format("{:.0f} KiB", v / double(1 << 10));
  return fmt::format("{} B", b);
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--";
  const auto t = static_cast<int64_t>(std::llround(s));
  if (t >= 3600) return fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
  return fmt::format("{}:{:02}", t / 60, t % 60);
}

std::string markdown_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string display_name(const std::string& impl) {
  return parse_baseline_id(impl) == BaselineId::cudnn ? "cuDNN" : impl;
}

std::string case_label(const Row& r) {
  if (r.causal == Causal::none) return r.case_name;
  const std::string align = r.causal == Causal::bottom_right ? "bottom-right" : "top-left";
  // A case called "causal..." already says causal; others must say it with the alignment.
  const bool named = r.case_name.find("causal") != std::string::npos;
  return r.case_name + (named ? " (" + align + ")" : " (causal " + align + ")");
}

bool correctness_failed(const Measurement& m) {
  return m.checked && !m.correct();
}

bool usable(const Measurement& m) {
  return m.status == Status::ok && !correctness_failed(m) && m.timing.median_ms > 0;
}

const TensorCheck* worst_check(const Measurement& m) {
  const TensorCheck* worst = nullptr;
  double worst_ratio = -1;
  for (const auto& c : m.checks) {
    // Non-finite values or a NaN error rank above any finite ratio.
    double ratio = c.bound > 0 ? c.max_abs / c.bound : c.max_abs;
    if (c.nonfinite > 0 || std::isnan(ratio)) ratio = HUGE_VAL;
    if (ratio > worst_ratio) worst = &c, worst_ratio = ratio;
  }
  return worst;
}

std::string fail_text(const Measurement& m) {
  if (correctness_failed(m)) {
    if (const TensorCheck* c = worst_check(m)) {
      if (c->nonfinite > 0)
        return fmt::format("FAIL ({} non-finite in {})", c->nonfinite, c->tensor);
      return fmt::format("FAIL (max err {:.1e} > {:.1e} on {})", c->max_abs, c->bound, c->tensor);
    }
  }
  return "FAIL (" + (m.reason.empty() ? std::string("no reason given") : m.reason) + ")";
}

std::string skip_text(const Measurement& m) {
  return "n/a (" + (m.reason.empty() ? std::string("skipped") : m.reason) + ")";
}

const Measurement* fastest_baseline(const Row& r) {
  const Measurement* best = nullptr;
  for (const auto& b : r.baselines)
    if (usable(b) && (!best || b.timing.median_ms < best->timing.median_ms)) best = &b;
  return best;
}

const Measurement* find_baseline(const Row& r, const std::string& impl) {
  for (const auto& b : r.baselines)
    if (b.impl == impl) return &b;
  return nullptr;
}

namespace {

template <class Get>
ShapeSummary::Field spread(const std::vector<Row>& rows, Get get) {
  std::vector<std::pair<int64_t, int>> counts;  // in first-seen order
  for (const auto& r : rows) {
    const int64_t v = get(r);
    auto it =
        std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == v; });
    if (it == counts.end())
      counts.emplace_back(v, 1);
    else
      ++it->second;
  }
  ShapeSummary::Field f;
  int best = 0;
  for (const auto& [v, n] : counts)
    if (n > best) f.common = v, best = n;
  for (const auto& [v, n] : counts)
    if (v != f.common) f.others.push_back(v);
  std::sort(f.others.begin(), f.others.end());
  return f;
}

std::string field_text(const char* name, const ShapeSummary::Field& f) {
  std::string out = fmt::format("{}={}", name, f.common);
  if (!f.others.empty()) out += fmt::format(" (also {})", fmt::join(f.others, ", "));
  return out;
}

}  // namespace

ShapeSummary summarize_shapes(const std::vector<Row>& rows) {
  return {spread(rows, [](const Row& r) { return r.shape.B; }),
          spread(rows, [](const Row& r) { return r.shape.Hq; }),
          spread(rows, [](const Row& r) { return r.shape.Nkv; }),
          spread(rows, [](const Row& r) { return r.shape.D; })};
}

std::string ShapeSummary::text() const {
  return fmt::format("{}, {}, {}, {}", field_text("B", B), field_text("N", N), field_text("H", H),
                     field_text("D", D));
}

std::string ShapeSummary::note(const Row& r) const {
  std::vector<std::string> notes;
  if (r.shape.B != B.common) notes.push_back(fmt::format("B={}", r.shape.B));
  if (r.shape.Hq != H.common) notes.push_back(fmt::format("H={}", r.shape.Hq));
  if (r.shape.Hkv != r.shape.Hq) notes.push_back(fmt::format("Hkv={}", r.shape.Hkv));
  if (r.shape.D != D.common) notes.push_back(fmt::format("D={}", r.shape.D));
  return notes.empty() ? "" : fmt::format("[{}]", fmt::join(notes, ", "));
}

}  // namespace ffpa
