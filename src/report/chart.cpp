#include "report/chart.hpp"

#include <algorithm>
#include <cmath>

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

}  // namespace

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
    panels.push_back(std::move(p));
  }

  double top = by_speedup ? 1 : 0;
  size_t bars_per_slot = 1, max_slots = 0;
  int label_len = 0;
  for (const auto& p : panels) {
    max_slots = std::max(max_slots, p.slots.size());
    for (const auto& s : p.slots) {
      bars_per_slot = std::max(bars_per_slot, s.bars.size());
      label_len = std::max(label_len, text_length(s.label));
      for (const auto& b : s.bars) top = std::max(top, b.value);
    }
  }
  if (top <= 0) top = 1;
  const double step = tick_step(top * 1.12);
  top = std::ceil(top * 1.12 / step) * step;

  // Speedup bars are wide enough for a horizontal "12.34x"; TFLOPS bars are narrow, grouped per
  // row, and carry their value vertically.
  const int bar_w = by_speedup ? 26 : 12;
  const int slot_w = by_speedup ? 38 : int(bars_per_slot) * bar_w + 14;
  const int value_room = by_speedup ? 12 : text_length("0000") + 4;

  Drawing d;
  const std::string what = by_speedup ? "FFPA speedup vs best baseline" : "TFLOPS";
  const std::string title =
      fmt::format("{}: {}{}", what, res.env.gpu.empty() ? "unknown GPU" : res.env.gpu,
                  res.rows.empty() ? "" : ", " + shapes.text());
  const int plot_left = kMargin + kAxisWidth;
  int legend_w = 0;
  for (const auto& [name, c] : legend) legend_w += 14 + text_length(name) + 16;
  d.width = std::max({plot_left + int(max_slots) * slot_w + kMargin,
                      2 * kMargin + text_length(title, 2), 2 * kMargin + legend_w, 320});

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
    d.text(kMargin, y, p.title, kInk, 2);
    y += text_height(2) + 8 + value_room;
    const int y0 = y + kPlotHeight;  // the axis
    const int plot_right = plot_left + int(p.slots.size()) * slot_w;
    const auto ypix = [&](double v) { return y0 - int(std::lround(v / top * kPlotHeight)); };

    for (double v = 0; v <= top + step / 2; v += step) {
      const int yy = ypix(v);
      if (v > 0) d.line(plot_left, yy, plot_right, yy, kGrid);
      const std::string t = tick_label(v, step);
      d.text(plot_left - 6 - text_length(t), yy - 3, t, kInk);
    }
    const std::string axis = by_speedup ? "speedup (x)" : "TFLOPS";
    d.text(kMargin, y0 - kPlotHeight / 2 + text_length(axis) / 2, axis, kInk, 1, true);

    // Under the bars, so it never crosses a value label.
    if (by_speedup) d.line(plot_left, ypix(1), plot_right, ypix(1), kParity);
    for (size_t i = 0; i < p.slots.size(); ++i) {
      const Slot& s = p.slots[i];
      const int sx = plot_left + int(i) * slot_w + (slot_w - int(s.bars.size()) * bar_w) / 2;
      for (size_t k = 0; k < s.bars.size(); ++k) {
        const Bar& b = s.bars[k];
        const int bx = sx + int(k) * bar_w;
        if (b.value > 0) {
          const int top_px = ypix(b.value);
          d.rect(bx, top_px, by_speedup ? bar_w : bar_w - 2, y0 - top_px, b.color, b.id);
          if (by_speedup) {
            const std::string v = format_speedup(b.value);
            d.text(bx + bar_w / 2 - text_length(v) / 2, top_px - 10, v, kInk);
          } else {
            std::string v = format_tflops(b.value);
            v.pop_back();  // the axis says TFLOPS
            d.text(bx + 1, top_px - 3, v, kInk, 1, true);
          }
        } else if (by_speedup) {
          d.text(bx + bar_w / 2 - text_length(b.note) / 2, y0 - 10, b.note, b.note_color);
        } else {
          d.text(bx + 1, y0 - 3, b.note, b.note_color, 1, true);
        }
      }
      const int cx = plot_left + int(i) * slot_w + slot_w / 2;
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

void write_chart_png(const std::filesystem::path& path, const Results& res) {
  write_file_atomic(path, encode_png(rasterize(chart_drawing(res))));
}

void write_chart_svg(const std::filesystem::path& path, const Results& res) {
  write_file_atomic(path, to_svg(chart_drawing(res)));
}

}  // namespace ffpa
