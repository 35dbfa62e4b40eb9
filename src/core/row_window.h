// flashindexer: per-row metadata resolution and fail-closed validation (CONTRACT §2.3, §5).
//
// Reads the row's device-resident metadata (host memory on the CPU backend),
// resolves its request and window, and checks every page-table entry the window
// touches. Entries outside the window are never read. Every backend and operator
// uses these definitions (host and device), so status bits agree everywhere.
#pragma once

#include <cstdint>

#include "flashindexer/problem.h"
#include "host_device.h"

namespace flashindexer {

struct RowWindow {
  int32_t request = 0;
  int64_t start = 0;
  int64_t end = 0;      // exclusive; end == start for an empty window
  uint32_t status = 0;  // row_status::kFail* bits; 0 if the row may be scored

  FI_HD bool failed() const { return status != 0; }
  FI_HD int64_t length() const { return end - start; }
};

// Window and request checks only (no page-table reads).
FI_HD RowWindow resolve_window(const Rows& rows, int64_t row) {
  RowWindow w;
  if (rows.form == RowForm::kDecode) {
    w.request = static_cast<int32_t>(row / rows.next_n);
    const int64_t n = row % rows.next_n;
    const int64_t len = rows.context_lens[w.request];
    if (len > rows.max_context) w.status |= row_status::kFailWindow;
    w.start = 0;
    const int64_t end = len - (rows.next_n - 1 - n);
    w.end = end > 0 ? end : 0;
  } else {
    w.request = rows.row_batch[row];
    w.start = rows.window_start[row];
    w.end = rows.window_end[row];
    if (w.request < 0 || w.request >= rows.num_requests) w.status |= row_status::kFailRequest;
    if (w.start < 0 || w.end < w.start || w.end > rows.max_context) w.status |= row_status::kFailWindow;
  }
  if (w.status != 0) w.start = w.end = 0;
  return w;
}

// Number of page-table indices the window [start, end) touches (0 without a page map).
FI_HD int64_t window_pages(const PageMap& pages, const RowWindow& w) {
  if (pages.page_size <= 0 || w.end <= w.start) return 0;
  if (pages.table == nullptr) return 1;  // contiguous: one bounds check covers the window
  return (w.end - 1) / pages.page_size - w.start / pages.page_size + 1;
}

// Checks the i-th page (0 <= i < window_pages) of the window. Returns kFailPage for a
// page past the table width or the pool, or an entry outside [0, num_pages); kFailSlot
// for a slot above INT32_MAX. A backend ORs the results: page failures win (see below).
FI_HD uint32_t check_window_page(const PageMap& pages, const RowWindow& w, int64_t i) {
  const int64_t ps = pages.page_size;
  if (pages.table == nullptr) {
    if (w.end > pages.num_pages * ps) return row_status::kFailPage;
    return w.end - 1 > INT32_MAX ? row_status::kFailSlot : 0u;
  }
  const int64_t index = w.start / ps + i;
  if ((w.end - 1) / ps >= pages.table_width) return row_status::kFailPage;  // checked before any read
  const int64_t page = pages.table[int64_t{w.request} * pages.table_row_stride + index];
  if (page < 0 || page >= pages.num_pages) return row_status::kFailPage;
  const int64_t last = (w.end - 1 < index * ps + ps - 1 ? w.end - 1 : index * ps + ps - 1) - index * ps;
  return page * ps + last > INT32_MAX ? row_status::kFailSlot : 0u;
}

// Combines OR-ed page results: a page failure masks slot failures.
FI_HD uint32_t combine_page_status(uint32_t ored) {
  return (ored & row_status::kFailPage) ? row_status::kFailPage : ored;
}

// Physical slot of logical position s of `request` (window already validated).
FI_HD int64_t physical_slot(const PageMap& pages, int32_t request, int64_t s) {
  if (pages.table == nullptr) return s;
  const int64_t page = pages.table[int64_t{request} * pages.table_row_stride + s / pages.page_size];
  return page * pages.page_size + s % pages.page_size;
}

// Full resolution (serial page checks): the CPU backend's path.
inline RowWindow resolve_row(const Rows& rows, const PageMap& pages, int64_t row) {
  RowWindow w = resolve_window(rows, row);
  if (w.status != 0) return w;
  uint32_t ored = 0;
  const int64_t n = window_pages(pages, w);
  for (int64_t i = 0; i < n && !(ored & row_status::kFailPage); ++i) ored |= check_window_page(pages, w, i);
  w.status = combine_page_status(ored);
  if (w.status != 0) w.start = w.end = 0;
  return w;
}

}  // namespace flashindexer
