// GPU test binaries: listing works anywhere (CTest discovery at build time); running without a GPU
// exits 77, which CTest reports as skipped, never as passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

#include "gpu/cuda.hpp"

int main(int argc, char* argv[]) {
  bool listing = false;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--list", 6) == 0) listing = true;
  if (!listing && !ffpa::gpu::available()) {
    std::puts("skipped: no GPU");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
