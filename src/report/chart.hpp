// The run's charts, rendered by Cairo as PNG and SVG from one layout (report/drawing.hpp).
// The run chart, like the seed's ffpa_{device}_speedup.png: one panel per pass, one bar per row
// (case x dtype) giving FFPA's speedup over the row's fastest usable baseline, coloured by dtype,
// with a line at 1x; when no row has a speedup (no FFPA rows, or no baselines) the bars are
// TFLOPS instead, one per implementation. Then one panel per pass with the peak memory each
// implementation needed. Rows without a value say why ("n/a", "FAIL", "-") where the bar would be.
// The sweep chart (runs over several D or N): TFLOPS against the swept value, one line per
// implementation, one panel per case x pass x dtype x the other shape fields.
#pragma once

#include <filesystem>
#include <string>

#include "core/results.hpp"
#include "report/drawing.hpp"

namespace ffpa {

// Bars carry ids "bar:<Row::key()>:speedup" (speedup chart), "bar:<Row::key()>:<impl>" (TFLOPS
// chart) and "mem:<Row::key()>:<impl>" (memory).
Drawing chart_drawing(const Results&);
// Whether the rows sweep D or N; the sweep chart's points carry ids
// "point:<panel key>:<implementation>:<swept value>".
bool has_sweep(const Results&);
Drawing sweep_drawing(const Results&);
// <stem>_speedup.png/.svg, and <stem>_sweep.png/.svg when the rows sweep D or N, into dir.
void write_charts(const std::filesystem::path& dir, const std::string& stem, const Results&);

}  // namespace ffpa
