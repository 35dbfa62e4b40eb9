// flashindexer sm_90a: thin inline-PTX helpers (mbarriers, proxy fences, WGMMA
// synchronisation and shared-memory matrix descriptors, register reallocation).
#pragma once

#include <cstdint>

namespace flashindexer::sm90::ptx {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarrier (CTA scope) ----
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
// Blocks until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// A 64-bit shared word read and written whole by threads that do not synchronize on it
// (the fused selector's thresholds: a torn read could exceed the value ever written).
__device__ __forceinline__ uint64_t ld_relaxed_shared(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.cta.shared.u64 %0, [%1];" : "=l"(v) : "r"(smem_addr(p)));
  return v;
}
__device__ __forceinline__ void st_relaxed_shared(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.cta.shared.u64 [%0], %1;" ::"r"(smem_addr(p)), "l"(v) : "memory");
}

// A 32-bit shared counter handed between threads that do not meet at a barrier: the
// release store orders the writer's earlier accesses before it, the acquire load the
// reader's later ones after it.
__device__ __forceinline__ uint32_t ld_acquire_shared(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.cta.shared.u32 %0, [%1];" : "=r"(v) : "r"(smem_addr(p)) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_shared(uint32_t* p, uint32_t v) {
  asm volatile("st.release.cta.shared.u32 [%0], %1;" ::"r"(smem_addr(p)), "r"(v) : "memory");
}

// Ends a barrier's life, so that its words may be used for other data.
__device__ __forceinline__ void mbar_inval(uint64_t* bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Makes this thread's mbarrier.init visible to the async proxy (bulk copies that
// complete transactions on the barrier) and to the cluster.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Arrives on `bar` (count 1) and raises the bytes its current phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

// ---- bulk copy (TMA engine, no tensor map): global -> this CTA's shared memory ----
// `bytes` a multiple of 16, both addresses 16-byte aligned; completes `bytes` transactions
// on `bar` when the data has landed.
__device__ __forceinline__ void bulk_copy_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// Orders this thread's generic-proxy shared-memory writes before later async-proxy
// reads (WGMMA operands written with st.shared).
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Two e4m3 values (the low 16 bits of x, the lower byte first) as f16x2 (exact).
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t x) {
  uint32_t r;
  asm("{\n.reg .b16 t;\ncvt.u16.u32 t, %1;\ncvt.rn.f16x2.e4m3x2 %0, t;\n}" : "=r"(r) : "r"(x));
  return r;
}

// Named barrier over `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_barrier(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Signals a named barrier without waiting (the other side calls named_barrier).
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Named barrier that also ORs a predicate over its `threads` threads (bar.red.or).
__device__ __forceinline__ bool named_barrier_or(uint32_t id, uint32_t threads, bool pred) {
  uint32_t r;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}"
      : "=r"(r)
      : "r"(uint32_t(pred)), "r"(id), "r"(threads)
      : "memory");
  return r != 0;
}

// Named barrier that also counts the threads whose predicate is true (bar.red.popc).
__device__ __forceinline__ uint32_t named_barrier_popc(uint32_t id, uint32_t threads, bool pred) {
  uint32_t r;
  asm volatile("{\n .reg .pred p;\n setp.ne.u32 p, %1, 0;\n bar.red.popc.u32 %0, %2, %3, p;\n}"
               : "=r"(r)
               : "r"(uint32_t(pred)), "r"(id), "r"(threads)
               : "memory");
  return r;
}

// ---- programmatic dependent launch (a chain of kernels on one stream) ----
// The next kernel of the stream, if launched with the programmatic-serialization attribute,
// may start once every CTA of this one has called this (or exited).
__device__ __forceinline__ void launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
// Blocks until the stream's previous kernel has completed and its writes are visible; returns
// at once in a kernel that was not launched as a programmatic dependent.
__device__ __forceinline__ void wait_for_previous_kernel() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// ---- register reallocation between warpgroups ----
// Every warp of a warpgroup executes the same one; between two of them the warpgroup's warps
// must synchronize explicitly (PTX ISA), e.g. on a named barrier of its 128 threads
// (fused_staged.cu: without it the decode pairs hung, docs/experiments.md 2026-12-02). A CTA
// barrier before the first counts.
template <int kRegs>
__device__ __forceinline__ void regs_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void regs_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}

// ---- WGMMA ----
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
// Keeps the compiler from moving accumulator accesses across the async MMA window.
template <int kN>
__device__ __forceinline__ void fence_registers(float (&r)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int kN>
__device__ __forceinline__ void fence_registers(int32_t (&r)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// x as a value the compiler cannot recompute: it stays in a register across a loop instead
// of being rematerialized from its inputs at each use (ptxas does that for cheap arithmetic,
// e.g. thread-index math and 64-bit products, inside loops that hold many accumulators). The
// value passes through a shuffle from the lane itself, which ptxas does not duplicate. All
// lanes of the warp must call it together.
__device__ __forceinline__ int32_t held(int32_t x) {
  int32_t y;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(y) : "r"(x), "r"(int(threadIdx.x & 31)));
  return y;
}
__device__ __forceinline__ int64_t held(int64_t x) {
  return int64_t(uint64_t(uint32_t(held(int32_t(x)))) | uint64_t(uint32_t(held(int32_t(x >> 32)))) << 32);
}

// x, which the caller knows to be the same on every lane of the (converged) warp, as a value
// the compiler knows to be so: lane 0's, broadcast. Arithmetic on it can then use the uniform
// datapath (e.g. WGMMA descriptors in uniform registers).
__device__ __forceinline__ int warp_uniform(int x) { return __shfl_sync(0xFFFFFFFFu, x, 0); }
// Lane `lane`'s pointer, to every lane of the warp (two shuffles).
template <class T>
__device__ __forceinline__ T* shfl_pointer(T* p, int lane) {
  return reinterpret_cast<T*>(__shfl_sync(0xFFFFFFFFu, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)), lane));
}

// Descriptor of a K-major operand tile in shared memory with the 128-byte swizzle:
// rows of exactly 128 bytes (one fp8 head vector, D = 128), 8-row atoms of 1024 bytes
// stacked contiguously, base 1024-byte aligned. Advancing K by 32 fp8 elements adds
// 32 bytes to the start address (within the swizzle atom).
__device__ __forceinline__ uint64_t smem_desc_sw128(const void* tile) {
  const uint64_t addr = smem_addr(tile);
  uint64_t d = (addr & 0x3FFFF) >> 4;  // start address, 16-byte units
  d |= uint64_t(1) << 16;              // leading byte offset (unused for swizzled K-major)
  d |= uint64_t(1024 >> 4) << 32;      // stride byte offset: next 8-row atom
  d |= uint64_t(1) << 62;              // 128-byte swizzle
  return d;
}
// Byte offset of 16-byte chunk `c` (0..7) of row `r` in a 128-byte-swizzled tile.
__device__ __forceinline__ uint32_t sw128_offset(uint32_t r, uint32_t c) { return r * 128 + ((c ^ (r & 7)) << 4); }

// ---- arithmetic ----
// max / min that return NaN when either input is NaN (ReLU that keeps NaN, CONTRACT §3).
__device__ __forceinline__ float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float min_nan(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// ---- cp.async (global -> shared, generic proxy, tracked per thread) ----
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}
// Arrives on `bar` once all of this thread's earlier cp.async copies have landed
// (without raising the barrier's expected count).
__device__ __forceinline__ void cp_async_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Four 8 x 8 b16 matrices from shared memory: lanes 8i..8i+7 give the row addresses (16 bytes
// each) of matrix i; lane l receives in r[i] bytes 4 (l % 4) .. 4 (l % 4) + 3 of row l / 4.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row))
               : "memory");
}

__device__ __forceinline__ uint4 ld_nc_v4(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

}  // namespace flashindexer::sm90::ptx
