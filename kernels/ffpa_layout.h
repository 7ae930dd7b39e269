// What the layout headers (ffpa_*_layout.h) share: plain constexpr C++ included by a kernel
// (NVRTC) and by its variant on the host, so a launch's dynamic shared memory and the kernel's
// regions come from one formula. NVRTC compiles only device functions: the layout functions are
// both host and device code.
#pragma once

#if defined(__CUDACC__)
#define FFPA_LAYOUT_FN __host__ __device__ constexpr
#else
#define FFPA_LAYOUT_FN constexpr
#endif
