// The run's chart, like the seed's ffpa_{device}_speedup.png: one panel per pass, one bar per
// row (case x dtype) giving FFPA's speedup over the row's fastest usable baseline, coloured by
// dtype, with a line at 1x. When no row has a speedup (no FFPA rows, or no baselines) the bars
// are TFLOPS instead, one per implementation. Rows without a value say why ("n/a", "FAIL", "-")
// where the bar would be. Rendered as PNG (built-in rasterizer) and SVG from one layout.
#pragma once

#include <filesystem>
#include <string>

#include "core/results.hpp"
#include "report/drawing.hpp"

namespace ffpa {

// Bars carry ids "bar:<Row::key()>:speedup" (speedup chart) or "bar:<Row::key()>:<impl>"
// (TFLOPS chart).
Drawing chart_drawing(const Results&);
void write_chart_png(const std::filesystem::path&, const Results&);
void write_chart_svg(const std::filesystem::path&, const Results&);

}  // namespace ffpa
