// run_of (src/cuda/sm90/select/flat_runs.h), the search of the cluster gather and the split merge,
// against a linear scan on the CPU: empty runs, one run, runs up to kMax, every element.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda/sm90/select/flat_runs.h"

namespace {

using flashindexer::sm90::run_of;

template <uint32_t kMax>
void expect_every_element_found(const std::vector<uint32_t>& counts) {
  std::vector<uint32_t> first(counts.size());
  uint32_t total = 0;
  for (size_t q = 0; q < counts.size(); ++q) {
    first[q] = total;
    total += counts[q];
  }
  const uint32_t n = uint32_t(counts.size());
  for (uint32_t i = 0; i < total; ++i) {
    uint32_t expect = 0;  // the last run starting at or below i
    for (uint32_t q = 0; q < n; ++q)
      if (first[q] <= i) expect = q;
    const uint32_t q = run_of<kMax>(first.data(), n, i);
    ASSERT_EQ(q, expect) << "element " << i << " of " << total << " in " << n << " runs";
    ASSERT_LT(i - first[q], counts[q]) << "element " << i << " lies in run " << q;
  }
}

TEST(FlatRuns, RunOfFindsTheRunOfEveryElement) {
  expect_every_element_found<8>({5});
  expect_every_element_found<8>({0, 0, 3, 0, 1, 0, 0, 2});  // empty runs, at both ends too
  expect_every_element_found<8>({1, 1, 1, 1, 1, 1, 1, 1});
  expect_every_element_found<16>({512, 512, 512, 512, 512, 512, 512, 512, 512, 512, 512, 512, 512});
  std::mt19937 rng(17);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<uint32_t> c(1 + rng() % 16);
    for (uint32_t& v : c) v = rng() % 4 == 0 ? 0 : rng() % 40;
    expect_every_element_found<16>(c);
    c.resize(1 + rng() % 300);
    for (uint32_t& v : c) v = rng() % 3 == 0 ? 0 : rng() % 5;
    expect_every_element_found<512>(c);
  }
}

}  // namespace
