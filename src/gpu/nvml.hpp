// NVML, loaded with dlopen so that the binary has no link-time dependency on the driver.
#pragma once

#include <string>

namespace ffpa {

// The NVIDIA driver's version ("580.159.04"); empty when NVML is unavailable.
std::string nvidia_driver_version();

// Current SM clock of one device (the timer records it per sample). read() returns 0 when NVML
// or the device is unavailable.
class SmClock {
 public:
  explicit SmClock(int ordinal);
  ~SmClock();
  SmClock(const SmClock&) = delete;
  SmClock& operator=(const SmClock&) = delete;
  bool available() const { return device_ != nullptr; }
  unsigned read() const;
  // Why the clock is not available (empty when it is).
  const std::string& why_not() const { return why_not_; }

 private:
  void* device_ = nullptr;  // nvmlDevice_t
  std::string why_not_;
};

}  // namespace ffpa
