// A tiny vector drawing (rectangles, lines, text) rendered two ways: rasterized with a built-in
// 5x7 bitmap font (for PNG) and written as SVG, so both chart files show the same picture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/png.hpp"

namespace ffpa {

struct Drawing {
  enum class Kind { rect, line, text };
  struct Item {
    Kind kind = Kind::rect;
    int x = 0, y = 0, w = 0, h = 0;  // rect: box; line: from (x, y) to (x + w, y + h)
    uint32_t color = 0;              // 0xRRGGBB
    std::string text;                // text: ASCII; other characters draw as '?'
    int scale = 1;                   // text: pixel size of one font dot
    bool vertical = false;           // text: reads bottom to top; (x, y) is the box's bottom-left
    std::string id;                  // names an item for tests and the SVG's id attribute
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

// Text box size in pixels along the text, and across it (9 * scale).
int text_length(const std::string&, int scale = 1);
int text_height(int scale = 1);

Image rasterize(const Drawing&);
std::string to_svg(const Drawing&);

}  // namespace ffpa
