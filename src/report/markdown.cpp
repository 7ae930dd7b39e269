#include "report/markdown.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "report/format.hpp"

namespace ffpa {
namespace {

const char* kDash = "–";

// The case label plus whatever of B, H, Hkv, D the Env line does not describe for this row.
std::string row_label(const Row& r, const ShapeSummary& t) {
  const std::string note = t.note(r);
  return note.empty() ? case_label(r) : case_label(r) + " " + note;
}

// One side of a "FFPA / baseline" cell pair: a time and TFLOPS, or a text saying why not.
struct Side {
  bool timed = false;
  double ms = 0, tflops = 0;
  std::string text;   // when not timed
  std::string label;  // names the baseline in best mode
};

Side side(const Measurement* m) {
  if (!m) return {false, 0, 0, kDash, ""};
  if (m->status == Status::skipped) return {false, 0, 0, skip_text(*m), ""};
  if (!usable(*m)) return {false, 0, 0, fail_text(*m), ""};
  return {true, m->timing.median_ms, m->tflops, "", ""};
}

// What best mode shows when no baseline is usable: the failures first, then why each skipped.
Side best_side(const Row& r) {
  if (const Measurement* b = fastest_baseline(r)) {
    Side s = side(b);
    s.label = display_name(b->impl);
    return s;
  }
  for (const auto& b : r.baselines)
    if (b.status != Status::skipped) return side(&b);
  std::vector<std::string> why;
  for (const auto& b : r.baselines)
    why.push_back(display_name(b.impl) + ": " + (b.reason.empty() ? "skipped" : b.reason));
  if (why.empty()) return side(nullptr);
  return {false, 0, 0, fmt::format("n/a ({})", fmt::join(why, "; ")), ""};
}

std::string time_pair(const Side& f, const Side& b) {
  std::string out;
  if (f.timed && b.timed)
    out = format_ms(f.ms) + " / " + format_ms(b.ms) + " ms";
  else
    out = (f.timed ? format_ms(f.ms) + " ms" : f.text) + " / " +
          (b.timed ? format_ms(b.ms) + " ms" : b.text);
  if (b.timed && !b.label.empty()) out += " (" + b.label + ")";
  return out;
}

std::string tflops_of(const Side& s) {
  return s.timed ? format_tflops(s.tflops) : kDash;
}
std::string time_of(const Side& s) {
  return s.timed ? format_ms(s.ms) + " ms (" + format_tflops(s.tflops) + ")" : s.text;
}
std::string speedup_of(const Side& f, const Side& b) {
  return f.timed && b.timed ? format_speedup(b.ms / f.ms) : kDash;
}

std::string table_row(const std::vector<std::string>& cells) {
  std::string out = "|";
  for (const auto& c : cells) out += " " + markdown_cell(c) + " |";
  return out + "\n";
}

// align: one letter per column, 'l' or 'r'.
std::string header(const std::vector<std::string>& cols, const std::string& align) {
  std::string out = table_row(cols) + "|";
  for (char a : align) out += a == 'r' ? "---:|" : "---|";
  return out + "\n";
}

// The Measurement::impl a single-baseline mode (cudnn, unfused) names.
std::string single_impl(BaselineMode mode) {
  return to_string(*single_baseline(mode));
}

std::vector<std::string> baseline_names(const std::vector<const Row*>& rows) {
  std::vector<std::string> names;
  for (const Row* r : rows)
    for (const auto& b : r->baselines)
      if (std::find(names.begin(), names.end(), b.impl) == names.end()) names.push_back(b.impl);
  return names;
}

std::string pass_table(const std::vector<const Row*>& rows, Pass pass, BaselineMode mode,
                       const ShapeSummary& t) {
  std::vector<std::string> variants;
  for (const Row* r : rows)
    if (r->ffpa && !r->ffpa->impl.empty() &&
        std::find(variants.begin(), variants.end(), r->ffpa->impl) == variants.end())
      variants.push_back(r->ffpa->impl);
  std::string out =
      fmt::format("### {} Pass ({})\n\n", pass == Pass::fwd ? "Forward" : "Backward",
                  variants.empty() ? "no FFPA variant" : fmt::to_string(fmt::join(variants, ", ")));

  const std::vector<std::string> lead = {"Case", "dtype", "Nq/Nkv"};
  const std::vector<std::string> all = baseline_names(rows);
  std::vector<std::string> cols = lead;
  switch (mode) {
    case BaselineMode::best:
      cols.insert(cols.end(), {"FFPA / best baseline", "TFLOPS", "speedup"});
      break;
    case BaselineMode::cudnn:
    case BaselineMode::unfused:
      cols.insert(cols.end(), {"FFPA / " + display_name(single_impl(mode)), "TFLOPS", "speedup"});
      break;
    case BaselineMode::none:
      cols.insert(cols.end(), {"FFPA", "TFLOPS"});
      break;
    case BaselineMode::all:
      cols.push_back("FFPA");
      for (const auto& b : all) {
        cols.push_back(display_name(b));
        cols.push_back("vs " + display_name(b));
      }
      break;
  }
  out += header(cols, std::string(lead.size(), 'l') + std::string(cols.size() - lead.size(), 'r'));

  for (const Row* r : rows) {
    std::vector<std::string> cells = {row_label(*r, t), to_string(r->dtype),
                                      fmt::format("{}/{}", r->shape.Nq, r->shape.Nkv)};
    const Side f = side(r->ffpa ? &*r->ffpa : nullptr);
    switch (mode) {
      case BaselineMode::best:
      case BaselineMode::cudnn:
      case BaselineMode::unfused: {
        const Side b =
            mode == BaselineMode::best ? best_side(*r) : side(find_baseline(*r, single_impl(mode)));
        cells.insert(cells.end(),
                     {time_pair(f, b), tflops_of(f) + " / " + tflops_of(b), speedup_of(f, b)});
        break;
      }
      case BaselineMode::none:
        cells.insert(cells.end(), {f.timed ? format_ms(f.ms) + " ms" : f.text, tflops_of(f)});
        break;
      case BaselineMode::all:
        cells.push_back(time_of(f));
        for (const auto& name : all) {
          const Side b = side(find_baseline(*r, name));
          cells.push_back(time_of(b));
          cells.push_back(speedup_of(f, b));
        }
        break;
    }
    out += table_row(cells);
  }
  return out + "\n";
}

std::string noise_text(const TimingStats& t) {
  std::string s = fmt::format("{:.2f}%", 100 * t.rel_stdev());
  if (t.timed_out) s += ", timed out";
  if (t.throttled_samples > 0) s += fmt::format(", {} throttled", t.throttled_samples);
  return s;
}

// How the search went: what it timed, what refused, and how close the runner-up came in the
// finals (tuning/finals.hpp), or in the first pass when there were none (a small margin means
// another configuration is as good).
std::string search_text(const std::vector<Trial>& trials) {
  std::vector<double> ms, finals;
  for (const Trial& t : trials) {
    if (t.reason.empty()) ms.push_back(t.median_ms);
    if (t.reason.empty() && t.final_ms > 0) finals.push_back(t.final_ms);
  }
  std::string s = fmt::format("[{} tried: {} timed", trials.size(), ms.size());
  if (ms.size() < trials.size()) s += fmt::format(", {} refused", trials.size() - ms.size());
  const bool final = finals.size() >= 2;
  std::vector<double>& lead = final ? finals : ms;
  std::sort(lead.begin(), lead.end());
  if (final) s += fmt::format("; finals of {}", finals.size());
  if (lead.size() >= 2 && lead[0] > 0)
    s += fmt::format("; runner-up +{:.1f}%", 100 * (lead[1] / lead[0] - 1));
  return s + "]";
}

std::string check_text(const Measurement& m) {
  if (!m.checked) return "not checked";
  const TensorCheck* c = worst_check(m);
  if (correctness_failed(m)) return fail_text(m);
  if (!c) return "pass";
  return fmt::format("pass ({} {:.1e} ≤ {:.1e})", c->tensor, c->max_abs, c->bound);
}

std::string details(const std::vector<Row>& rows, const ShapeSummary& t) {
  std::string out = "### Details\n\n";
  out += header({"Row", "impl", "status", "median ms", "min–max ms", "stdev", "samples", "config",
                 "correctness", "peak mem"},
                "lllrrrrllr");
  for (const auto& r : rows) {
    std::string label = fmt::format("{} {} {} {}/{}", row_label(r, t), to_string(r.pass),
                                    to_string(r.dtype), r.shape.Nq, r.shape.Nkv);
    if (r.bias != BiasKind::none)
      label += fmt::format(", bias {} {}", to_string(r.bias), to_string(r.bias_dtype));
    if (r.dropout > 0) label += fmt::format(", dropout {}", r.dropout);
    std::vector<const Measurement*> ms;
    if (r.ffpa) ms.push_back(&*r.ffpa);
    for (const auto& m : r.ffpa_others) ms.push_back(&m);
    for (const auto& b : r.baselines) ms.push_back(&b);
    if (ms.empty()) out += table_row({label, kDash, "no measurement", "", "", "", "", "", "", ""});
    for (const Measurement* m : ms) {
      const bool ran = m->status != Status::skipped && m->timing.samples > 0;
      const TimingStats& tm = m->timing;
      std::string config = to_string(m->config);
      if (!config.empty() && !m->config_source.empty()) config += " (" + m->config_source + ")";
      if (!m->trials.empty()) config += " " + search_text(m->trials);
      std::string mem = m->peak_mem_bytes > 0 ? format_bytes(m->peak_mem_bytes) : "";
      if (m->extra_mem_bytes > 0) mem += " (workspace " + format_bytes(m->extra_mem_bytes) + ")";
      // The correctness column explains a wrong result; the status column other failures.
      std::string status = "ok";
      if (m->status == Status::skipped)
        status = skip_text(*m);
      else if (correctness_failed(*m))
        status = "FAIL";
      else if (m->status == Status::failed)
        status = fail_text(*m);
      out += table_row({label, display_name(m->impl), status, ran ? format_ms(tm.median_ms) : "",
                        ran ? format_ms(tm.min_ms) + "–" + format_ms(tm.max_ms) : "",
                        ran ? noise_text(tm) : "", ran ? std::to_string(tm.samples) : "", config,
                        m->status == Status::skipped ? "" : check_text(*m), mem});
    }
  }
  return out;
}

}  // namespace

std::string render_markdown(const Results& res, BaselineMode mode) {
  const Environment& e = res.env;
  const ShapeSummary t = summarize_shapes(res.rows);
  std::string out = "## Benchmark\n\n";
  const std::string gpu = e.gpu.empty() ? "unknown GPU" : e.gpu;
  if (res.rows.empty())
    out += "Env: " + gpu + ".\n\n";
  else
    out += "Env: " + gpu + ", " + t.text() + ".\n\n";
  if (!res.complete) out += "**Partial results**: the sweep did not finish.\n\n";
  out += fmt::format(
      "Timing: {} L2, median over samples. TFLOPS = counted FLOPs / median time (fwd "
      "4·B·H·D·pairs, bwd 2.5 × fwd). speedup = baseline time / FFPA time.\n",
      res.timing_mode.empty() ? "unknown" : res.timing_mode);
  out += fmt::format("Software: ffpa-bench {} ({}), driver {}, CUDA runtime {}, cuDNN {}.\n\n",
                     res.tool_version, e.git_commit, e.driver, e.cuda_runtime, e.cudnn);

  for (Pass pass : {Pass::fwd, Pass::bwd}) {
    std::vector<const Row*> rows;
    for (const auto& r : res.rows)
      if (r.pass == pass) rows.push_back(&r);
    if (!rows.empty()) out += pass_table(rows, pass, mode, t);
  }
  if (!res.rows.empty()) out += details(res.rows, t);
  return out;
}

}  // namespace ffpa
