#include "report/drawing.hpp"

#include <cairo-svg.h>
#include <cairo.h>

#include <cmath>
#include <memory>

#include "core/error.hpp"

namespace ffpa {
namespace {

// Any sans-serif face fontconfig finds; 9 pixels a scale step keeps the charts' former layout.
constexpr const char* kFont = "sans-serif";
constexpr double kFontPx = 9.0;
constexpr int kLine = 11;  // text box height a scale step: ascent, descent and spacing

using Surface = std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)>;
using Context = std::unique_ptr<cairo_t, decltype(&cairo_destroy)>;

void check(cairo_status_t s, const char* what) {
  if (s != CAIRO_STATUS_SUCCESS)
    throw RunError(std::string("cairo: ") + what + ": " + cairo_status_to_string(s));
}

void set_color(cairo_t* cr, uint32_t c) {
  cairo_set_source_rgb(cr, ((c >> 16) & 255) / 255.0, ((c >> 8) & 255) / 255.0, (c & 255) / 255.0);
}

void set_font(cairo_t* cr, int scale) {
  cairo_select_font_face(cr, kFont, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, kFontPx * scale);
}

void paint(cairo_t* cr, const Drawing& d) {
  set_color(cr, d.background);
  cairo_paint(cr);
  cairo_set_line_width(cr, 1);
  for (const auto& it : d.items) {
    set_color(cr, it.color);
    switch (it.kind) {
      case Drawing::Kind::rect:
        cairo_rectangle(cr, it.x, it.y, it.w, it.h);
        cairo_fill(cr);
        break;
      case Drawing::Kind::line:
        // Pixel centres: a 1-pixel stroke covers whole pixels.
        cairo_move_to(cr, it.x + 0.5, it.y + 0.5);
        cairo_line_to(cr, it.x + it.w + 0.5, it.y + it.h + 0.5);
        cairo_stroke(cr);
        break;
      case Drawing::Kind::text: {
        set_font(cr, it.scale);
        cairo_font_extents_t fe;
        cairo_font_extents(cr, &fe);
        cairo_save(cr);
        cairo_translate(cr, it.x, it.y);
        if (it.vertical) cairo_rotate(cr, -M_PI / 2);
        cairo_move_to(cr, 0, fe.ascent);
        cairo_show_text(cr, it.text.c_str());
        cairo_restore(cr);
        break;
      }
    }
  }
  check(cairo_status(cr), "drawing");
}

cairo_status_t append(void* out, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(out)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

void Drawing::rect(int x, int y, int w, int h, uint32_t color, std::string id) {
  Item it;
  it.kind = Kind::rect;
  it.x = x, it.y = y, it.w = w, it.h = h, it.color = color, it.id = std::move(id);
  items.push_back(std::move(it));
}

void Drawing::line(int x0, int y0, int x1, int y1, uint32_t color) {
  Item it;
  it.kind = Kind::line;
  it.x = x0, it.y = y0, it.w = x1 - x0, it.h = y1 - y0, it.color = color;
  items.push_back(std::move(it));
}

void Drawing::text(int x, int y, const std::string& s, uint32_t color, int scale, bool vertical) {
  Item it;
  it.kind = Kind::text;
  it.x = x, it.y = y, it.color = color, it.text = s, it.scale = scale, it.vertical = vertical;
  items.push_back(std::move(it));
}

const Drawing::Item* Drawing::find(const std::string& id) const {
  for (const auto& it : items)
    if (it.id == id) return &it;
  return nullptr;
}

int text_length(const std::string& s, int scale) {
  if (s.empty()) return 0;
  const Surface surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1),
                        cairo_surface_destroy);
  const Context cr(cairo_create(surface.get()), cairo_destroy);
  set_font(cr.get(), scale);
  cairo_text_extents_t e;
  cairo_text_extents(cr.get(), s.c_str(), &e);
  return static_cast<int>(std::ceil(e.x_advance));
}

int text_height(int scale) {
  return kLine * scale;
}

std::string render_png(const Drawing& d) {
  const Surface surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24, d.width, d.height),
                        cairo_surface_destroy);
  check(cairo_surface_status(surface.get()), "image surface");
  {
    const Context cr(cairo_create(surface.get()), cairo_destroy);
    paint(cr.get(), d);
  }
  std::string png;
  check(cairo_surface_write_to_png_stream(surface.get(), append, &png), "PNG encoding");
  return png;
}

std::string render_svg(const Drawing& d) {
  std::string svg;
  {
    const Surface surface(cairo_svg_surface_create_for_stream(append, &svg, d.width, d.height),
                          cairo_surface_destroy);
    check(cairo_surface_status(surface.get()), "SVG surface");
    {
      const Context cr(cairo_create(surface.get()), cairo_destroy);
      paint(cr.get(), d);
    }
    cairo_surface_finish(surface.get());  // the SVG is complete only here
    check(cairo_surface_status(surface.get()), "SVG output");
  }
  return svg;
}

}  // namespace ffpa
