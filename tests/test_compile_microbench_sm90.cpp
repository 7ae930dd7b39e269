// The Hopper microbenchmarks (kernels/microbench_sm90.cuh) compile for sm_90a through NVRTC, as
// tests/gpu_microbench_sm90.cpp compiles them on the GPU machine, without spills: no GPU needed.
#include <catch2/catch.hpp>

#include <string>

#include "gpu/nvrtc.hpp"

using namespace ffpa;

TEST_CASE(
    "microbench: the exchange, stream, reduce and fence kernels compile for sm_90a without spills",
    "[compile]") {
  for (int nv : {1, 2, 4, 8, 16}) {
    const nvrtc::Compiled c =
        nvrtc::compile("microbench_sm90.cuh", {"-DFFPA_MB_NV=" + std::to_string(nv)}, "sm_90a");
    REQUIRE(c.info.count("mb_exchange_kernel") == 1);
    const nvrtc::KernelInfo& k = c.info.at("mb_exchange_kernel");
    CHECK(k.spill_stores == 0);
    CHECK(k.stack_bytes == 0);
    REQUIRE(c.info.count("mb_stream_kernel") == 1);
    CHECK(c.info.at("mb_stream_kernel").spill_stores == 0);
    REQUIRE(c.info.count("mb_reduce_kernel") == 1);
    CHECK(c.info.at("mb_reduce_kernel").spill_stores == 0);
    REQUIRE(c.info.count("mb_fence_kernel") == 1);
    CHECK(c.info.at("mb_fence_kernel").spill_stores == 0);
  }
}
