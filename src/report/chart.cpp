#include "report/chart.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/files.hpp"
#include "report/format.hpp"

namespace ffpa {
namespace {

constexpr uint32_t kInk = 0x222222, kGrid = 0xE3E3E3, kMuted = 0x888888, kFail = 0xC62828;
constexpr uint32_t kParity = 0x555555;
constexpr uint32_t kPalette[] = {0x4C78A8, 0xF58518, 0x54A24B, 0xE45756, 0x72B7B2, 0xB279A2};

constexpr int kMargin = 20, kAxisWidth = 56, kPlotHeight = 240, kGap = 28;

struct Bar {
  std::string id;
  double value = 0;  // <= 0: no bar
  uint32_t color = 0;
  std::string note;  // shown instead of a bar
  uint32_t note_color = kMuted;
};

struct Slot {
  std::string label;
  std::vector<Bar> bars;
};

struct Panel {
  std::string title;
  std::vector<Slot> slots;
  enum class Unit { speedup, tflops, gib } unit = Unit::tflops;
};

// Why a measurement gives no number, in a few characters.
Bar missing(const Measurement* m, std::string id) {
  Bar b;
  b.id = std::move(id);
  if (!m)
    b.note = "-";
  else if (m->status == Status::skipped)
    b.note = "n/a";
  else
    b.note = "FAIL", b.note_color = kFail;
  return b;
}

double speedup(const Row& r) {
  const Measurement* base = fastest_baseline(r);
  if (!r.ffpa || !usable(*r.ffpa) || !base) return 0;
  return base->timing.median_ms / r.ffpa->timing.median_ms;
}

// A step of 1, 2 or 5 x 10^k giving at most 6 intervals up to `top`.
double tick_step(double top) {
  const double raw = top / 6;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

std::string tick_label(double v, double step) {
  return step >= 1 ? fmt::format("{:.0f}", v) : fmt::format("{:.{}f}", v, step >= 0.1 ? 1 : 2);
}

// The rows a sweep chart draws in one panel: equal in everything but the swept value (D, or the
// sequence lengths for an N sweep).
std::string sweep_group(const Row& r, int64_t Shape::*field) {
  const Shape& s = r.shape;
  return fmt::format(
      "{}/{}/{}/B={} H={}/{} {}", r.case_name, to_string(r.pass), to_string(r.dtype), s.B, s.Hq,
      s.Hkv, field == &Shape::D ? fmt::format("N={}/{}", s.Nq, s.Nkv) : fmt::format("D={}", s.D));
}

bool sweeps(const Results& res, int64_t Shape::*field) {
  std::map<std::string, std::set<int64_t>> values;
  for (const Row& r : res.rows) values[sweep_group(r, field)].insert(r.shape.*field);
  for (const auto& [group, v] : values)
    if (v.size() > 1) return true;
  return false;
}

// What a sweep chart is drawn against: D when some rows differ in D alone, else Nkv (an N sweep),
// else nothing (rows of other shapes, like the non-aligned case, are not a sweep).
int64_t Shape::*swept_field(const Results& res) {
  if (sweeps(res, &Shape::D)) return &Shape::D;
  if (sweeps(res, &Shape::Nkv)) return &Shape::Nkv;
  return nullptr;
}

}  // namespace

bool has_sweep(const Results& res) {
  return swept_field(res) != nullptr;
}

Drawing sweep_drawing(const Results& res) {
  const auto field = swept_field(res);
  const std::string x_name = field == &Shape::D ? "D" : "N";
  // One panel per row that differs in anything but the swept value.
  struct Series {
    std::string name;
    std::map<int64_t, double> tflops;
  };
  struct SweepPanel {
    std::string title;
    std::vector<Series> series;
  };
  std::vector<std::string> order;
  std::map<std::string, SweepPanel> panels;
  std::set<int64_t> xs;
  std::vector<std::pair<std::string, uint32_t>> legend;
  const auto color_of = [&](const std::string& name) {
    for (const auto& [n, c] : legend)
      if (n == name) return c;
    const uint32_t c = kPalette[legend.size() % std::size(kPalette)];
    legend.emplace_back(name, c);
    return c;
  };
  for (const Row& r : res.rows) {
    if (!field) break;
    const std::string key = sweep_group(r, field);
    const std::string title = fmt::format("{} {} {}, {}", case_label(r), to_string(r.pass),
                                          to_string(r.dtype), key.substr(key.rfind("/B=") + 1));
    if (!panels.count(key)) order.push_back(key);
    SweepPanel& p = panels[key];
    p.title = title;
    const int64_t x = r.shape.*field;
    xs.insert(x);
    std::vector<const Measurement*> ms;
    if (r.ffpa) ms.push_back(&*r.ffpa);
    for (const auto& b : r.baselines) ms.push_back(&b);
    for (const Measurement* m : ms) {
      if (!usable(*m)) continue;
      const std::string name = m->kind == "ffpa" ? "FFPA" : display_name(m->impl);
      color_of(name);
      auto it = std::find_if(p.series.begin(), p.series.end(),
                             [&](const Series& s) { return s.name == name; });
      if (it == p.series.end()) it = p.series.insert(p.series.end(), Series{name, {}});
      it->tflops[x] = m->tflops;
    }
  }

  double top = 0;
  for (const auto& [key, p] : panels)
    for (const auto& s : p.series)
      for (const auto& [x, v] : s.tflops) top = std::max(top, v);
  if (top <= 0) top = 1;
  const double step = tick_step(top * 1.12);
  top = std::ceil(top * 1.12 / step) * step;

  const std::vector<int64_t> xv(xs.begin(), xs.end());
  const int x_gap = 64;
  const int plot_left = kMargin + kAxisWidth;
  const int plot_w = std::max(1, int(xv.size()) - 1) * x_gap;
  const std::string title = fmt::format("TFLOPS against {}: {}", x_name,
                                        res.env.gpu.empty() ? "unknown GPU" : res.env.gpu);
  int legend_w = 0;
  for (const auto& [name, c] : legend) legend_w += 14 + text_length(name) + 16;
  Drawing d;
  d.width = std::max({plot_left + plot_w + 2 * x_gap + kMargin, 2 * kMargin + text_length(title, 2),
                      2 * kMargin + legend_w, 320});
  int y = kMargin;
  d.text(kMargin, y, title, kInk, 2);
  y += text_height(2) + 8;
  int lx = kMargin;
  for (const auto& [name, c] : legend) {
    d.rect(lx, y, 10, 8, c);
    d.text(lx + 14, y, name, kInk);
    lx += 14 + text_length(name) + 16;
  }
  if (!res.complete)
    d.text(d.width - kMargin - text_length("partial run"), y, "partial run", kFail);
  y += text_height() + 12;

  for (const std::string& key : order) {
    const SweepPanel& p = panels[key];
    d.text(kMargin, y, p.title, kInk, 1);
    y += text_height() + 10;
    const int y0 = y + kPlotHeight;
    const int x0 = plot_left + x_gap / 2;
    const auto ypix = [&](double v) { return y0 - int(std::lround(v / top * kPlotHeight)); };
    const auto xpix = [&](int64_t x) {
      return x0 + int(std::lower_bound(xv.begin(), xv.end(), x) - xv.begin()) * x_gap;
    };
    const int plot_right = x0 + plot_w + x_gap / 2;
    for (double v = 0; v <= top + step / 2; v += step) {
      const int yy = ypix(v);
      if (v > 0) d.line(plot_left, yy, plot_right, yy, kGrid);
      const std::string t = tick_label(v, step);
      d.text(plot_left - 6 - text_length(t), yy - 3, t, kInk);
    }
    d.text(kMargin, y0 - kPlotHeight / 2 + text_length("TFLOPS") / 2, "TFLOPS", kInk, 1, true);
    for (const Series& s : p.series) {
      const uint32_t c = color_of(s.name);
      const std::pair<const int64_t, double>* prev = nullptr;
      for (const auto& pt : s.tflops) {
        const int px = xpix(pt.first), py = ypix(pt.second);
        if (prev) d.line(xpix(prev->first), ypix(prev->second), px, py, c);
        d.rect(px - 2, py - 2, 5, 5, c, fmt::format("point:{}:{}:{}", key, s.name, pt.first));
        prev = &pt;
      }
    }
    d.line(plot_left, y0, plot_right, y0, kInk);
    d.line(plot_left, y0, plot_left, y0 - kPlotHeight, kInk);
    for (int64_t x : xv) {
      const std::string t = std::to_string(x);
      d.text(xpix(x) - text_length(t) / 2, y0 + 6, t, kInk);
    }
    const std::string axis = x_name == "D" ? "head dim D" : "sequence length N (keys)";
    d.text(x0 + plot_w / 2 - text_length(axis) / 2, y0 + 8 + text_height(), axis, kInk);
    y = y0 + 14 + 2 * text_height() + kGap;
  }
  d.height = y;
  return d;
}

Drawing chart_drawing(const Results& res) {
  const ShapeSummary shapes = summarize_shapes(res.rows);
  const bool by_speedup =
      std::any_of(res.rows.begin(), res.rows.end(), [](const Row& r) { return speedup(r) > 0; });

  // Colours: by dtype for speedups, by implementation (first seen first) for TFLOPS.
  std::vector<std::pair<std::string, uint32_t>> legend;
  const auto color_of = [&](const std::string& name) {
    for (const auto& [n, c] : legend)
      if (n == name) return c;
    const uint32_t c = kPalette[legend.size() % std::size(kPalette)];
    legend.emplace_back(name, c);
    return c;
  };
  if (by_speedup)
    for (Dtype d : {Dtype::fp16, Dtype::bf16})
      if (std::any_of(res.rows.begin(), res.rows.end(), [&](const Row& r) { return r.dtype == d; }))
        color_of(to_string(d));

  std::vector<Panel> panels;
  for (Pass pass : {Pass::fwd, Pass::bwd}) {
    Panel p;
    std::vector<std::string> variants;
    for (const auto& r : res.rows) {
      if (r.pass != pass) continue;
      if (r.ffpa && !r.ffpa->impl.empty() &&
          std::find(variants.begin(), variants.end(), r.ffpa->impl) == variants.end())
        variants.push_back(r.ffpa->impl);
      Slot s;
      const std::string note = shapes.note(r);
      s.label = case_label(r) + " " + to_string(r.dtype) + (note.empty() ? "" : " " + note);
      if (by_speedup) {
        const std::string id = "bar:" + r.key() + ":speedup";
        const double v = speedup(r);
        if (v > 0) s.bars.push_back({id, v, color_of(to_string(r.dtype)), "", kMuted});
        // "-" both without FFPA and without a baseline to compare with.
        else
          s.bars.push_back(missing(r.ffpa && !usable(*r.ffpa) ? &*r.ffpa : nullptr, id));
      } else {
        std::vector<const Measurement*> ms;
        if (r.ffpa) ms.push_back(&*r.ffpa);
        for (const auto& b : r.baselines) ms.push_back(&b);
        for (const Measurement* m : ms) {
          const std::string name = m->kind == "ffpa" ? "FFPA" : display_name(m->impl);
          const std::string id = "bar:" + r.key() + ":" + m->impl;
          if (usable(*m))
            s.bars.push_back({id, m->tflops, color_of(name), "", kMuted});
          else
            s.bars.push_back(missing(m, id));
        }
      }
      p.slots.push_back(std::move(s));
    }
    if (p.slots.empty()) continue;
    p.title = fmt::format(
        "{} Pass ({})", pass == Pass::fwd ? "Forward" : "Backward",
        variants.empty() ? "no FFPA variant" : fmt::to_string(fmt::join(variants, ", ")));
    p.unit = by_speedup ? Panel::Unit::speedup : Panel::Unit::tflops;
    panels.push_back(std::move(p));
  }
  // The memory each implementation needed (peak device memory while it ran), per pass.
  for (Pass pass : {Pass::fwd, Pass::bwd}) {
    Panel p;
    p.unit = Panel::Unit::gib;
    p.title = fmt::format("{} Pass: peak memory", pass == Pass::fwd ? "Forward" : "Backward");
    for (const auto& r : res.rows) {
      if (r.pass != pass) continue;
      Slot s;
      const std::string note = shapes.note(r);
      s.label = case_label(r) + " " + to_string(r.dtype) + (note.empty() ? "" : " " + note);
      std::vector<const Measurement*> ms;
      if (r.ffpa) ms.push_back(&*r.ffpa);
      for (const auto& b : r.baselines) ms.push_back(&b);
      for (const Measurement* m : ms) {
        const std::string name = m->kind == "ffpa" ? "FFPA" : display_name(m->impl);
        const std::string id = "mem:" + r.key() + ":" + m->impl;
        if (usable(*m) && m->peak_mem_bytes > 0)
          s.bars.push_back({id, m->peak_mem_bytes / double(1 << 30), color_of(name), "", kMuted});
        else
          s.bars.push_back(missing(m, id));
      }
      if (!s.bars.empty()) p.slots.push_back(std::move(s));
    }
    if (!p.slots.empty()) panels.push_back(std::move(p));
  }

  // One scale a unit: the passes' speedup (or TFLOPS) panels compare, memory has its own.
  struct Scale {
    double top = 0, step = 1;
  };
  std::map<Panel::Unit, Scale> scales;
  size_t bars_per_slot = 1;
  int label_len = 0, width = 0;
  for (const auto& p : panels) {
    Scale& sc = scales[p.unit];
    if (p.unit == Panel::Unit::speedup) sc.top = std::max(sc.top, 1.0);
    for (const auto& s : p.slots) {
      bars_per_slot = std::max(bars_per_slot, s.bars.size());
      label_len = std::max(label_len, text_length(s.label));
      for (const auto& b : s.bars) sc.top = std::max(sc.top, b.value);
    }
  }
  for (auto& [unit, sc] : scales) {
    if (sc.top <= 0) sc.top = 1;
    sc.step = tick_step(sc.top * 1.12);
    sc.top = std::ceil(sc.top * 1.12 / sc.step) * sc.step;
  }
  // Speedup bars are wide enough for a horizontal "12.34x"; TFLOPS and memory bars are narrow,
  // grouped per row, and carry their value vertically.
  const auto bar_w = [](const Panel& p) { return p.unit == Panel::Unit::speedup ? 26 : 12; };
  const auto slot_w = [&](const Panel& p) {
    return p.unit == Panel::Unit::speedup ? 38 : int(bars_per_slot) * bar_w(p) + 14;
  };
  const auto value_room = [](const Panel& p) {
    return p.unit == Panel::Unit::speedup ? 12 : text_length("0000") + 4;
  };
  for (const auto& p : panels) width = std::max(width, int(p.slots.size()) * slot_w(p));

  Drawing d;
  const std::string what = by_speedup ? "FFPA speedup vs best baseline" : "TFLOPS";
  const std::string title =
      fmt::format("{}: {}{}", what, res.env.gpu.empty() ? "unknown GPU" : res.env.gpu,
                  res.rows.empty() ? "" : ", " + shapes.text());
  const int plot_left = kMargin + kAxisWidth;
  int legend_w = 0;
  for (const auto& [name, c] : legend) legend_w += 14 + text_length(name) + 16;
  d.width = std::max({plot_left + width + kMargin, 2 * kMargin + text_length(title, 2),
                      2 * kMargin + legend_w, 320});

  int y = kMargin;
  d.text(kMargin, y, title, kInk, 2);
  y += text_height(2) + 8;
  int lx = kMargin;
  for (const auto& [name, c] : legend) {
    d.rect(lx, y, 10, 8, c);
    d.text(lx + 14, y, name, kInk);
    lx += 14 + text_length(name) + 16;
  }
  if (by_speedup) {
    d.line(lx, y + 4, lx + 16, y + 4, kParity);
    d.text(lx + 20, y, "1x = best baseline", kInk);
  }
  if (!res.complete)
    d.text(d.width - kMargin - text_length("partial run"), y, "partial run", kFail);
  y += text_height() + 12;

  for (const auto& p : panels) {
    const bool speedups = p.unit == Panel::Unit::speedup;
    const double top = scales[p.unit].top, step = scales[p.unit].step;
    const int bw = bar_w(p), sw = slot_w(p);
    d.text(kMargin, y, p.title, kInk, 2);
    y += text_height(2) + 8 + value_room(p);
    const int y0 = y + kPlotHeight;  // the axis
    const int plot_right = plot_left + int(p.slots.size()) * sw;
    const auto ypix = [&](double v) { return y0 - int(std::lround(v / top * kPlotHeight)); };

    for (double v = 0; v <= top + step / 2; v += step) {
      const int yy = ypix(v);
      if (v > 0) d.line(plot_left, yy, plot_right, yy, kGrid);
      const std::string t = tick_label(v, step);
      d.text(plot_left - 6 - text_length(t), yy - 3, t, kInk);
    }
    const std::string axis = speedups                        ? "speedup (x)"
                             : p.unit == Panel::Unit::tflops ? "TFLOPS"
                                                             : "peak memory (GiB)";
    d.text(kMargin, y0 - kPlotHeight / 2 + text_length(axis) / 2, axis, kInk, 1, true);

    // Under the bars, so it never crosses a value label.
    if (speedups) d.line(plot_left, ypix(1), plot_right, ypix(1), kParity);
    for (size_t i = 0; i < p.slots.size(); ++i) {
      const Slot& s = p.slots[i];
      const int sx = plot_left + int(i) * sw + (sw - int(s.bars.size()) * bw) / 2;
      for (size_t k = 0; k < s.bars.size(); ++k) {
        const Bar& b = s.bars[k];
        const int bx = sx + int(k) * bw;
        if (b.value > 0) {
          const int top_px = ypix(b.value);
          d.rect(bx, top_px, speedups ? bw : bw - 2, y0 - top_px, b.color, b.id);
          if (speedups) {
            const std::string v = format_speedup(b.value);
            d.text(bx + bw / 2 - text_length(v) / 2, top_px - 10, v, kInk);
          } else {
            std::string v = fmt::format("{:.1f}", b.value);  // the axis gives the unit
            if (p.unit == Panel::Unit::tflops) v = format_tflops(b.value), v.pop_back();
            d.text(bx + 1, top_px - 3, v, kInk, 1, true);
          }
        } else if (speedups) {
          d.text(bx + bw / 2 - text_length(b.note) / 2, y0 - 10, b.note, b.note_color);
        } else {
          d.text(bx + 1, y0 - 3, b.note, b.note_color, 1, true);
        }
      }
      const int cx = plot_left + int(i) * sw + sw / 2;
      d.text(cx - 4, y0 + 6 + text_length(s.label), s.label, kInk, 1, true);
    }
    d.line(plot_left, y0, plot_right, y0, kInk);
    d.line(plot_left, y0, plot_left, y0 - kPlotHeight, kInk);
    y = y0 + 6 + label_len + kGap;
  }
  if (panels.empty()) {
    d.text(kMargin, y, "no rows", kMuted);
    y += text_height() + kGap;
  }
  d.height = y;
  return d;
}

void write_charts(const std::filesystem::path& dir, const std::string& stem, const Results& res) {
  const Drawing run = chart_drawing(res);
  write_file_atomic(dir / (stem + "_speedup.png"), render_png(run));
  write_file_atomic(dir / (stem + "_speedup.svg"), render_svg(run));
  if (!has_sweep(res)) return;
  const Drawing sweep = sweep_drawing(res);
  write_file_atomic(dir / (stem + "_sweep.png"), render_png(sweep));
  write_file_atomic(dir / (stem + "_sweep.svg"), render_svg(sweep));
}

}  // namespace ffpa
