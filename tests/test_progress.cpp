// The progress line (report/progress).
#include <catch2/catch.hpp>

#include <cmath>

#include "report/progress.hpp"

using namespace ffpa;

TEST_CASE("progress line", "[progress]") {
  CHECK(progress_line(3, 40, 65, 750, "self-attn fwd bf16") ==
        "[ 3/40]   5% elapsed 1:05, ETA 12:30 | self-attn fwd bf16");
  CHECK(progress_line(1, 5, 0, std::nan(""), "") == "[1/5]   0% elapsed 0:00, ETA --");
  CHECK(progress_line(5, 5, 3725, 0, "x") == "[5/5]  80% elapsed 1:02:05, ETA 0:00 | x");
}
