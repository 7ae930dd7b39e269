// A small vector drawing (rectangles, lines, text) laid out by the charts and rendered by Cairo
// (Debian libcairo2) as PNG and as SVG, with the system's sans-serif font through fontconfig, so
// both chart files show the same picture. Items keep ids, so tests can find what was drawn where.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ffpa {

struct Drawing {
  enum class Kind { rect, line, text };
  struct Item {
    Kind kind = Kind::rect;
    int x = 0, y = 0, w = 0, h = 0;  // rect: box; line: from (x, y) to (x + w, y + h)
    uint32_t color = 0;              // 0xRRGGBB
    std::string text;                // text: UTF-8
    int scale = 1;                   // text: size, in multiples of the base size
    bool vertical = false;           // text: reads bottom to top; (x, y) is the box's bottom-left
    std::string id;                  // names an item for tests
  };
  int width = 0, height = 0;
  uint32_t background = 0xFFFFFF;
  std::vector<Item> items;

  void rect(int x, int y, int w, int h, uint32_t color, std::string id = {});
  void line(int x0, int y0, int x1, int y1, uint32_t color);
  // (x, y): top-left of the text box, or bottom-left for vertical text.
  void text(int x, int y, const std::string& s, uint32_t color, int scale = 1,
            bool vertical = false);
  const Item* find(const std::string& id) const;
};

// Text box size in pixels along the text (measured with the renderer's font) and across it.
int text_length(const std::string&, int scale = 1);
int text_height(int scale = 1);

// The drawing as PNG bytes (RGB) and as an SVG document. Throw RunError when Cairo fails.
std::string render_png(const Drawing&);
std::string render_svg(const Drawing&);

}  // namespace ffpa
