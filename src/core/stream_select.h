// flashindexer: exact streaming TopK with O(K) state (the stream_select algorithm).
//
// A candidate buffer of capacity C >= K + 1 holds rank keys (rank_key.h) and a
// threshold tau, the K-th best rank key kept so far (0 until the first compaction).
// push() appends only keys above tau; when the buffer is full, compact() selects
// the K best exactly (nth_element over unique keys), raises tau to the K-th, and
// drops the rest. tau only rises, nothing that can still be in the top K is ever
// dropped, and the buffer can never overflow: exact and bounded by construction.
// Expected appends for a random order ~ K ln(L/K); an ascending row costs L appends
// and L / (C - K) compactions, still exact.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

#include "flashindexer/types.h"
#include "rank_key.h"

namespace flashindexer {

class StreamSelector {
 public:
  // buffer: caller scratch of `capacity` rank keys; capacity > k.
  StreamSelector(uint64_t* buffer, int64_t capacity, int32_t k) : buf_(buffer), cap_(capacity), k_(k) {}

  void push(float score, int32_t position) {
    const uint64_t rk = rank_key(score, position);
    if (rk <= tau_) return;
    buf_[n_++] = rk;
    if (n_ == cap_) compact();
  }

  // Final selection: the min(K, pushed) best keys in `order`; returns the count.
  int32_t finish(OutputOrder order) {
    if (n_ > k_) compact();
    if (order == OutputOrder::kRank) {
      std::sort(buf_, buf_ + n_, std::greater<>());
    } else {  // ascending position == descending low word
      std::sort(buf_, buf_ + n_, [](uint64_t a, uint64_t b) { return uint32_t(a) > uint32_t(b); });
    }
    return static_cast<int32_t>(n_);
  }

  const uint64_t* keys() const { return buf_; }
  int64_t compactions() const { return compactions_; }

 private:
  void compact() {
    std::nth_element(buf_, buf_ + (k_ - 1), buf_ + n_, std::greater<>());
    tau_ = buf_[k_ - 1];
    n_ = k_;
    ++compactions_;
  }

  uint64_t* buf_;
  int64_t cap_;
  int32_t k_;
  int64_t n_ = 0;
  uint64_t tau_ = 0;  // every rank key is > 0, so everything is accepted at first
  int64_t compactions_ = 0;
};

}  // namespace flashindexer
