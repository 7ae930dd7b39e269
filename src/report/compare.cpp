#include "report/compare.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "report/format.hpp"

namespace ffpa {

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::unchanged:
      return "unchanged";
    case Verdict::noise:
      return "within noise";
    case Verdict::slower:
      return "slower";
    case Verdict::faster:
      return "faster";
    case Verdict::failed:
      return "failed";
    case Verdict::missing:
      return "missing";
    case Verdict::skipped:
      return "skipped";
    case Verdict::added:
      return "new";
    case Verdict::recovered:
      return "now runs";
    case Verdict::not_run:
      return "not run";
  }
  return "?";
}

int CompareReport::errors() const {
  return int(std::count_if(entries.begin(), entries.end(), [](const auto& e) { return e.error; }));
}

int CompareReport::count(Verdict v) const {
  return int(
      std::count_if(entries.begin(), entries.end(), [&](const auto& e) { return e.verdict == v; }));
}

namespace {

bool ran(const Measurement& m) {
  return m.status != Status::skipped;
}
bool broken(const Measurement& m) {
  return m.status == Status::failed || correctness_failed(m);
}

// Index of each key's first row; later duplicates are reported.
std::map<std::string, const Row*> index(const Results& res, const char* which,
                                        std::vector<std::string>& warnings) {
  std::map<std::string, const Row*> idx;
  for (const auto& r : res.rows)
    if (!idx.emplace(r.key(), &r).second)
      warnings.push_back(fmt::format("row {} appears more than once in {}; the first is compared",
                                     r.key(), which));
  return idx;
}

CompareEntry judge(const std::string& key, const std::string& kind, const Measurement* b,
                   const Measurement* n, bool row_gone, double threshold, double k,
                   std::vector<std::string>& warnings) {
  CompareEntry e;
  e.key = key;
  e.kind = kind;
  e.impl = n ? n->impl : b->impl;
  const bool ffpa = kind == "ffpa";
  if (b && usable(*b)) e.base_ms = b->timing.median_ms;
  if (n && usable(*n)) e.new_ms = n->timing.median_ms;
  if (b && n && b->impl != n->impl) e.detail = b->impl + " -> " + n->impl;

  if (!b) {
    e.verdict = Verdict::added;
  } else if (!n) {
    e.verdict = Verdict::missing;
    e.error = b->status == Status::ok && (ffpa || row_gone);
  } else if (broken(*n)) {
    e.verdict = Verdict::failed;
    e.error = true;
    e.detail = fail_text(*n);
  } else if (!ran(*n)) {
    e.verdict = usable(*b) ? Verdict::skipped : Verdict::not_run;
    e.error = ffpa && b->status == Status::ok;
    e.detail = skip_text(*n);
  } else if (!usable(*n)) {
    // Ran without a positive median: a timer that broke must not read as "faster".
    e.verdict = Verdict::failed;
    e.error = true;
    e.detail = "no valid timing";
  } else if (!usable(*b)) {
    e.verdict = Verdict::recovered;
  } else {
    const double bs = b->timing.stdev_ms, ns = n->timing.stdev_ms;
    const double noise = k * (bs + ns), cap = kMaxNoisePct / 100 * e.base_ms;
    if (noise > cap)
      warnings.push_back(fmt::format("{} {}: noise band ±{:.0f}% capped at ±{:.0f}%", key,
                                     display_name(e.impl), 100 * noise / e.base_ms, kMaxNoisePct));
    e.allowed_ms = std::max(threshold / 100 * e.base_ms, std::min(noise, cap));
    const double d = e.new_ms - e.base_ms;
    if (d > e.allowed_ms)
      e.verdict = Verdict::slower;
    else if (-d > e.allowed_ms)
      e.verdict = Verdict::faster;
    else if (std::abs(d) > threshold / 100 * e.base_ms)
      e.verdict = Verdict::noise;
    else
      e.verdict = Verdict::unchanged;
    e.error = ffpa && e.verdict == Verdict::slower;
  }
  if (b && n && b->checked && !n->checked && n->status == Status::ok)
    warnings.push_back(key + " " + display_name(e.impl) +
                       ": NEW was not checked for correctness (BASE was)");
  return e;
}

void compare_row(const std::string& key, const Row* b, const Row* n, double threshold, double k,
                 CompareReport& rep) {
  const auto opt = [](const std::optional<Measurement>& m) { return m ? &*m : nullptr; };
  const Measurement* bf = b ? opt(b->ffpa) : nullptr;
  const Measurement* nf = n ? opt(n->ffpa) : nullptr;
  if (bf || nf) rep.entries.push_back(judge(key, "ffpa", bf, nf, !n, threshold, k, rep.warnings));
  std::vector<std::string> names;
  for (const Row* r : {b, n})
    if (r)
      for (const auto& m : r->baselines)
        if (std::find(names.begin(), names.end(), m.impl) == names.end()) names.push_back(m.impl);
  for (const auto& name : names) {
    const Measurement* bb = b ? find_baseline(*b, name) : nullptr;
    const Measurement* nb = n ? find_baseline(*n, name) : nullptr;
    rep.entries.push_back(judge(key, "baseline", bb, nb, !n, threshold, k, rep.warnings));
  }
}

std::string describe(const Results& r) {
  return fmt::format("{}, commit {}, started {}", r.env.gpu.empty() ? "unknown GPU" : r.env.gpu,
                     r.env.git_commit.empty() ? "?" : r.env.git_commit,
                     r.env.started_at.empty() ? "?" : r.env.started_at);
}

}  // namespace

CompareReport compare(const Results& base, const Results& now, double threshold_pct,
                      double noise_k) {
  CompareReport rep;
  rep.threshold_pct = threshold_pct;
  rep.noise_k = noise_k;
  rep.base_desc = describe(base);
  rep.new_desc = describe(now);
  if (base.env.gpu != now.env.gpu)
    rep.warnings.push_back("different GPUs: " + base.env.gpu + " vs " + now.env.gpu);
  if (base.timing_mode != now.timing_mode)
    rep.warnings.push_back("different timing modes: " + base.timing_mode + " vs " +
                           now.timing_mode);
  if (base.env.cudnn != now.env.cudnn)
    rep.warnings.push_back("different cuDNN: " + base.env.cudnn + " vs " + now.env.cudnn);
  if (!base.complete) rep.warnings.push_back("BASE is a partial run");
  if (!now.complete) rep.warnings.push_back("NEW is a partial run");

  const auto bidx = index(base, "BASE", rep.warnings);
  const auto nidx = index(now, "NEW", rep.warnings);
  for (const auto& r : base.rows) {
    const std::string key = r.key();
    if (bidx.at(key) != &r) continue;
    const auto it = nidx.find(key);
    compare_row(key, &r, it == nidx.end() ? nullptr : it->second, threshold_pct, noise_k, rep);
  }
  for (const auto& r : now.rows) {
    const std::string key = r.key();
    if (nidx.at(key) != &r || bidx.count(key)) continue;
    compare_row(key, nullptr, &r, threshold_pct, noise_k, rep);
  }
  return rep;
}

std::string render_compare_markdown(const CompareReport& rep) {
  std::string out = "## Compare\n\n";
  out += "BASE: " + rep.base_desc + "  \nNEW: " + rep.new_desc + "\n\n";
  out += fmt::format(
      "Rule: slower when new - base > max({}% of base, min({} x (stdev base + stdev new), {}% "
      "of base)). Errors: "
      "FFPA slower, anything failing in NEW, a row or FFPA measurement gone or skipped; "
      "baselines' timing is informational.\n\n",
      rep.threshold_pct, rep.noise_k, kMaxNoisePct);
  for (const auto& w : rep.warnings) out += "Warning: " + w + "\n";
  if (!rep.warnings.empty()) out += "\n";

  std::vector<std::string> counts;
  for (Verdict v :
       {Verdict::slower, Verdict::failed, Verdict::missing, Verdict::skipped, Verdict::faster,
        Verdict::noise, Verdict::unchanged, Verdict::added, Verdict::recovered, Verdict::not_run})
    if (int c = rep.count(v)) counts.push_back(fmt::format("{} {}", c, to_string(v)));
  out +=
      fmt::format("**Result: {}** ({} error{}): {}.\n\n", rep.errors() ? "REGRESSION" : "clean",
                  rep.errors(), rep.errors() == 1 ? "" : "s",
                  counts.empty() ? "nothing to compare" : fmt::to_string(fmt::join(counts, ", ")));
  if (rep.entries.empty()) return out;

  out += "| Row | impl | base ms | new ms | change | allowed | verdict |\n";
  out += "|---|---|---:|---:|---:|---:|---|\n";
  for (const auto& e : rep.entries) {
    const auto ms = [](double v) { return v > 0 ? format_ms(v) : std::string("–"); };
    const bool both = e.base_ms > 0 && e.new_ms > 0;
    std::string verdict = to_string(e.verdict);
    if (e.error) verdict = "**" + verdict + "**";
    if (!e.error && e.kind == "baseline" &&
        (e.verdict == Verdict::slower || e.verdict == Verdict::missing ||
         e.verdict == Verdict::skipped))
      verdict += " (baseline, informational)";
    if (!e.detail.empty()) verdict += ": " + e.detail;
    std::string row =
        fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", markdown_cell(e.key),
                    markdown_cell(display_name(e.impl)), ms(e.base_ms), ms(e.new_ms),
                    both ? fmt::format("{:+.1f}%", e.change_pct()) : "–",
                    both ? fmt::format("±{:.1f}%", 100 * e.allowed_ms / e.base_ms) : "–",
                    markdown_cell(verdict));
    out += row;
  }
  return out;
}

}  // namespace ffpa
