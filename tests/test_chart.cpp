// Charts (report/chart): PNG structure and pixels, decoded here by Cairo's own reader, and SVG.
#include <cairo.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "report/chart.hpp"
#include "report_support.hpp"
#include "support.hpp"

using namespace ffpa;

namespace {

cairo_status_t read_bytes(void* closure, unsigned char* data, unsigned int length) {
  auto* in = static_cast<std::pair<const std::string*, size_t>*>(closure);
  if (in->second + length > in->first->size()) return CAIRO_STATUS_READ_ERROR;
  std::memcpy(data, in->first->data() + in->second, length);
  in->second += length;
  return CAIRO_STATUS_SUCCESS;
}

// A PNG read back by Cairo's decoder (independent of how it was written).
struct DecodedPng {
  int width = 0, height = 0;
  std::vector<uint32_t> px;  // 0xRRGGBB
  uint32_t at(int x, int y) const { return px[size_t(y) * width + x]; }
};

DecodedPng decode_png(const std::string& png) {
  REQUIRE(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  std::pair<const std::string*, size_t> in{&png, 0};
  cairo_surface_t* s = cairo_image_surface_create_from_png_stream(read_bytes, &in);
  REQUIRE(cairo_surface_status(s) == CAIRO_STATUS_SUCCESS);
  cairo_surface_flush(s);
  DecodedPng img;
  img.width = cairo_image_surface_get_width(s);
  img.height = cairo_image_surface_get_height(s);
  const int stride = cairo_image_surface_get_stride(s);
  const unsigned char* data = cairo_image_surface_get_data(s);
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      uint32_t v;
      std::memcpy(&v, data + size_t(y) * stride + size_t(x) * 4, 4);
      img.px.push_back(v & 0xFFFFFF);
    }
  cairo_surface_destroy(s);
  return img;
}

bool dark(uint32_t c) {
  return ((c >> 16) & 255) < 128 && ((c >> 8) & 255) < 128 && (c & 255) < 128;
}

}  // namespace

TEST_CASE("chart PNG is valid and shows the bars", "[png]") {
  const Results res = test::sample_results();
  const Drawing d = chart_drawing(res);
  const std::string png = render_png(d);
  const DecodedPng img = decode_png(png);
  REQUIRE(img.width == d.width);
  REQUIRE(img.height == d.height);
  CHECK(img.at(0, 0) == 0xFFFFFF);

  // Speedups: self-attn fp16 fwd 16.00 / 11.42 = 1.40x, causal bf16 fwd 16.1 / 6.34 = 2.54x.
  const Drawing::Item* self = d.find("bar:" + res.rows[0].key() + ":speedup");
  const Drawing::Item* causal = d.find("bar:" + res.rows[6].key() + ":speedup");
  REQUIRE(self);
  REQUIRE(causal);
  CHECK(img.at(self->x + self->w / 2, self->y + self->h / 2) == self->color);
  CHECK(img.at(causal->x + causal->w / 2, causal->y + causal->h / 2) == causal->color);
  CHECK(self->color != causal->color);  // fp16 and bf16
  CHECK(std::abs(double(causal->h) / self->h - (16.1 / 6.34) / (16.0 / 11.42)) < 0.02);
  // Bars stand on one axis per panel.
  CHECK(self->y + self->h == causal->y + causal->h);
  // No bar where there is no speedup: failed, skipped FFPA, no FFPA.
  CHECK(d.find("bar:" + res.rows[3].key() + ":speedup") == nullptr);
  CHECK(d.find("bar:" + res.rows[7].key() + ":speedup") == nullptr);
  CHECK(d.find("bar:" + res.rows[10].key() + ":speedup") == nullptr);
  // Text is drawn: dark pixels outside every bar and axis line.
  size_t ink = 0;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) ink += dark(img.at(x, y));
  CHECK(ink > 1000);

  test::TempDir dir;
  write_charts(dir.path(), "run", res);
  CHECK(test::read_file(dir.path() / "run_speedup.png") == png);
  CHECK(std::filesystem::exists(dir.path() / "run_sweep.png") == has_sweep(res));
}

TEST_CASE("chart falls back to TFLOPS without FFPA rows", "[png]") {
  Results res = test::sample_results();
  for (auto& r : res.rows) r.ffpa.reset();
  const Drawing d = chart_drawing(res);
  const Drawing::Item* cudnn = d.find("bar:" + res.rows[0].key() + ":cudnn");
  const Drawing::Item* unfused = d.find("bar:" + res.rows[0].key() + ":unfused");
  REQUIRE(cudnn);
  REQUIRE(unfused);
  CHECK(cudnn->color != unfused->color);
  CHECK(unfused->h > cudnn->h);  // 275 vs 92 TFLOPS
  CHECK(d.find("bar:" + res.rows[0].key() + ":speedup") == nullptr);
  const DecodedPng img = decode_png(render_png(d));
  CHECK(img.at(unfused->x + unfused->w / 2, unfused->y + 1) == unfused->color);
}

TEST_CASE("chart SVG is a complete document with the drawing's size and bar colours", "[svg]") {
  Results res = test::sample_results();
  res.rows[0].case_name = "a<b&c";  // text becomes glyph outlines: nothing to escape
  const Drawing d = chart_drawing(res);
  const std::string svg = render_svg(d);
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find(fmt::format("width=\"{}pt\" height=\"{}pt\"", d.width, d.height)) !=
        std::string::npos);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("a<b") == std::string::npos);
  const Drawing::Item* self = d.find("bar:" + res.rows[0].key() + ":speedup");
  REQUIRE(self);
  // Cairo writes colours as percentages: rgb(29.803922%,47.058824%,65.882353%).
  const auto pct = [](uint32_t c, int shift) { return ((c >> shift) & 255) / 255.0 * 100; };
  CHECK(svg.find(fmt::format("fill:rgb({:.6f}%,{:.6f}%,{:.6f}%)", pct(self->color, 16),
                             pct(self->color, 8), pct(self->color, 0))) != std::string::npos);

  // Cairo numbers its glyph definitions per process, so a second rendering is not byte-equal.
  test::TempDir dir;
  write_charts(dir.path(), "run", res);
  CHECK(test::read_file(dir.path() / "run_speedup.svg").rfind("<?xml", 0) == 0);
}

TEST_CASE("the run chart shows the memory each implementation needed", "[png]") {
  const Results res = test::sample_results();
  const Drawing d = chart_drawing(res);
  const Row& r = res.rows[0];
  REQUIRE(r.ffpa);
  REQUIRE(!r.baselines.empty());
  const Drawing::Item* ffpa = d.find("mem:" + r.key() + ":" + r.ffpa->impl);
  const Drawing::Item* base = d.find("mem:" + r.key() + ":" + r.baselines[0].impl);
  REQUIRE(ffpa);
  REQUIRE(base);
  CHECK(ffpa->color != base->color);
  // Bar heights follow the peak memory each needed.
  const double ratio = double(r.baselines[0].peak_mem_bytes) / r.ffpa->peak_mem_bytes;
  CHECK(std::abs(double(base->h) / ffpa->h - ratio) < 0.05 * ratio + 0.05);
  const DecodedPng img = decode_png(render_png(d));
  CHECK(img.at(ffpa->x + ffpa->w / 2, ffpa->y + ffpa->h / 2) == ffpa->color);
}

TEST_CASE("a sweep over D draws TFLOPS against D, one line per implementation", "[png]") {
  Results res = test::sample_results();
  // Rows of other cases, or of the same case at another H and N, are not a sweep.
  Results plain = res;
  plain.rows = {res.rows[1], res.rows[1]};
  plain.rows[1].shape.Hq = plain.rows[1].shape.Hkv = 8;
  plain.rows[1].shape.Nq = plain.rows[1].shape.Nkv = 8191;
  CHECK_FALSE(has_sweep(plain));
  Results sweep;
  sweep.env = res.env;
  sweep.complete = true;
  for (int64_t D : {320, 512, 1024}) {
    Row r = res.rows[0];
    r.shape.D = D;
    r.ffpa->tflops = double(D) / 4;
    for (auto& b : r.baselines) b.tflops = 100;
    sweep.rows.push_back(r);
  }
  REQUIRE(has_sweep(sweep));
  const Drawing d = sweep_drawing(sweep);
  std::vector<const Drawing::Item*> ffpa;
  for (const auto& it : d.items)
    if (it.id.rfind("point:", 0) == 0 && it.id.find(":FFPA:") != std::string::npos)
      ffpa.push_back(&it);
  REQUIRE(ffpa.size() == 3);
  CHECK(ffpa[0]->x < ffpa[1]->x);  // left to right by D
  CHECK(ffpa[1]->x < ffpa[2]->x);
  CHECK(ffpa[0]->y > ffpa[1]->y);  // higher TFLOPS, higher on the page
  CHECK(ffpa[1]->y > ffpa[2]->y);
  size_t lines = 0;
  for (const auto& it : d.items)
    lines += it.kind == Drawing::Kind::line && it.color == ffpa[0]->color;
  CHECK(lines == 2);  // 320-512, 512-1024
  test::TempDir dir;
  write_charts(dir.path(), "run", sweep);
  CHECK(decode_png(test::read_file(dir.path() / "run_sweep.png")).width == d.width);
  CHECK(std::filesystem::exists(dir.path() / "run_sweep.svg"));
}

TEST_CASE("text is measured with the renderer's font and drawn where the drawing says", "[png]") {
  CHECK(text_length("") == 0);
  CHECK(text_length("I") > 0);
  CHECK(text_length("WWWW") > text_length("iiii"));
  CHECK(text_length("ab", 2) > text_length("ab"));
  Drawing d;
  d.width = 80;
  d.height = 40;
  d.text(4, 4, "WWW", 0x000000);
  const DecodedPng img = decode_png(render_png(d));
  size_t inside = 0, outside = 0;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      if (!dark(img.at(x, y))) continue;
      const bool in_box =
          x >= 4 && x < 4 + text_length("WWW") + 1 && y >= 4 && y < 4 + text_height();
      (in_box ? inside : outside) += 1;
    }
  CHECK(inside > 10);
  CHECK(outside == 0);
}
