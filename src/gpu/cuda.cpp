#include "gpu/cuda.hpp"

#include <algorithm>
#include <atomic>
#include <string>

namespace ffpa::gpu {
namespace {
std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};

void account(int64_t delta) {
  const int64_t now = g_current.fetch_add(delta) + delta;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}
}  // namespace

void fail(cudaError_t err, const char* expr, const char* file, int line) {
  throw RunError(std::string("CUDA error ") + cudaGetErrorName(err) + " (" +
                 cudaGetErrorString(err) + ") in " + expr + " at " + file + ":" +
                 std::to_string(line));
}

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw RunError(std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                   cudaGetErrorString(err) + ")");
}

bool available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

void launch(const void* fn, dim3 grid, dim3 block, size_t smem, cudaStream_t s, void** args,
            bool early, unsigned cluster) {
  cudaLaunchAttribute attrs[2] = {};
  unsigned n = 0;
  if (early) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 0) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n++].val.clusterDim = {cluster, 1, 1};
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = n ? attrs : nullptr;
  cfg.numAttrs = n;
  FFPA_CUDA(cudaLaunchKernelExC(&cfg, fn, args));
}

int64_t resident(const void* fn, int threads, size_t smem, unsigned cluster, int sm_count) {
  int per_sm = 0;
  FFPA_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, threads, smem));
  const int64_t ctas = int64_t{per_sm} * sm_count;
  if (cluster <= 1) return ctas;
  // Clusters are placed within a GPC: fewer may fit than CTAs / cluster.
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(cluster);
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = smem;
  // Named for kernels launched with the cluster as an attribute (the query fails without it);
  // one compiled with __cluster_dims__ accepts the same size.
  cudaLaunchAttribute dims{};
  dims.id = cudaLaunchAttributeClusterDimension;
  dims.val.clusterDim.x = cluster;
  dims.val.clusterDim.y = 1;
  dims.val.clusterDim.z = 1;
  cfg.attrs = &dims;
  cfg.numAttrs = 1;
  int clusters = 0;
  FFPA_CUDA(cudaOccupancyMaxActiveClusters(&clusters, fn, &cfg));
  return std::min<int64_t>(clusters, ctas / cluster);
}

MemoryStats memory_stats() {
  return {g_current.load(), g_peak.load()};
}
void reset_peak_memory() {
  g_peak.store(g_current.load());
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t err = cudaMalloc(&ptr_, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls are unaffected
    ptr_ = nullptr;
    bytes_ = 0;
    throw RunError("out of device memory: cudaMalloc of " + std::to_string(bytes) +
                   " bytes failed (" + cudaGetErrorString(err) + ")");
  }
  account(static_cast<int64_t>(bytes));
}

DeviceBuffer::~DeviceBuffer() {
  release();
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() {
  if (!ptr_) return;
  cudaFree(ptr_);
  account(-static_cast<int64_t>(bytes_));
  ptr_ = nullptr;
  bytes_ = 0;
}

Stream::Stream() {
  FFPA_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}
Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}
void Stream::sync() const {
  FFPA_CUDA(cudaStreamSynchronize(stream_));
}

Event::Event() {
  FFPA_CUDA(cudaEventCreate(&event_));
}
Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}
void Event::record(cudaStream_t s) const {
  FFPA_CUDA(cudaEventRecord(event_, s));
}
float Event::since(const Event& start) const {
  float ms = 0;
  FFPA_CUDA(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

namespace {
struct KnownDevice {
  const char* arch;
  const char* name;
  int major, minor, sms, smem_optin;
};
constexpr KnownDevice kKnown[] = {
    {"sm_80", "A100 (sm_80)", 8, 0, 108, 166912},
    {"sm_86", "RTX 3090 (sm_86)", 8, 6, 82, 101376},
    {"sm_89", "RTX 4090 (sm_89)", 8, 9, 128, 101376},
    {"sm_90a", "H100/H200 (sm_90a)", 9, 0, 132, 232448},
};
}  // namespace

DeviceInfo known_device(const std::string& arch) {
  DeviceInfo d;
  for (const auto& k : kKnown)
    if (arch == k.arch) {
      d.name = k.name;
      d.sm_major = k.major;
      d.sm_minor = k.minor;
      d.sm_count = k.sms;
      d.smem_per_block_optin = k.smem_optin;
      d.regs_per_sm = 65536;
    }
  return d;
}

std::vector<std::string> known_archs() {
  std::vector<std::string> out;
  for (const auto& k : kKnown) out.push_back(k.arch);
  return out;
}

int device_count() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  // The runtime says "driver version is insufficient" when there is no driver at all.
  int driver = 0;
  const bool no_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0;
  if (err != cudaSuccess || count == 0)
    throw RunError(std::string("no usable GPU: ") + (no_driver ? "no CUDA driver is installed"
                                                     : err != cudaSuccess ? cudaGetErrorString(err)
                                                                          : "no CUDA device"));
  return count;
}

DeviceInfo open_device(int ordinal) {
  const int count = device_count();
  if (ordinal < 0 || ordinal >= count)
    throw InputError("command line", "--device",
                     "device " + std::to_string(ordinal) + " does not exist (" +
                         std::to_string(count) + " present)");
  FFPA_CUDA(cudaSetDevice(ordinal));
  cudaDeviceProp p{};
  FFPA_CUDA(cudaGetDeviceProperties(&p, ordinal));
  DeviceInfo d;
  d.ordinal = ordinal;
  d.name = p.name;
  d.sm_major = p.major;
  d.sm_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.l2_bytes = p.l2CacheSize;
  d.global_mem_bytes = static_cast<int64_t>(p.totalGlobalMem);
  d.smem_per_block_optin = static_cast<int>(p.sharedMemPerBlockOptin);
  d.regs_per_sm = p.regsPerMultiprocessor;
  int khz = 0;
  FFPA_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, ordinal));
  d.max_clock_mhz = khz / 1000;
  FFPA_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, ordinal));
  d.memory_clock_mhz = khz / 1000;
  FFPA_CUDA(cudaDeviceGetAttribute(&d.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, ordinal));
  FFPA_CUDA(cudaDriverGetVersion(&d.driver_version));
  FFPA_CUDA(cudaRuntimeGetVersion(&d.runtime_version));
  return d;
}

}  // namespace ffpa::gpu
