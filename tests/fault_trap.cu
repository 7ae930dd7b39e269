// The fault drill's faulting kernel: a device-side trap, which leaves the CUDA context unusable as
// a real kernel fault would.
#include <cuda_runtime.h>

namespace {

__global__ void trap_kernel() {
  __trap();
}

}  // namespace

namespace ffpa::test {

void launch_trap(cudaStream_t s) {
  trap_kernel<<<1, 1, 0, s>>>();
}

}  // namespace ffpa::test
