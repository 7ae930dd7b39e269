// Time stamps and elapsed seconds, one definition for every module.
#pragma once

#include <chrono>
#include <string>

namespace ffpa {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The current time in UTC, ISO 8601 to the second: "2026-12-03T09:55:00Z".
std::string utc_now();

}  // namespace ffpa
