// fp64 oracle (tests only): CONTRACT §1 and §4 evaluated exactly enough, with
// its own decoders of the raw bytes (independent of src/core/quantize.cpp).
#pragma once

#include <cstdint>

#include "flashindexer/problem.h"

namespace oracle {

double e2m1(uint8_t nibble);
double e4m3(uint8_t code);
double ue8m0(uint8_t code);

// Row window as the contract defines it (no validation).
struct Window {
  int32_t request;
  int64_t start, end;
};
Window window(const flashindexer::Rows& rows, int64_t row);

// Raw bytes of the key of logical position s of the row's request (page table applied):
// values (64 packed E2M1 | 128 e4m3), and the scales (4 UE8M0 | one fp32).
struct KeyBytes {
  const uint8_t* values;
  const uint8_t* scales;
};
KeyBytes key_bytes(const flashindexer::IndexerProblem& p, int64_t row, int64_t s);
// Raw bytes of query head h of a row (64 packed E2M1 | 128 e4m3).
const uint8_t* query_bytes(const flashindexer::IndexerProblem& p, int64_t row, int h);

struct Exact {
  double score;  // sum_h w_eff * relu(q̂ . k̂)
  double m;      // sum_h |w_eff| * sum_d |q̂ k̂|
};
// Exact score of logical position s of the row's request (page table applied).
Exact score(const flashindexer::IndexerProblem& p, int64_t row, int64_t s);

}  // namespace oracle
