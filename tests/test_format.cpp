// Number, size and duration formats of the reports (report/format).
#include <catch2/catch.hpp>

#include <cstdint>

#include "report/format.hpp"

using namespace ffpa;

TEST_CASE("number formats follow the seed", "[format]") {
  CHECK(format_ms(11.4249) == "11.42");
  CHECK(format_ms(0.29) == "0.29");
  CHECK(format_ms(0.0613) == "0.0613");
  CHECK(format_tflops(385.4) == "385T");
  CHECK(format_tflops(1.84) == "1.8T");
  CHECK(format_tflops(0.694) == "0.69T");
  CHECK(format_tflops(0.0042) == "0.0042T");
  CHECK(format_speedup(2.8966) == "2.90x");
  CHECK(format_bytes(int64_t(17) << 29) == "8.50 GiB");
  CHECK(format_bytes(int64_t(512) << 20) == "512 MiB");
  CHECK(format_duration(7.4) == "0:07");
  CHECK(format_duration(750) == "12:30");
  CHECK(format_duration(3723) == "1:02:03");
  CHECK(format_duration(-1) == "--");
}
