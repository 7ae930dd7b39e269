// NVML through dlopen: the SM clock during timing and the driver's version, with no NVML header
// or library at build time.
#include "gpu/nvml.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

namespace ffpa {
namespace {

// The few NVML entry points used, declared here: no NVML header or library at build time.
using nvml_ret = int;
using nvml_dev = void*;
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

struct Nvml {
  nvml_ret (*init)() = nullptr;
  nvml_ret (*by_pci)(const char*, nvml_dev*) = nullptr;
  nvml_ret (*clock)(nvml_dev, int, unsigned*) = nullptr;
  nvml_ret (*driver)(char*, unsigned) = nullptr;  // optional
  std::string error;  // why NVML is unusable; empty when it loaded and initialized

  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = "libnvidia-ml.so.1 not loadable";
      return;
    }
    init = reinterpret_cast<decltype(init)>(dlsym(lib, "nvmlInit_v2"));
    by_pci = reinterpret_cast<decltype(by_pci)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock = reinterpret_cast<decltype(clock)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    driver = reinterpret_cast<decltype(driver)>(dlsym(lib, "nvmlSystemGetDriverVersion"));
    if (!init || !by_pci || !clock) {
      error = "NVML lacks nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2 or nvmlDeviceGetClockInfo";
    } else if (const nvml_ret r = init(); r != 0) {
      error = "nvmlInit_v2 failed (" + std::to_string(r) + ")";
    }
    // The library stays loaded and initialized for the life of the process.
  }
};

const Nvml& nvml() {
  static const Nvml n;
  return n;
}

}  // namespace

std::string nvidia_driver_version() {
  const Nvml& n = nvml();
  char buf[96] = {};
  if (!n.error.empty() || !n.driver || n.driver(buf, sizeof buf) != 0) return {};
  return buf;
}

SmClock::SmClock(int ordinal) {
  const Nvml& n = nvml();
  if (!n.error.empty()) {
    why_not_ = n.error;
    return;
  }
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) != cudaSuccess) {
    cudaGetLastError();
    why_not_ = "PCI bus id of device " + std::to_string(ordinal) + " unknown";
    return;
  }
  nvml_dev d = nullptr;
  if (const nvml_ret r = n.by_pci(bus, &d); r != 0) {
    why_not_ = std::string("NVML does not know device ") + bus + " (" + std::to_string(r) + ")";
    return;
  }
  unsigned mhz = 0;
  if (const nvml_ret r = n.clock(d, kNvmlClockSm, &mhz); r != 0) {
    why_not_ = "NVML cannot read the SM clock (" + std::to_string(r) + ")";
    return;
  }
  device_ = d;
}

SmClock::~SmClock() = default;

unsigned SmClock::read() const {
  if (!device_) return 0;
  unsigned mhz = 0;
  return nvml().clock(device_, kNvmlClockSm, &mhz) == 0 ? mhz : 0;
}

}  // namespace ffpa
