#include "row_window.h"

#include <algorithm>
#include <climits>

#include "flashindexer/types.h"

namespace flashindexer {
namespace {

// Validates the pages covering [start, end) of `request`; reads only those entries.
uint32_t check_pages(const PageMap& pages, int32_t request, int64_t start, int64_t end) {
  if (pages.page_size <= 0 || end <= start) return 0;
  const int64_t ps = pages.page_size;
  if (pages.table == nullptr) {
    if (end > pages.num_pages * ps) return row_status::kFailPage;
    return end - 1 > INT32_MAX ? row_status::kFailSlot : 0;
  }
  const int64_t last_index = (end - 1) / ps;
  if (last_index >= pages.table_width) return row_status::kFailPage;
  const int32_t* entries = pages.table + int64_t{request} * pages.table_row_stride;
  uint32_t status = 0;
  for (int64_t index = start / ps; index <= last_index; ++index) {
    const int64_t page = entries[index];
    if (page < 0 || page >= pages.num_pages) return row_status::kFailPage;
    const int64_t last_token = std::min(end - 1, index * ps + ps - 1) - index * ps;
    if (page * ps + last_token > INT32_MAX) status |= row_status::kFailSlot;
  }
  return status;
}

}  // namespace

RowWindow resolve_row(const Rows& rows, const PageMap& pages, int64_t row) {
  RowWindow w;
  if (rows.form == RowForm::kDecode) {
    w.request = static_cast<int32_t>(row / rows.next_n);
    const int64_t n = row % rows.next_n;
    const int64_t len = rows.context_lens[w.request];
    if (len > rows.max_context) w.status |= row_status::kFailWindow;
    w.start = 0;
    w.end = std::max<int64_t>(0, len - (rows.next_n - 1 - n));
  } else {
    w.request = rows.row_batch[row];
    w.start = rows.window_start[row];
    w.end = rows.window_end[row];
    if (w.request < 0 || w.request >= rows.num_requests) w.status |= row_status::kFailRequest;
    if (w.start < 0 || w.end < w.start || w.end > rows.max_context) w.status |= row_status::kFailWindow;
  }
  if (w.status == 0) w.status = check_pages(pages, w.request, w.start, w.end);
  if (w.status != 0) w.start = w.end = 0;
  return w;
}

}  // namespace flashindexer
