// Philox4x32-10 (Random123) and the dropout mapping of ANCHORS.md, shared by nvcc kernels, NVRTC
// kernels and host C++ (the CPU reference): no standard headers, only built-in types.
//
// Element e of [B, Hq, Nq, Nkv] with stream offset o uses the 128-bit counter (o + e) / 4 (four
// little-endian 32-bit words), lane (o + e) % 4, key = {seed lo, seed hi}; u = x * 2^-32 + 2^-33 in
// float32 (curand's conversion); the element is kept iff u > p, kept values scale by 1 / (1 - p).
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FFPA_HD __host__ __device__ __forceinline__
#else
#define FFPA_HD inline
#endif

struct FfpaPhilox4 {
  unsigned int x[4];
};

FFPA_HD unsigned int ffpa_mulhilo(unsigned int a, unsigned int b, unsigned int* hi) {
#if defined(__CUDA_ARCH__)
  *hi = __umulhi(a, b);
  return a * b;
#else
  const unsigned long long p = (unsigned long long)a * b;
  *hi = (unsigned int)(p >> 32);
  return (unsigned int)p;
#endif
}

FFPA_HD FfpaPhilox4 ffpa_philox4x32_10(FfpaPhilox4 c, unsigned int k0, unsigned int k1) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int r = 0; r < 10; ++r) {
    unsigned int hi0, hi1;
    const unsigned int lo0 = ffpa_mulhilo(0xD2511F53u, c.x[0], &hi0);
    const unsigned int lo1 = ffpa_mulhilo(0xCD9E8D57u, c.x[2], &hi1);
    const FfpaPhilox4 n = {{hi1 ^ c.x[1] ^ k0, lo1, hi0 ^ c.x[3] ^ k1, lo0}};
    c = n;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// Register-friendly r.x[lane] (a dynamic index would put r in local memory on the device).
FFPA_HD unsigned int ffpa_lane(const FfpaPhilox4& r, unsigned int lane) {
  return lane == 0 ? r.x[0] : lane == 1 ? r.x[1] : lane == 2 ? r.x[2] : r.x[3];
}

// The 4 random words of counter index `ctr` (the upper 64 counter bits are zero).
FFPA_HD FfpaPhilox4 ffpa_philox_block(unsigned long long seed, unsigned long long ctr) {
  const FfpaPhilox4 c = {{(unsigned int)ctr, (unsigned int)(ctr >> 32), 0u, 0u}};
  return ffpa_philox4x32_10(c, (unsigned int)seed, (unsigned int)(seed >> 32));
}

// curand's uniform in (0, 1]. One explicit fused multiply-add so host and device round alike
// (nvcc contracts curand's `x * c + c / 2` into an FMA as well).
FFPA_HD float ffpa_uniform(unsigned int x) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn((float)x, 2.3283064e-10f, 2.3283064e-10f / 2.0f);
#else
  return __builtin_fmaf((float)x, 2.3283064e-10f, 2.3283064e-10f / 2.0f);
#endif
}

// Uniform of element `e` of the dropout stream (seed, offset).
FFPA_HD float ffpa_dropout_uniform(unsigned long long seed, unsigned long long offset,
                                   unsigned long long e) {
  const unsigned long long g = offset + e;
  return ffpa_uniform(ffpa_lane(ffpa_philox_block(seed, g >> 2), (unsigned int)(g & 3)));
}

FFPA_HD bool ffpa_dropout_keep(unsigned long long seed, unsigned long long offset,
                               unsigned long long e, float p) {
  return ffpa_dropout_uniform(seed, offset, e) > p;
}

// The smallest Philox word an element with it keeps: ffpa_uniform(x) > p iff x >= the result, as
// ffpa_uniform is non-decreasing in x (a rounding conversion, then a fused multiply-add with
// positive factors). The kernels compare words with it, saving the conversion and the FMA of
// every element; the CPU reference keeps the definition. p < 1 (x = 2^32 - 1 gives u = 1).
FFPA_HD unsigned int ffpa_keep_min(float p) {
  unsigned long long lo = 0, hi = 0xFFFFFFFFull;
  while (lo < hi) {
    const unsigned long long mid = (lo + hi) / 2;
    if (ffpa_uniform((unsigned int)mid) > p)
      hi = mid;
    else
      lo = mid + 1;
  }
  return (unsigned int)lo;
}

// Walks consecutive elements of the stream, computing each Philox block once.
struct FfpaDropoutStream {
  unsigned long long seed;
  unsigned long long ctr;
  FfpaPhilox4 r;
  FFPA_HD void init(unsigned long long s) {
    seed = s;
    ctr = ~0ull;
  }
  // The random word of global stream position g (= offset + element).
  FFPA_HD unsigned int word(unsigned long long g) {
    if ((g >> 2) != ctr) {
      ctr = g >> 2;
      r = ffpa_philox_block(seed, ctr);
    }
    return ffpa_lane(r, (unsigned int)(g & 3));
  }
  // Uniform of global stream position g.
  FFPA_HD float uniform(unsigned long long g) { return ffpa_uniform(word(g)); }
};
