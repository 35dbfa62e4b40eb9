// flashindexer: per-row metadata resolution and fail-closed validation (CONTRACT §2.3, §5).
//
// Reads the row's device-resident metadata (host memory on the CPU backend),
// resolves its request and window, and checks every page-table entry the window
// touches. Entries outside the window are never read. Every backend and every
// operator uses this one definition, so status bits agree across operators.
#pragma once

#include <cstdint>

#include "flashindexer/problem.h"

namespace flashindexer {

struct RowWindow {
  int32_t request = 0;
  int64_t start = 0;
  int64_t end = 0;      // exclusive; end == start for an empty window
  uint32_t status = 0;  // row_status::kFail* bits; 0 if the row may be scored

  bool failed() const { return status != 0; }
  int64_t length() const { return end - start; }
};

// pages.page_size == 0 means "no page map" (TopK over logits without slots).
RowWindow resolve_row(const Rows& rows, const PageMap& pages, int64_t row);

}  // namespace flashindexer
