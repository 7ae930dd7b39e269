#include "report/csv.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "report/format.hpp"

namespace ffpa {
namespace {

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string boolean(bool b) {
  return b ? "true" : "false";
}

void line(std::string& out, const std::vector<std::string>& fields) {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += csv_field(fields[i]);
  }
  out += '\n';
}

}  // namespace

std::string csv_field(const std::string& s) {
  const bool quote = s.find_first_of(",\"\r\n") != std::string::npos ||
                     (!s.empty() && (s.front() == ' ' || s.back() == ' '));
  if (!quote) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string render_csv(const Results& res) {
  std::vector<std::string> baselines;
  for (const auto& r : res.rows)
    for (const auto& b : r.baselines)
      if (std::find(baselines.begin(), baselines.end(), b.impl) == baselines.end())
        baselines.push_back(b.impl);

  std::vector<std::string> head = {"case",
                                   "pass",
                                   "dtype",
                                   "B",
                                   "Hq",
                                   "Hkv",
                                   "Nq",
                                   "Nkv",
                                   "D",
                                   "causal",
                                   "bias",
                                   "bias_dtype",
                                   "dropout",
                                   "flops",
                                   "impl",
                                   "kind",
                                   "status",
                                   "reason",
                                   "median_ms",
                                   "mean_ms",
                                   "min_ms",
                                   "max_ms",
                                   "stdev_ms",
                                   "samples",
                                   "total_gpu_s",
                                   "timed_out",
                                   "throttled_samples",
                                   "sm_clock_mhz",
                                   "tflops"};
  for (const auto& b : baselines) head.push_back("speedup_vs_" + b);
  head.insert(head.end(),
              {"checked", "correct", "max_abs_err", "worst_tensor", "checks", "peak_mem_bytes",
               "extra_mem_bytes", "config", "config_source", "includes", "device"});
  std::string out;
  line(out, head);

  for (const auto& r : res.rows) {
    const Shape& s = r.shape;
    const std::vector<std::string> lead = {
        r.case_name,          to_string(r.pass),     to_string(r.dtype),   std::to_string(s.B),
        std::to_string(s.Hq), std::to_string(s.Hkv), std::to_string(s.Nq), std::to_string(s.Nkv),
        std::to_string(s.D),  to_string(r.causal),   to_string(r.bias),    to_string(r.bias_dtype),
        num(r.dropout),       num(r.flops)};
    // "host/cuda:N", empty when the file does not say (older files).
    const std::string device =
        r.device.index < 0 ? "" : r.device.host + "/cuda:" + std::to_string(r.device.index);
    std::vector<const Measurement*> ms;
    if (r.ffpa) ms.push_back(&*r.ffpa);
    for (const auto& m : r.ffpa_others) ms.push_back(&m);
    for (const auto& b : r.baselines) ms.push_back(&b);
    if (ms.empty()) {  // keep the row visible even with nothing measured
      std::vector<std::string> f = lead;
      f.resize(head.size());
      f.back() = device;
      line(out, f);
    }
    for (const Measurement* m : ms) {
      std::vector<std::string> f = lead;
      const TimingStats& t = m->timing;
      const bool timed = t.samples > 0;
      const auto timing = [&](double v) { return timed ? num(v) : std::string(); };
      f.insert(f.end(),
               {m->impl, m->kind, to_string(m->status), m->reason, timing(t.median_ms),
                timing(t.mean_ms), timing(t.min_ms), timing(t.max_ms), timing(t.stdev_ms),
                std::to_string(t.samples), timing(t.total_gpu_s), boolean(t.timed_out),
                std::to_string(t.throttled_samples), timing(t.sm_clock_mhz), timing(m->tflops)});
      for (const auto& name : baselines) {
        const Measurement* b = find_baseline(r, name);
        f.push_back(b && usable(*b) && usable(*m) ? num(b->timing.median_ms / t.median_ms) : "");
      }
      std::string max_abs, worst, checks;
      if (m->checked) {
        double mx = 0;
        for (const auto& c : m->checks) {
          mx = std::isnan(c.max_abs) || std::isnan(mx) ? NAN : std::max(mx, c.max_abs);
          if (!checks.empty()) checks += ';';
          checks += c.tensor + "=" + num(c.max_abs) + "/" + num(c.bound);
        }
        max_abs = m->checks.empty() ? "" : num(mx);
        if (const TensorCheck* c = worst_check(*m)) worst = c->tensor;
      }
      f.insert(f.end(),
               {boolean(m->checked), m->checked ? boolean(m->correct()) : "", max_abs, worst,
                checks, std::to_string(m->peak_mem_bytes), std::to_string(m->extra_mem_bytes),
                to_string(m->config), m->config_source, m->includes, device});
      line(out, f);
    }
  }
  return out;
}

}  // namespace ffpa
