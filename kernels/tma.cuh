// Hopper (sm_90a) asynchronous-copy and synchronization pieces: mbarriers, TMA tensor loads (with
// cluster multicast), cluster barriers, distributed shared memory and warpgroup register
// reallocation.
// Device code only; the tensor maps are encoded on the host (src/gpu/tma.*) and arrive as
// __grid_constant__ kernel parameters of type FfpaTmaDesc (params.h).
#pragma once

#include "ffpa_common.cuh"

namespace ffpa_dev {

// --- mbarriers (shared::cta addresses) ---
__device__ __forceinline__ void mbar_init(u32 bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes initialized barriers visible to the async proxy and to the other CTAs of the cluster.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// The producer's arrival with the number of bytes the phase's copies will deliver.
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrival on the barrier at the same offset in CTA `rank` of the cluster, as a consumer frees a
// ring slot: what it read there, it read by wgmma (retired before the call), and what will
// overwrite it is a TMA write, so the arrival orders no generic-proxy access and needs no
// cluster-scope release. That release (`.release.cluster`) compiles to MEMBAR.ALL.GPU before
// every arrival, a wait for every memory access of the thread in flight (ffpa-fwd-sm90ws with
// cluster = 2: 66 a kernel, three times slower); the default `.release.cta` is CUTLASS's
// ClusterBarrier::arrive and compiles to the arrival alone.
__device__ __forceinline__ void mbar_arrive_cluster(u32 bar, u32 rank) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
}
// Waits until the phase of parity `parity` has completed (a fresh barrier is in phase 0, so
// waiting for parity 1 returns at once: the producer's first pass over empty slots).
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  u32 done;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// --- TMA ---
// A 4D box of the tensor map at coordinates (c0 innermost) into shared memory at dst, completing
// bytes on the barrier bar of this CTA.
__device__ __forceinline__ void tma_load_4d(u32 dst, const FfpaTmaDesc& map, int c0, int c1, int c2,
                                            int c3, u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
// The same box written to dst and signalled on bar in every CTA of `mask` in the cluster.
__device__ __forceinline__ void tma_load_4d_multicast(u32 dst, const FfpaTmaDesc& map, int c0,
                                                      int c1, int c2, int c3, u32 bar,
                                                      unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar),
      "h"(mask)
      : "memory");
}
// The 4D box at coordinates (c0 innermost) written from shared memory at src (a bulk async-group
// of this thread; rows and columns past the tensor's extent are not written). The writers of src
// fence it for the async proxy first (fence_proxy_async) and the issuing thread commits the group.
__device__ __forceinline__ void tma_store_4d(const FfpaTmaDesc& map, u32 src, int c0, int c1,
                                             int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(
          reinterpret_cast<unsigned long long>(&map)),
      "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(src)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Until at most N of this thread's bulk groups still read their shared memory (it may be written
// again); their global writes may still be in flight.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Until every bulk group of this thread is complete, its writes done.
__device__ __forceinline__ void bulk_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
__device__ __forceinline__ void tma_prefetch_desc(const FfpaTmaDesc& map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(&map))
               : "memory");
}

// --- clusters ---
__device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of every CTA of the cluster: arrive with release, wait with acquire.
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}
// cluster_sync's two halves, for work that overlaps the wait for the other CTAs.
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// mbar_wait at cluster scope: it pairs with a release by another CTA of the cluster (st.async's
// complete_tx), so that this CTA's later accesses are ordered after that CTA's earlier ones. The
// poll is relaxed and the acquire a fence restricted to shared::cluster: an acquire of
// try_wait.acquire.cluster also covers global memory, for which ptxas invalidates the L1 after
// every wait (CCTL.IVALL, waiting on the thread's loads in flight). No caller reads global data
// the other CTA wrote; shared::cluster is all the wait must order.
__device__ __forceinline__ void mbar_wait_cluster(u32 bar, u32 parity) {
  u32 done;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.relaxed.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
  asm volatile("fence.acquire.sync_restrict::shared::cluster.cluster;\n" ::: "memory");
}

// Distributed shared memory: the address of `addr` (shared::cta) in CTA `rank` of the cluster,
// and 16-byte stores there.
__device__ __forceinline__ u32 map_rank(u32 addr, u32 rank) {
  u32 r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ void st_cluster4(u32 addr, float a, float b, float c, float d) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(a), "f"(b),
               "f"(c), "f"(d)
               : "memory");
}
// Asynchronous stores into another CTA's shared memory that complete their bytes on the mbarrier
// bar there (addr and bar: shared::cluster addresses, from map_rank): the receiver learns that
// they landed from its barrier alone, with no fence or cluster barrier on either side.
__device__ __forceinline__ void st_async4(u32 addr, float a, float b, float c, float d, u32 bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, "
      "[%5];\n" ::"r"(addr),
      "f"(a), "f"(b), "f"(c), "f"(d), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void st_async_u32(u32 addr, u32 v, u32 bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(addr),
      "r"(v), "r"(bar)
      : "memory");
}

// --- register reallocation ---
template <int N>
__device__ __forceinline__ void regs_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void regs_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

}  // namespace ffpa_dev
