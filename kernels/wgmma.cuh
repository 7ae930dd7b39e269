// Warpgroup MMA (sm_90a) pieces shared by the Hopper kernels (ffpa_fwd_sm90.cuh,
// ffpa_bwd_sm90.cuh): shared-memory matrix descriptors for the 128-byte swizzle that tile_off
// produces on 1024-byte aligned panels, the wgmma instructions the kernels issue, and the fences
// that keep the compiler's hands off registers the asynchronous pipeline owns. Device code only.
// FFPA_BF16 picks the input type.
#pragma once

#include "ffpa_common.cuh"

namespace ffpa_dev {

typedef unsigned long long u64;

// Shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"): start address, leading
// and stride byte offsets (all >> 4), 128-byte swizzle (mode 1 in bits 62..63), base offset 0
// (every swizzle atom starts on a 1024-byte boundary).
__device__ __forceinline__ u64 make_desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3ffffu) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) |
         (1ull << 62);
}
// K-major operand: 8-row groups 1024 bytes apart (SBO); LBO is unused with a 128-byte swizzle
// when the k16 step lies inside one 128-byte row, 16 by convention.
__device__ __forceinline__ u64 desc_k(u32 addr) {
  return make_desc(addr, 16, 1024);
}
// MN-major operand of M or N = 64: the 8-row groups of a k16 step are 1024 bytes apart (SBO).
// The M/N extent is one swizzle atom, so LBO (the stride between 64-column atoms) is never used;
// 1024 as well, so that a reading of the ISA with the roles of LBO and SBO swapped gives the
// same addresses.
__device__ __forceinline__ u64 desc_mn(u32 addr) {
  return make_desc(addr, 1024, 1024);
}
// MN-major operand wider than one atom (M or N up to 128, a multiple of 16): the 64-column
// atoms are `atom` bytes apart (LBO: CUTLASS's canonical MN-major layout with the 128-byte
// swizzle, ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))). The operand starts on an atom's first column:
// a start address inside a 128-byte row would move the whole operand's rows, not its columns.
__device__ __forceinline__ u64 desc_mn_wide(u32 addr, u32 atom) {
  return make_desc(addr, atom, 1024);
}

#if FFPA_BF16
#define FFPA_WG_AB "bf16"
#else
#define FFPA_WG_AB "f16"
#endif
// m64nN f32 accumulators of N / 8 n8 groups, N = 16 .. 160: the asm register lists.
#define FFPA_WG_ACC_2 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define FFPA_WG_ACC_4 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define FFPA_WG_ACC_6                                                                 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
  "%18, %19, %20, %21, %22, %23}"
#define FFPA_WG_ACC_8                                                                 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
  "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FFPA_WG_ACC_10                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
  "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "  \
  "%34, %35, %36, %37, %38, %39}"
#define FFPA_WG_ACC_12                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
  "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "  \
  "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}"
#define FFPA_WG_ACC_14                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
  "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "  \
  "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "  \
  "%50, %51, %52, %53, %54, %55}"
#define FFPA_WG_ACC_16                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
  "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "  \
  "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "  \
  "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define FFPA_WG_ACC_18                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
  "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "  \
  "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "  \
  "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, "  \
  "%66, %67, %68, %69, %70, %71}"
#define FFPA_WG_ACC_20                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
  "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "  \
  "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "  \
  "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, "  \
  "%66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}"

#define FFPA_WG_REGS4(c, d, i) c(d[i][0]), c(d[i][1]), c(d[i][2]), c(d[i][3])
#define FFPA_WG_REGS_2(c, d) FFPA_WG_REGS4(c, d, 0), FFPA_WG_REGS4(c, d, 1)
#define FFPA_WG_REGS_4(c, d) FFPA_WG_REGS_2(c, d), FFPA_WG_REGS4(c, d, 2), FFPA_WG_REGS4(c, d, 3)
#define FFPA_WG_REGS_6(c, d) FFPA_WG_REGS_4(c, d), FFPA_WG_REGS4(c, d, 4), FFPA_WG_REGS4(c, d, 5)
#define FFPA_WG_REGS_8(c, d) FFPA_WG_REGS_6(c, d), FFPA_WG_REGS4(c, d, 6), FFPA_WG_REGS4(c, d, 7)
#define FFPA_WG_REGS_10(c, d) FFPA_WG_REGS_8(c, d), FFPA_WG_REGS4(c, d, 8), FFPA_WG_REGS4(c, d, 9)
#define FFPA_WG_REGS_12(c, d) \
  FFPA_WG_REGS_10(c, d), FFPA_WG_REGS4(c, d, 10), FFPA_WG_REGS4(c, d, 11)
#define FFPA_WG_REGS_14(c, d) \
  FFPA_WG_REGS_12(c, d), FFPA_WG_REGS4(c, d, 12), FFPA_WG_REGS4(c, d, 13)
#define FFPA_WG_REGS_16(c, d) \
  FFPA_WG_REGS_14(c, d), FFPA_WG_REGS4(c, d, 14), FFPA_WG_REGS4(c, d, 15)
#define FFPA_WG_REGS_18(c, d) \
  FFPA_WG_REGS_16(c, d), FFPA_WG_REGS4(c, d, 16), FFPA_WG_REGS4(c, d, 17)
#define FFPA_WG_REGS_20(c, d) \
  FFPA_WG_REGS_18(c, d), FFPA_WG_REGS4(c, d, 18), FFPA_WG_REGS4(c, d, 19)

// d[n8][e]: register 4 * n8 + e of the m64nN f32 accumulator holds row 16 * warp + lane / 4 +
// 8 * (e >> 1), column 8 * n8 + 2 * (lane % 4) + (e & 1).
// WgmmaSS<N8>: m64n(8 N8)k16, A and B from shared memory, on the first N8 groups of d. acc: D +=
// A B; first: D = A B, ignoring D (scale-d false): the outputs are write-only, so the compiler
// does not keep the previous values alive into (and redefine them inside) the wgmma pipeline.
// TA / TB = 1: that operand is MN-major (imm-trans), else K-major.
template <int N8>
struct WgmmaSS;
// The asm of one m64nNk16 SS wgmma: OUT "+f" accumulates (scale-d 1), "=f" overwrites (0).
#define FFPA_WG_SS_ASM(N, ACC, REGS, AB_OPS, SCALE_OP, TRANS_OPS, OUT, SCALE_D)                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE_OP                                       \
               ", 0;\n"                                                                           \
               "wgmma.mma_async.sync.aligned.m64n" N "k16.f32." FFPA_WG_AB "." FFPA_WG_AB " " ACC \
               ", " AB_OPS ", p, 1, 1, " TRANS_OPS ";\n}\n"                                       \
               : REGS(OUT, d)                                                                     \
               : "l"(da), "l"(db), "n"(SCALE_D), "n"(TA), "n"(TB))
#define FFPA_WG_SHAPE(N8, N, ACC, REGS, AB_OPS, SCALE_OP, TRANS_OPS)                 \
  template <>                                                                        \
  struct WgmmaSS<N8> {                                                               \
    template <int TA, int TB, int M>                                                 \
    static __device__ __forceinline__ void acc(float (&d)[M][4], u64 da, u64 db) {   \
      static_assert(M >= N8, "the accumulator holds the N8 groups");                 \
      FFPA_WG_SS_ASM(N, ACC, REGS, AB_OPS, SCALE_OP, TRANS_OPS, "+f", 1);            \
    }                                                                                \
    template <int TA, int TB, int M>                                                 \
    static __device__ __forceinline__ void first(float (&d)[M][4], u64 da, u64 db) { \
      static_assert(M >= N8, "the accumulator holds the N8 groups");                 \
      FFPA_WG_SS_ASM(N, ACC, REGS, AB_OPS, SCALE_OP, TRANS_OPS, "=f", 0);            \
    }                                                                                \
  };
FFPA_WG_SHAPE(2, "16", FFPA_WG_ACC_2, FFPA_WG_REGS_2, "%8, %9", "%10", "%11, %12")
FFPA_WG_SHAPE(4, "32", FFPA_WG_ACC_4, FFPA_WG_REGS_4, "%16, %17", "%18", "%19, %20")
FFPA_WG_SHAPE(6, "48", FFPA_WG_ACC_6, FFPA_WG_REGS_6, "%24, %25", "%26", "%27, %28")
FFPA_WG_SHAPE(8, "64", FFPA_WG_ACC_8, FFPA_WG_REGS_8, "%32, %33", "%34", "%35, %36")
FFPA_WG_SHAPE(10, "80", FFPA_WG_ACC_10, FFPA_WG_REGS_10, "%40, %41", "%42", "%43, %44")
FFPA_WG_SHAPE(12, "96", FFPA_WG_ACC_12, FFPA_WG_REGS_12, "%48, %49", "%50", "%51, %52")
FFPA_WG_SHAPE(14, "112", FFPA_WG_ACC_14, FFPA_WG_REGS_14, "%56, %57", "%58", "%59, %60")
FFPA_WG_SHAPE(16, "128", FFPA_WG_ACC_16, FFPA_WG_REGS_16, "%64, %65", "%66", "%67, %68")
FFPA_WG_SHAPE(18, "144", FFPA_WG_ACC_18, FFPA_WG_REGS_18, "%72, %73", "%74", "%75, %76")
FFPA_WG_SHAPE(20, "160", FFPA_WG_ACC_20, FFPA_WG_REGS_20, "%80, %81", "%82", "%83, %84")
#undef FFPA_WG_SHAPE
#undef FFPA_WG_SS_ASM

// D += A B over the whole accumulator (d[4][4]: m64n32, d[8][4]: m64n64, d[10][4]: m64n80, ...).
template <int TA, int TB, int N8>
__device__ __forceinline__ void wgmma(float (&d)[N8][4], u64 da, u64 db) {
  WgmmaSS<N8>::template acc<TA, TB>(d, da, db);
}
template <int TA, int TB, int N8>
__device__ __forceinline__ void wgmma_first(float (&d)[N8][4], u64 da, u64 db) {
  WgmmaSS<N8>::template first<TA, TB>(d, da, db);
}
// The same on the first W8 n8 groups of d only (a narrower N; the other groups are untouched).
template <int W8, int TA, int TB, int M>
__device__ __forceinline__ void wgmma_n(float (&d)[M][4], u64 da, u64 db) {
  WgmmaSS<W8>::template acc<TA, TB>(d, da, db);
}
template <int W8, int TA, int TB, int M>
__device__ __forceinline__ void wgmma_first_n(float (&d)[M][4], u64 da, u64 db) {
  WgmmaSS<W8>::template first<TA, TB>(d, da, db);
}
// m64n64: D += A B, A from registers (a[0..3]: rows lane/4 and +8, k 2*(lane%4) and +8), B
// MN-major from shared memory (imm-trans-b = 1).
__device__ __forceinline__ void wgmma_rs(float (&d)[8][4], const u32 (&a)[4], u64 db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." FFPA_WG_AB "." FFPA_WG_AB " " FFPA_WG_ACC_8
      ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : FFPA_WG_REGS_8("+f", d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(1));
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Generic-proxy writes to shared memory (st.shared, stmatrix, cp.async) made visible to the async
// proxy that wgmma and TMA stores read through.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Four 8 x 8 b16 matrices from mma fragments (sm_90; r[i]: matrix i's pair at row lane / 4,
// columns 2 (lane % 4) and + 1); lane l gives the address of row l % 8 of matrix l / 8 (16
// bytes).
__device__ __forceinline__ void stmatrix_x4(u32 addr, const u32 (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
// Four 8 x 8 b16 matrices stored transposed (sm_90): r[i] is matrix i's pair in the mma fragment
// order (row lane / 4, columns 2 (lane % 4) and + 1); lane l gives the address of memory row l %
// 8 of matrix l / 8, which receives the matrix's column l % 8 (16 bytes).
__device__ __forceinline__ void stmatrix_x4_trans(u32 addr, const u32 (&r)[4]) {
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
      : "memory");
}
// Pins registers between asm statements: after a wgmma.wait_group, reads cannot move above it;
// before a wgmma.fence, plain writes (an accumulator rescale, A fragments) cannot sink below it,
// where they would modify registers of the wgmma pipeline without a fence.
template <int N>
__device__ __forceinline__ void fence_acc(float (&d)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(u32 (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[i][e])::"memory");
}
// x, opaque to the optimizer: addresses derived from it are recomputed where used instead of
// being hoisted out of a loop and held in registers (descriptors cost 2 registers each).
__device__ __forceinline__ u32 opaque(u32 x) {
  asm volatile("mov.b32 %0, %0;\n" : "+r"(x));
  return x;
}

}  // namespace ffpa_dev
