#include "core/results.hpp"

#include <algorithm>

namespace ffpa {

std::string to_string(Status s) {
  switch (s) {
    case Status::ok:
      return "ok";
    case Status::failed:
      return "failed";
    case Status::skipped:
      return "skipped";
  }
  return "?";
}

std::optional<Status> parse_status(const std::string& s) {
  for (Status st : {Status::ok, Status::failed, Status::skipped})
    if (to_string(st) == s) return st;
  return std::nullopt;
}

bool Measurement::correct() const {
  return checked && std::all_of(checks.begin(), checks.end(), [](const auto& c) { return c.pass; });
}

int failed_measurements(const Results& res) {
  const auto failed = [](const Measurement& m) {
    return m.status == Status::failed || (m.checked && !m.correct());
  };
  int n = 0;
  for (const Row& row : res.rows) {
    if (row.ffpa && failed(*row.ffpa)) ++n;
    for (const auto& b : row.baselines) n += failed(b);
  }
  return n;
}

std::string Row::key() const {
  return case_name + "/" + to_string(pass) + "/" + to_string(dtype) + "/" +
         std::to_string(shape.B) + "." + std::to_string(shape.Hq) + "." +
         std::to_string(shape.Hkv) + "." + std::to_string(shape.Nq) + "." +
         std::to_string(shape.Nkv) + "." + std::to_string(shape.D);
}

}  // namespace ffpa
