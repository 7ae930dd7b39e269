#include "cli/listing.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "tuning/grid.hpp"

namespace ffpa {
namespace {

std::string mib(int64_t bytes) {
  return fmt::format("{:.1f}", bytes / 1048576.0);
}

// Head dims a variant accepts for the first planned problem, as ranges "32-256, 320-1024".
std::string head_dims(const Variant& v, Problem p) {
  std::string out;
  int64_t start = -1, prev = -1;
  auto flush = [&] {
    if (start < 0) return;
    out += (out.empty() ? "" : ", ") +
           (start == prev ? std::to_string(start) : fmt::format("{}-{}", start, prev));
    start = -1;
  };
  for (int64_t d = HeadDims::min; d <= HeadDims::max; d += HeadDims::step) {
    p.shape.D = d;
    if (v.supports(p).ok()) {
      if (start < 0) start = d;
      prev = d;
    } else {
      flush();
    }
  }
  flush();
  return out.empty() ? "none" : out + fmt::format(" (multiples of {})", HeadDims::step);
}

std::string shape_text(const Shape& s) {
  return fmt::format("B={} Hq={} Hkv={} Nq={} Nkv={} D={}", s.B, s.Hq, s.Hkv, s.Nq, s.Nkv, s.D);
}

std::string features(const Problem& p) {
  std::string f;
  if (p.causal != Causal::none) f += "causal(" + to_string(p.causal) + ") ";
  if (p.bias != BiasKind::none)
    f += "bias(" + to_string(p.bias) + "," + to_string(p.bias_dtype) + ") ";
  if (p.dropout > 0) f += fmt::format("dropout({}) ", p.dropout);
  if (p.shape.Hq != p.shape.Hkv) f += fmt::format("gqa({}) ", p.shape.group());
  return f.empty() ? "-" : f.substr(0, f.size() - 1);
}

}  // namespace

std::string render_list(const Plan& plan, const Registry& reg, const std::string& grids) {
  std::string out = fmt::format("Cases in {}:\n", plan.config_file);
  std::set<std::string> seen;
  for (const auto& it : plan.items) {
    const Problem& p = it.problem;
    if (!seen.insert(p.case_name).second) continue;
    out += fmt::format("  {:<14} {}  {}\n", p.case_name, shape_text(p.shape), features(p));
  }
  out += "\nFFPA variants:\n";
  if (reg.variants.empty()) out += "  (none registered in this build)\n";
  const Problem probe = plan.items.empty() ? Problem{} : plan.items.front().problem;
  for (const auto& v : reg.variants) {
    std::string knobs;
    for (const auto& k : v->knob_names()) knobs += (knobs.empty() ? "" : ", ") + k;
    out += fmt::format("  {:<18} pass={}  knobs: {}\n", v->name(), to_string(v->pass()), knobs);
    out += fmt::format("  {:<18} head dims: {}\n", "", head_dims(*v, probe));
    const auto path = std::filesystem::path(grids) / (v->name() + ".json");
    try {
      const Grid g = load_grid(path.string());
      out +=
          fmt::format("  {:<18} grid {}: fast {} points, max {} points\n", "", path.string(),
                      grid_points(g, TuneMode::fast).size(), grid_points(g, TuneMode::max).size());
    } catch (const std::exception& e) {
      out += fmt::format("  {:<18} grid: {}\n", "", e.what());
    }
  }
  out += "\nBaselines:\n";
  for (const auto& b : reg.baselines) out += fmt::format("  {}\n", b->name());
  if (reg.baselines.empty()) out += "  (none registered in this build)\n";
  return out;
}

std::string render_dry_run(const Plan& plan, const Registry& reg) {
  const RunSettings& run = plan.settings;
  const auto variants = selected_variants(reg, run.variants);
  const auto baselines = selected_baselines(reg, run.baseline);
  std::string out =
      fmt::format("Plan from {}: {} measurements", plan.config_file, plan.items.size());
  if (plan.shards > 1)
    out += fmt::format(" (shard {}/{} of a plan of {})", plan.shard, plan.shards, plan.total);
  out += " (no GPU used)\n\n";
  const TimingOptions& t = run.timing;
  out += fmt::format(
      "Settings: tune {}, baseline {}, timing {} (min {} samples, noise {}%, min {} s, timeout {} "
      "s), check {}, tuning cache {}{}{}\n\n",
      to_string(run.tune), to_string(run.baseline), t.cold ? "cold" : "hot", t.min_samples,
      t.max_noise, t.min_time, t.timeout, run.check ? "on" : "off", run.tuning_cache,
      run.save_tensors.empty() ? "" : ", tensors saved to " + run.save_tensors,
      run.profile ? ", profile (one launch per implementation)" : "");
  out +=
      "| # | case | pass | dtype | shape | features | GFLOP | tensors MiB | baseline extra MiB | "
      "runs |\n";
  out += "|---|---|---|---|---|---|---|---|---|---|\n";
  double total_flops = 0;
  int64_t peak = 0;
  std::string peak_by;  // the baseline whose memory the largest item counts, if one runs
  for (const PlanItem& it : plan.items) {
    std::string runs;
    for (Variant* v : variants) {
      if (v->pass() != it.pass) continue;
      const Support s = v->supports(it.problem);
      runs += (runs.empty() ? "" : "; ") + v->name() + (s.ok() ? "" : " n/a (" + s.reason + ")");
    }
    int64_t extra = 0;  // the largest of the baselines that run
    std::string extra_by;
    for (Baseline* b : baselines) {
      const Support s = b->supports(it.problem, it.pass);
      runs += (runs.empty() ? "" : "; ") + b->name() + (s.ok() ? "" : " n/a (" + s.reason + ")");
      if (!s.ok()) continue;
      if (const int64_t bytes = b->extra_bytes(it.problem, it.pass); bytes > extra) {
        extra = bytes;
        extra_by = b->name();
      }
    }
    // The item's number in the whole plan, so that the shards of one plan can be told apart.
    out += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {:.4g} | {} | {} | {} |\n", it.index + 1,
        it.problem.case_name, to_string(it.pass), to_string(it.problem.dtype),
        shape_text(it.problem.shape), features(it.problem), it.flops / 1e9, mib(it.tensor_bytes),
        extra_by.empty() ? "-" : mib(extra) + " (" + extra_by + ")", runs.empty() ? "-" : runs);
    total_flops += it.flops;
    if (it.tensor_bytes + extra > peak) {
      peak = it.tensor_bytes + extra;
      peak_by = extra_by;
    }
  }
  out += fmt::format("\nTotal: {:.1f} TFLOP of attention; largest item needs {} MiB{}.\n",
                     total_flops / 1e12, mib(peak),
                     peak_by.empty() ? "" : " with its largest baseline");
  return out;
}

std::string nothing_compiled(const Plan& plan, const std::vector<Variant*>& variants,
                             const gpu::DeviceInfo& dev) {
  std::set<std::string> reasons;
  for (const PlanItem& it : plan.items)
    for (const Variant* v : variants) {
      if (v->pass() != it.pass) continue;
      Support s = v->supports(it.problem);
      if (s.ok()) s = v->supports(it.problem, v->default_knobs(it.problem), dev);
      if (!s.ok()) reasons.insert(v->name() + ": " + s.reason);
    }
  if (reasons.empty()) return "no selected variant runs the planned passes";
  std::string out;
  for (const auto& r : reasons) out += (out.empty() ? "" : "; ") + r;
  return out;
}

std::string render_compiled(const Plan& plan, const std::vector<CompileOutcome>& done,
                            const std::string& target, double seconds, int verbose, int& failed) {
  failed = 0;
  int refused = 0;
  std::string rows;
  for (const CompileOutcome& c : done) {
    const PlanItem& it = plan.items[static_cast<size_t>(c.item)];
    refused += !c.result.ok();
    const bool used = c.source != "tuned";
    failed += used && !c.result.ok();
    if (verbose == 0 && (c.result.ok() || !used)) continue;
    rows += fmt::format("| {} | {} {} {} D={} | {} | {} | {} | {:.1f} |\n", c.variant,
                        it.problem.case_name, to_string(it.pass), to_string(it.problem.dtype),
                        it.problem.shape.D, to_string(c.knobs), c.source,
                        c.result.ok() ? "ok" : "refused: " + c.result.reason, c.seconds);
  }
  std::string out = fmt::format(
      "Compiled {} kernel configurations of {} for {} in {:.0f} s: {} refused, {} of which a "
      "run would use.\n",
      done.size(), plan.config_file, target, seconds, refused, failed);
  if (!rows.empty())
    out +=
        "\n| variant | item | config | source | result | s |\n|---|---|---|---|---|---|\n" + rows;
  return out;
}

}  // namespace ffpa
