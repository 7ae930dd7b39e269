// Microbenchmarks behind the Hopper kernels' design (kernels/microbench_sm90.cuh,
// docs/notes/microbench.md). The default case checks that the exchange kernel runs on clusters
// and that an exchange takes time; "[bench]" prints cycles per exchange over payloads and
// amounts of overlapping work, HBM streaming and L2 reduction rates, and the proxy fence's cycles
// after global reductions. Needs an sm_90 GPU: elsewhere every case warns and returns. "[bench]"
// also times cuBLASLt on the GEMMs of a split backward (docs/notes/ffpa_bwd_split.md).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu/cuda.hpp"
#include "gpu/nvrtc.hpp"
#include "unfused/lt_gemm.hpp"

using namespace ffpa;

namespace {

const gpu::DeviceInfo& device() {
  static const gpu::DeviceInfo d = gpu::open_device(0);
  return d;
}

bool hopper() {
  const bool yes = device().sm_major == 9;
  if (!yes) WARN("not an sm_90 GPU: the Hopper microbenchmarks do not run here");
  return yes;
}

struct Exchange {
  double median_cycles = 0;  // of one exchange, over the blocks
  long long min_cycles = 0, max_cycles = 0;
};

// Every SM's block (pairs of clusters), NV float4 a thread and exchange, `work` FMAs (red = 0) or
// 16-byte global reductions (red = 1) between the stores and the wait.
Exchange run_exchange(int nv, int work, int iters, int red = 0) {
  const nvrtc::Compiled comp =
      nvrtc::compile("microbench_sm90.cuh", {"-DFFPA_MB_NV=" + std::to_string(nv)}, "sm_90a");
  const nvrtc::Library lib(comp.cubin);
  const cudaKernel_t fn = lib.kernel("mb_exchange_kernel");
  const int blocks = device().sm_count / 2 * 2, threads = 256;
  const int smem = 2 * nv * threads * 16 + 16;
  FFPA_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  gpu::DeviceBuffer cycles(blocks * sizeof(long long));
  gpu::DeviceBuffer sink(static_cast<size_t>(blocks) * threads * sizeof(float));
  gpu::DeviceBuffer reds(static_cast<size_t>(blocks) * threads * 64 * 16);
  long long* c = cycles.as<long long>();
  float* s = sink.as<float>();
  float* r = reds.as<float>();
  void* args[] = {&c, &s, &r, &iters, &work, &red};
  gpu::launch(reinterpret_cast<const void*>(fn), dim3(blocks), dim3(threads),
              static_cast<size_t>(smem), nullptr, args, false, 2);
  FFPA_CUDA(cudaDeviceSynchronize());
  std::vector<long long> h(blocks);
  FFPA_CUDA(cudaMemcpy(h.data(), c, blocks * sizeof(long long), cudaMemcpyDeviceToHost));
  std::sort(h.begin(), h.end());
  return {static_cast<double>(h[h.size() / 2]), h.front(), h.back()};
}

// Milliseconds of the fastest of `reps` runs of `launch` on the default stream, timed with events
// (a first run warms up).
template <class F>
double best_ms(int reps, F&& launch) {
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) {
    gpu::Event start, stop;
    FFPA_CUDA(cudaEventRecord(start.get()));
    launch();
    FFPA_CUDA(cudaEventRecord(stop.get()));
    FFPA_CUDA(cudaEventSynchronize(stop.get()));
    if (r > 0) best = std::min(best, static_cast<double>(stop.since(start)));
  }
  return best;
}

// HBM streaming (mb_stream_kernel): GB/s of `mode` (0 read, 1 write, 2 copy) over `bytes`,
// the best of `reps` launches timed with events (the first launch warms up).
double run_stream(int mode, size_t bytes, int reps) {
  const nvrtc::Compiled comp = nvrtc::compile("microbench_sm90.cuh", {"-DFFPA_MB_NV=1"}, "sm_90a");
  const nvrtc::Library lib(comp.cubin);
  const cudaKernel_t fn = lib.kernel("mb_stream_kernel");
  const int threads = 256, blocks = device().sm_count * 8;
  gpu::DeviceBuffer src(bytes), dst(bytes), sink(static_cast<size_t>(blocks) * threads * 4);
  FFPA_CUDA(cudaMemset(src.get(), 0, bytes));
  const float4* s = src.as<const float4>();
  float4* d = dst.as<float4>();
  long long n = static_cast<long long>(bytes / 16);
  float* k = sink.as<float>();
  void* args[] = {&s, &d, &n, &mode, &k};
  const double ms = best_ms(reps, [&] {
    FFPA_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(blocks), dim3(threads), args,
                               0, nullptr));
  });
  // Bytes moved: n float4 in every mode (copy: n / 2 read and n / 2 written).
  return static_cast<double>(n) * 16 / (ms * 1e-3) / 1e9;
}

struct Reduce {
  double gbs = 0;            // bytes added / time, every SM at once
  double bytes_per_cyc = 0;  // a block's 64 KB / its median cycles an iteration
};

constexpr int kReduceTile = 64 << 10;  // bytes a block adds an iteration (mb_reduce_kernel)

// mb_reduce_kernel, compiled once for the launches made with it, its 64 KB of shared memory
// allowed. A launch: one block an SM, `iters` tiles of 64 KB each into `tiles` tiles at dst, by
// `mode` (0 red.v4 coalesced, 1 bulk reduce of `chunk` bytes, 2 stores, 3 red.v4 a lane's own
// lines); each block's cycles an iteration into `cycles`.
class ReduceKernel {
 public:
  ReduceKernel()
      : lib_(nvrtc::compile("microbench_sm90.cuh", {"-DFFPA_MB_NV=1"}, "sm_90a").cubin),
        fn_(lib_.kernel("mb_reduce_kernel")) {
    FFPA_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn_),
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, kReduceTile));
  }
  void launch(float4* dst, int tiles, int iters, int mode, int chunk, long long* cycles) const {
    void* args[] = {&dst, &tiles, &iters, &mode, &chunk, &cycles};
    FFPA_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(fn_), dim3(device().sm_count),
                               dim3(256), args, kReduceTile, nullptr));
  }

 private:
  nvrtc::Library lib_;
  cudaKernel_t fn_;
};

// L2 reductions: the best of `reps` event-timed launches after a warm-up (ReduceKernel::launch).
Reduce run_reduce(const ReduceKernel& k, int mode, int chunk, int tiles, int iters, int reps) {
  const int blocks = device().sm_count;
  gpu::DeviceBuffer dst(static_cast<size_t>(tiles) * kReduceTile);
  gpu::DeviceBuffer cycles(blocks * sizeof(long long));
  FFPA_CUDA(cudaMemset(dst.get(), 0, dst.bytes()));
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) {
    gpu::Event start, stop;
    FFPA_CUDA(cudaEventRecord(start.get()));
    k.launch(dst.as<float4>(), tiles, iters, mode, chunk, cycles.as<long long>());
    FFPA_CUDA(cudaEventRecord(stop.get()));
    FFPA_CUDA(cudaEventSynchronize(stop.get()));
    if (r > 0) best = std::min(best, static_cast<double>(stop.since(start)));
  }
  std::vector<long long> h(blocks);
  FFPA_CUDA(cudaMemcpy(h.data(), cycles.get(), blocks * sizeof(long long), cudaMemcpyDeviceToHost));
  std::sort(h.begin(), h.end());
  const double bytes = static_cast<double>(blocks) * iters * kReduceTile;
  return {bytes / (best * 1e-3) / 1e9, kReduceTile / static_cast<double>(h[h.size() / 2])};
}

// mb_fence_kernel: the median over the blocks (one an SM) of a thread's mean cycles across
// `fence.proxy.async` (fence = 1) or across nothing (0), after `reds` 16-byte global reductions
// and a spin of `delay` cycles, over `iters` iterations.
long long run_fence(int reds, int delay, int fence, int iters) {
  const nvrtc::Compiled comp = nvrtc::compile("microbench_sm90.cuh", {"-DFFPA_MB_NV=1"}, "sm_90a");
  const nvrtc::Library lib(comp.cubin);
  const cudaKernel_t fn = lib.kernel("mb_fence_kernel");
  const int blocks = device().sm_count;
  gpu::DeviceBuffer buf(static_cast<size_t>(blocks) * 256 * 8 * 16);
  gpu::DeviceBuffer cycles(blocks * sizeof(long long));
  FFPA_CUDA(cudaMemset(buf.get(), 0, buf.bytes()));
  FFPA_CUDA(cudaMemset(cycles.get(), 0xff, cycles.bytes()));  // -1 where a block wrote nothing
  float4* b = buf.as<float4>();
  long long* c = cycles.as<long long>();
  void* args[] = {&b, &iters, &reds, &delay, &fence, &c};
  FFPA_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(blocks), dim3(256), args, 0,
                             nullptr));
  FFPA_CUDA(cudaDeviceSynchronize());
  std::vector<long long> h(blocks);
  FFPA_CUDA(cudaMemcpy(h.data(), c, blocks * sizeof(long long), cudaMemcpyDeviceToHost));
  std::sort(h.begin(), h.end());
  return h[h.size() / 2];
}

// dV = Pd^T dO of a split backward (docs/notes/ffpa_bwd_split.md): per head, Pd [Nq, Nkv] and dO
// [Nq, D] in bf16, dV [Nkv, D] in bf16 with fp32 accumulation; `heads` of them as one batched
// GEMM (dK = scale dS^T Q has the same shape). TFLOPS of the best of `reps` timed runs.
double split_gemm_tflops(int64_t n, int64_t d, int64_t heads, int reps) {
  GemmDesc g;
  g.M = n;
  g.N = d;
  g.K = n;
  g.batch = heads;
  g.trans_a = true;  // Pd is stored [K = Nq, M = Nkv]
  g.lda = n;
  g.ldb = d;
  g.ldc = d;
  g.stride_a = n * n;
  g.stride_b = n * d;
  g.stride_c = n * d;
  gpu::DeviceBuffer a(static_cast<size_t>(heads * n * n) * 2),
      b(static_cast<size_t>(heads * n * d) * 2), c(static_cast<size_t>(heads * n * d) * 2),
      ws(kGemmWorkspaceBytes);
  FFPA_CUDA(cudaMemset(a.get(), 0, a.bytes()));
  FFPA_CUDA(cudaMemset(b.get(), 0, b.bytes()));
  const GemmTuneArgs tune{a.get(), b.get(), c.get(), 1.f, 0.f};
  const Gemm gemm(g, ws.get(), ws.bytes(), &tune);
  const double ms = best_ms(reps, [&] { gemm.run(a.get(), b.get(), c.get(), 1.f, 0.f, nullptr); });
  return 2.0 * heads * n * n * d / (ms * 1e-3) / 1e12;
}

}  // namespace

TEST_CASE("microbench: the reduce kernel adds what it should", "[gpu]") {
  if (!hopper()) return;
  // Every mode but stores adds 1 to each float of a tile per visit: with tiles = blocks and
  // iters = 3, every tile is visited 3 times.
  const int blocks = device().sm_count;
  const ReduceKernel k;
  for (int mode : {0, 1, 3}) {
    const size_t bytes = static_cast<size_t>(blocks) * kReduceTile;
    gpu::DeviceBuffer dst(bytes), cycles(blocks * sizeof(long long));
    FFPA_CUDA(cudaMemset(dst.get(), 0, bytes));
    k.launch(dst.as<float4>(), blocks, 3, mode, 2048, cycles.as<long long>());
    FFPA_CUDA(cudaDeviceSynchronize());
    std::vector<float> h(bytes / 4);
    FFPA_CUDA(cudaMemcpy(h.data(), dst.get(), bytes, cudaMemcpyDeviceToHost));
    const auto wrong = std::count_if(h.begin(), h.end(), [](float x) { return x != 3.f; });
    INFO("mode " << mode);
    CHECK(wrong == 0);
  }
}

TEST_CASE("microbench: L2 reductions GB/s by way of adding", "[.][bench]") {
  if (!hopper()) return;
  std::printf("%-22s %-8s %-10s %-10s\n", "mode", "MiB", "GB/s", "B/cyc/SM");
  const struct {
    const char* name;
    int mode, chunk;
  } ways[] = {{"red.v4 coalesced", 0, 0},
              {"bulk reduce 512 B", 1, 512},
              {"bulk reduce 2 KB", 1, 2048},
              {"bulk reduce 8 KB", 1, 8192},
              {"stores", 2, 0},
              {"red.v4 own lines", 3, 0}};
  const ReduceKernel k;
  for (int tiles : {256, 2048})  // 16 MiB: L2-resident as dQ's rows; 128 MiB: past the L2
    for (const auto& w : ways) {
      const Reduce r = run_reduce(k, w.mode, w.chunk, tiles, 200, 5);
      std::printf("%-22s %-8d %-10.0f %-10.1f\n", w.name, tiles / 16, r.gbs, r.bytes_per_cyc);
    }
}

TEST_CASE("microbench: the stream kernel reads, writes and copies", "[gpu]") {
  if (!hopper()) return;
  for (int mode : {0, 1, 2}) CHECK(run_stream(mode, size_t{64} << 20, 2) > 0);
}

TEST_CASE("microbench: HBM streaming GB/s, read / write / copy", "[.][bench]") {
  if (!hopper()) return;
  std::printf("%-8s %-10s %-10s %-10s\n", "MiB", "read", "write", "copy");
  for (size_t mib : {256, 1024, 4096})
    std::printf("%-8zu %-10.0f %-10.0f %-10.0f\n", mib, run_stream(0, mib << 20, 10),
                run_stream(1, mib << 20, 10), run_stream(2, mib << 20, 10));
}

TEST_CASE("microbench: the cluster exchange runs and takes time", "[gpu]") {
  if (!hopper()) return;
  for (int nv : {1, 8}) {
    const Exchange e = run_exchange(nv, 0, 64);
    CHECK(e.min_cycles > 0);
    CHECK(e.max_cycles < 1000000);  // a lost phase would hang, a wrong parity run away
  }
  const Exchange e = run_exchange(8, 16, 64, 1);
  CHECK(e.min_cycles > 0);
  CHECK(e.max_cycles < 1000000);
}

TEST_CASE("microbench: cluster exchange cycles by payload and overlapping work", "[.][bench]") {
  if (!hopper()) return;
  std::printf("%-8s %-8s %-12s %-14s %-10s %-10s\n", "KB/blk", "work", "cyc/exch", "B/cyc/SM",
              "min", "max");
  for (int nv : {1, 2, 4, 8, 16})
    for (int work : {0, 64, 256, 1024}) {
      const Exchange e = run_exchange(nv, work, 2000);
      const double bytes = nv * 256.0 * 16;
      std::printf("%-8.0f %-8d %-12.0f %-14.1f %-10lld %-10lld\n", bytes / 1024, work,
                  e.median_cycles, bytes / e.median_cycles, e.min_cycles, e.max_cycles);
    }
  // Global reductions as the work (16 bytes each): with no exchange (nv = 0 is not a payload, so
  // the smallest, 4 KB) and with ffpa-bwd-sm90c's 32 KB.
  std::printf("%-8s %-8s %-12s\n", "KB/blk", "reds", "cyc/exch");
  for (int nv : {1, 8})
    for (int work : {0, 8, 16, 32, 64}) {
      const Exchange e = run_exchange(nv, work, 2000, 1);
      std::printf("%-8.0f %-8d %-12.0f\n", nv * 4.0, work, e.median_cycles);
    }
}

TEST_CASE("microbench: the fence kernel runs and times its fence", "[gpu]") {
  if (!hopper()) return;
  // Every block (the median of them) wrote its cycles; a fence takes some.
  CHECK(run_fence(8, 0, 1, 16) > 0);
  CHECK(run_fence(0, 0, 0, 16) >= 0);
}

TEST_CASE("microbench: proxy fence cycles after global reductions", "[.][bench]") {
  if (!hopper()) return;
  std::printf("%-6s %-8s %-12s %-12s\n", "reds", "delay", "fence cyc", "none cyc");
  for (int reds : {0, 1, 4, 8, 16})
    for (int delay : {0, 500, 2000})
      std::printf("%-6d %-8d %-12lld %-12lld\n", reds, delay, run_fence(reds, delay, 1, 200),
                  run_fence(reds, delay, 0, 200));
}

TEST_CASE("microbench: cuBLASLt GEMMs of a split backward (dV = Pd^T dO), TFLOPS", "[.][bench]") {
  if (!hopper()) return;
  std::printf("%-6s %-6s %-6s %-8s\n", "N", "D", "heads", "TFLOPS");
  for (int64_t d : {320, 512, 1024})
    for (int64_t heads : {1, 8})
      std::printf("%-6d %-6d %-6d %-8.0f\n", 8192, static_cast<int>(d), static_cast<int>(heads),
                  split_gemm_tflops(8192, d, heads, 5));
}
