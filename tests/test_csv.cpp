// CSV report (report/csv) against the golden, read back by an independent RFC 4180 reader.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "report/csv.hpp"
#include "report_support.hpp"

using namespace ffpa;

namespace {

// RFC 4180 reader, to check the writer's quoting independently.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"')
        rows.back().back() += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        rows.back().back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().emplace_back();
    } else if (c == '\n') {
      rows.emplace_back(1);
    } else {
      rows.back().back() += c;
    }
  }
  REQUIRE_FALSE(quoted);
  if (rows.back().size() == 1 && rows.back()[0].empty()) rows.pop_back();
  return rows;
}

}  // namespace

TEST_CASE("CSV matches the golden and parses back", "[csv]") {
  const Results res = test::sample_results();
  const std::string csv = render_csv(res);
  test::check_golden("report.csv", csv);

  const auto rows = parse_csv(csv);
  const auto& head = rows.at(0);
  size_t lines = 0;
  for (const auto& r : res.rows)
    lines += (r.ffpa ? 1 : 0) + r.ffpa_others.size() + r.baselines.size();
  REQUIRE(rows.size() == 1 + lines);
  for (const auto& r : rows) REQUIRE(r.size() == head.size());
  const auto col = [&](const std::string& name) {
    const auto it = std::find(head.begin(), head.end(), name);
    REQUIRE(it != head.end());
    return size_t(it - head.begin());
  };
  // The gqa bwd unfused failure carries a comma and quotes in its reason.
  bool found = false;
  for (const auto& r : rows)
    if (r[col("case")] == "gqa" && r[col("pass")] == "bwd" && r[col("impl")] == "unfused") {
      found = true;
      CHECK(r[col("status")] == "failed");
      CHECK(r[col("reason")] == "cuBLASLt: \"CUBLAS_STATUS_ALLOC_FAILED\", workspace 2.1 GiB");
    }
  REQUIRE(found);
  // Exact numbers: the median written is the double stored.
  const auto& first = rows.at(1);
  CHECK(first[col("impl")] == "ffpa-fwd-sm90");
  CHECK(std::stod(first[col("median_ms")]) == res.rows[0].ffpa->timing.median_ms);
  CHECK(std::stod(first[col("speedup_vs_unfused")]) == 16.0 / 11.42);
  CHECK(first[col("config")] == "Br=64,Bc=64,stages=2");
}

TEST_CASE("CSV quoting", "[csv]") {
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_field("two\nlines") == "\"two\nlines\"");
  CHECK(csv_field(" padded") == "\" padded\"");
  CHECK(csv_field("") == "");
}
