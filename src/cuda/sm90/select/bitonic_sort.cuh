// flashindexer sm_90a: a bitonic sort of up to 2,048 rank keys held in registers.
//
// Purpose: the fused operator's final ordering of a row's min(K, n) keys (descending
//   rank key, or ascending position: descending low word 0xFFFFFFFF - position), with the
//   padding (key 0) last in both orders. Keys are unique, so the order is total.
// Algorithm: the bitonic network over P = 512, 1,024 or 2,048 keys (a power of two; the
//   caller pads with 0), 8 keys per thread on T = P / 8 threads. Layout A (thread t holds
//   keys 8 t .. 8 t + 7): partner distances j < 8 are inside a thread, 8 <= j <= 128 are
//   lanes of one warp (shuffles). Distances j >= 256 cross warps: for those stages the keys
//   go through shared memory to layout B (thread t holds keys t + T e, e < 8), where they
//   are inside a thread again, and back. Barriers: 2 per merge size k >= 512, so 6 for
//   P = 2,048 (a shared-memory network needs one per stage: 66).
// Threads: the caller's group of kThreads (Sync::sync() over all of them); threads
//   t >= T only take part in the barriers.
// Shared memory: none of its own; the keys' buffer (>= P keys) is the transpose space.
#pragma once

#include <cstdint>

namespace flashindexer::sm90 {

template <int kThreads, class Sync>
struct BitonicSort {
  static constexpr int kItems = 8;                   // keys per thread
  static constexpr uint32_t kMaxKeys = kThreads * kItems;
  static constexpr uint32_t kMinKeys = 512;           // P below this sorts as 512 (T >= 64: two warps)

  // Sorts keys[0, p) in place, descending by key (kByRank) or by its low word. p is a power
  // of two in [kMinKeys, kMaxKeys]. Entered and left by the whole group, after a barrier
  // that published keys; leaves the sorted keys in shared memory.
  template <bool kByRank>
  __device__ static void sort_desc(uint64_t* keys, uint32_t p, int tid) {
    const uint32_t T = p / kItems;  // sorting threads
    const bool active = uint32_t(tid) < T;
    uint64_t v[kItems];
    if (active) load_a(keys, tid, v);
    // Merge sizes k < 512 (and every stage j <= 128 of larger ones) stay in layout A.
    for (uint32_t k = 2; k <= p; k <<= 1) {
      if (k >= 512) {
        // Stages j = k / 2 .. 256 in layout B.
        if (active) store_a(keys, tid, v);
        Sync::sync();
        if (active) {
#pragma unroll
          for (int e = 0; e < kItems; ++e) v[e] = keys[tid + T * e];
          for (uint32_t j = k >> 1; j >= 256; j >>= 1) stage_in_thread_b<kByRank>(v, tid, T, k, j);
#pragma unroll
          for (int e = 0; e < kItems; ++e) keys[tid + T * e] = v[e];
        }
        Sync::sync();
        if (active) load_a(keys, tid, v);
      }
      if (active) {
        for (uint32_t j = (k >> 1) < 128 ? (k >> 1) : 128; j >= kItems; j >>= 1) stage_lanes<kByRank>(v, tid, k, j);
        stage_in_thread_a<kByRank>(v, tid, k);
      }
    }
    if (active) store_a(keys, tid, v);
    Sync::sync();
  }

 private:
  template <bool kByRank>
  __device__ static bool before(uint64_t a, uint64_t b) {  // a ranks before b in the output
    if constexpr (kByRank) {
      return a > b;
    } else {
      return uint32_t(a) > uint32_t(b);
    }
  }

  // Compare-exchange so that lo (the lower index) ends before hi when desc, after it otherwise.
  template <bool kByRank>
  __device__ static void exchange(uint64_t& lo, uint64_t& hi, bool desc) {
    if (before<kByRank>(hi, lo) == desc) {
      const uint64_t x = lo;
      lo = hi;
      hi = x;
    }
  }

  __device__ static void load_a(const uint64_t* keys, int tid, uint64_t (&v)[kItems]) {
    const ulonglong2* src = reinterpret_cast<const ulonglong2*>(keys + kItems * tid);
#pragma unroll
    for (int c = 0; c < kItems / 2; ++c) {
      const ulonglong2 x = src[c];
      v[2 * c] = x.x;
      v[2 * c + 1] = x.y;
    }
  }
  __device__ static void store_a(uint64_t* keys, int tid, const uint64_t (&v)[kItems]) {
    ulonglong2* dst = reinterpret_cast<ulonglong2*>(keys + kItems * tid);
#pragma unroll
    for (int c = 0; c < kItems / 2; ++c) dst[c] = make_ulonglong2(v[2 * c], v[2 * c + 1]);
  }

  // Layout A, every stage j = min(k / 2, 4) .. 1 of merge size k: index 8 tid + e.
  template <bool kByRank>
  __device__ static void stage_in_thread_a(uint64_t (&v)[kItems], int tid, uint32_t k) {
    const bool desc_thread = ((uint32_t(kItems * tid)) & k) == 0;  // k >= 8: the same for all 8 keys
#pragma unroll
    for (int j = kItems / 2; j > 0; j >>= 1) {
      if (uint32_t(j) >= k) continue;  // k = 2, 4: only the stages below k
#pragma unroll
      for (int e = 0; e < kItems; ++e) {
        if (e & j) continue;
        const bool desc = k >= kItems ? desc_thread : ((uint32_t(e) & k) == 0);
        exchange<kByRank>(v[e], v[e | j], desc);
      }
    }
  }

  // Layout A, a stage 8 <= j <= 128: partner thread tid ^ (j / 8), a lane of the same warp.
  template <bool kByRank>
  __device__ static void stage_lanes(uint64_t (&v)[kItems], int tid, uint32_t k, uint32_t j) {
    const int d = int(j / kItems);
    const bool lower = (tid & d) == 0;
    const bool desc = ((uint32_t(kItems * tid)) & k) == 0;
    const bool keep_first = lower == desc;  // keep the key that ranks first
#pragma unroll
    for (int e = 0; e < kItems; ++e) {
      const uint64_t o = __shfl_xor_sync(0xFFFFFFFFu, v[e], d);
      const bool mine_first = before<kByRank>(v[e], o);
      v[e] = mine_first == keep_first ? v[e] : o;
    }
  }

  // Layout B, a stage j >= 256 (= T x 2^m): keys t + T e and t + T (e ^ (j / T)).
  template <bool kByRank>
  __device__ static void stage_in_thread_b(uint64_t (&v)[kItems], int tid, uint32_t T, uint32_t k, uint32_t j) {
    const uint32_t d = j / T;  // 1, 2 or 4
#pragma unroll
    for (int e = 0; e < kItems; ++e) {
#pragma unroll
      for (uint32_t dd = 1; dd < kItems; dd <<= 1) {
        if (dd != d || (e & dd)) continue;
        const bool desc = ((uint32_t(tid) + T * uint32_t(e)) & k) == 0;
        exchange<kByRank>(v[e], v[e | dd], desc);
      }
    }
  }
};

}  // namespace flashindexer::sm90
