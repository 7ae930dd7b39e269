// The human-readable report, in the seed's table format:
//
//   ## Benchmark
//   Env: NVIDIA H200, B=1, N=8192, H=32, D=512.
//   ### Forward Pass (ffpa-fwd-sm90)
//   | Case | dtype | Nq/Nkv | FFPA / best baseline | TFLOPS | speedup |
//   | self-attn | bf16 | 8192/8192 | 11.42 / 33.10 ms (unfused) | 385T / 133T | 2.90x |
//
// Baseline modes: best compares each row with its fastest usable baseline and names it in the
// cell; cudnn / unfused compare with that one (header "FFPA / cuDNN"); all gives each baseline a
// column pair (time with TFLOPS, speedup); none shows FFPA alone. speedup = baseline median /
// FFPA median. No FFPA measurement: "–"; skipped: "n/a (reason)"; wrong results:
// "FAIL (max err ...)". Shapes that differ between rows: the Env line gives the most common value
// and the others ("N=8192 (also 8191)"), and each row that differs in B, H or D says so in its
// case label ("non-aligned [H=8]"). A details table follows with noise, samples, configuration,
// correctness and memory for every measurement.
#pragma once

#include <string>

#include "core/results.hpp"
#include "report/options.hpp"

namespace ffpa {

std::string render_markdown(const Results&, BaselineMode);

}  // namespace ffpa
