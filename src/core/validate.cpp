#include "validate.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "check.h"

namespace flashindexer {
namespace {

std::string range(long long lo, long long hi) { return std::to_string(lo) + ".." + std::to_string(hi); }
std::string at_least(long long lo) { return ">= " + std::to_string(lo); }

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// a * b + c fits in int64 (all non-negative).
bool fits(int64_t a, int64_t b, int64_t c = 0) {
  if (a < 0 || b < 0 || c < 0) return false;
  if (a != 0 && b > (INT64_MAX - c) / a) return false;
  return true;
}

Status check_rows(const Rows& r) {
  FI_CHECK_ARG(r.form == RowForm::kRagged || r.form == RowForm::kDecode, kInvalidArgument, "rows.form",
               "ragged or decode", static_cast<int>(r.form));
  FI_CHECK_ARG(r.max_context >= 0 && r.max_context <= INT32_MAX, kInvalidArgument, "rows.max_context",
               range(0, INT32_MAX), r.max_context);
  FI_CHECK_ARG(r.num_requests >= 0, kInvalidArgument, "rows.num_requests", at_least(0), r.num_requests);
  if (r.form == RowForm::kRagged) {
    FI_CHECK_ARG(r.num_rows >= 0 && r.num_rows <= INT32_MAX, kInvalidArgument, "rows.num_rows",
                 range(0, INT32_MAX), r.num_rows);
    if (r.num_rows > 0) {
      FI_CHECK_ARG(r.row_batch != nullptr, kNullPointer, "rows.row_batch", "non-null", r.row_batch);
      FI_CHECK_ARG(r.window_start != nullptr, kNullPointer, "rows.window_start", "non-null", r.window_start);
      FI_CHECK_ARG(r.window_end != nullptr, kNullPointer, "rows.window_end", "non-null", r.window_end);
    }
  } else {
    FI_CHECK_ARG(r.next_n >= 1 && r.next_n <= 4, kUnsupported, "rows.next_n", range(1, 4), r.next_n);
    if (r.num_requests > 0)
      FI_CHECK_ARG(r.context_lens != nullptr, kNullPointer, "rows.context_lens", "non-null", r.context_lens);
  }
  return Status::ok();
}

Status check_page_map(const PageMap& pm, const Rows& rows) {
  FI_CHECK_ARG(pm.page_size >= 1 && pm.page_size <= kMaxPageSize, kUnsupported, "pages.page_size",
               range(1, kMaxPageSize), pm.page_size);
  FI_CHECK_ARG(pm.num_pages >= 1, kInvalidArgument, "pages.num_pages", at_least(1), pm.num_pages);
  FI_CHECK_ARG(fits(pm.num_pages, pm.page_size), kOverflow, "pages.num_pages * page_size",
               "to fit in int64", pm.num_pages);
  if (pm.table != nullptr) {
    FI_CHECK_ARG(pm.table_width >= 1, kInvalidArgument, "pages.table_width", at_least(1), pm.table_width);
    FI_CHECK_ARG(pm.table_row_stride >= pm.table_width, kInvalidArgument, "pages.table_row_stride",
                 ">= table_width (" + std::to_string(pm.table_width) + ")", pm.table_row_stride);
    FI_CHECK_ARG(fits(rows.num_requests, pm.table_row_stride), kOverflow,
                 "pages.table_row_stride * num_requests", "to fit in int64", pm.table_row_stride);
  }
  return Status::ok();
}

Status check_k(int32_t k, OutputOrder order) {
  FI_CHECK_ARG(k >= 1 && k <= kMaxK, kUnsupported, "k", range(1, kMaxK), k);
  FI_CHECK_ARG(order == OutputOrder::kPosition || order == OutputOrder::kRank, kInvalidArgument, "order",
               "position or rank", static_cast<int>(order));
  return Status::ok();
}

}  // namespace

Status check_problem(const IndexerProblem& p) {
  const KvCache& c = p.cache;
  const Queries& q = p.queries;
  FI_CHECK_ARG(c.format == CacheFormat::kMxfp4 || c.format == CacheFormat::kFp8E4M3, kUnsupported,
               "cache.format", "mxfp4 or fp8_e4m3", static_cast<int>(c.format));
  FI_CHECK_ARG(q.num_heads == 32 || q.num_heads == 64, kUnsupported, "queries.num_heads", "32 or 64",
               q.num_heads);
  FI_RETURN_IF_ERROR(check_k(p.k, p.order));
  FI_CHECK_ARG(p.accuracy == ScoreAccuracy::kExact || p.accuracy == ScoreAccuracy::kProduction, kInvalidArgument,
               "accuracy", "production or exact", static_cast<int>(p.accuracy));
  FI_RETURN_IF_ERROR(check_rows(p.rows));
  FI_RETURN_IF_ERROR(check_page_map(c.pages, p.rows));

  FI_CHECK_ARG(c.pool != nullptr, kNullPointer, "cache.pool", "non-null", c.pool);
  FI_CHECK_ARG(aligned(c.pool, 16), kMisaligned, "cache.pool", "16-byte aligned", c.pool);
  const int64_t payload = page_payload_bytes(c.format, c.pages.page_size);
  FI_CHECK_ARG(c.page_stride >= payload, kInvalidArgument, "cache.page_stride",
               ">= page payload " + std::to_string(payload) + " bytes", c.page_stride);
  FI_CHECK_ARG(c.page_stride % 16 == 0, kMisaligned, "cache.page_stride", "a multiple of 16", c.page_stride);
  FI_CHECK_ARG(fits(c.pages.num_pages, c.page_stride), kOverflow, "cache.num_pages * page_stride",
               "to fit in int64", c.pages.num_pages);

  const int64_t rows = p.rows.rows();
  const int64_t head_bytes = c.format == CacheFormat::kMxfp4 ? kHeadDim / 2 : kHeadDim;
  FI_CHECK_ARG(q.q != nullptr, kNullPointer, "queries.q", "non-null", q.q);
  FI_CHECK_ARG(q.q_head_stride >= head_bytes, kInvalidArgument, "queries.q_head_stride",
               at_least(head_bytes), q.q_head_stride);
  const int64_t q_row_min = (q.num_heads - 1) * q.q_head_stride + head_bytes;
  FI_CHECK_ARG(q.q_row_stride >= q_row_min, kInvalidArgument, "queries.q_row_stride", at_least(q_row_min),
               q.q_row_stride);
  FI_CHECK_ARG(fits(rows, q.q_row_stride), kOverflow, "queries.q_row_stride * rows", "to fit in int64",
               q.q_row_stride);
  if (c.format == CacheFormat::kMxfp4) {
    FI_CHECK_ARG(q.q_scale != nullptr, kNullPointer, "queries.q_scale", "non-null for mxfp4", q.q_scale);
    FI_CHECK_ARG(q.q_scale_head_stride >= kHeadDim / 32, kInvalidArgument, "queries.q_scale_head_stride",
                 at_least(kHeadDim / 32), q.q_scale_head_stride);
    const int64_t s_row_min = (q.num_heads - 1) * q.q_scale_head_stride + kHeadDim / 32;
    FI_CHECK_ARG(q.q_scale_row_stride >= s_row_min, kInvalidArgument, "queries.q_scale_row_stride",
                 at_least(s_row_min), q.q_scale_row_stride);
    FI_CHECK_ARG(fits(rows, q.q_scale_row_stride), kOverflow, "queries.q_scale_row_stride * rows",
                 "to fit in int64", q.q_scale_row_stride);
  }
  FI_CHECK_ARG(q.weight_type == WeightType::kF32 || q.weight_type == WeightType::kBF16, kUnsupported,
               "queries.weight_type", "f32 or bf16", static_cast<int>(q.weight_type));
  FI_CHECK_ARG(q.weights != nullptr, kNullPointer, "queries.weights", "non-null", q.weights);
  FI_CHECK_ARG(aligned(q.weights, q.weight_type == WeightType::kF32 ? 4 : 2), kMisaligned,
               "queries.weights", "element-aligned", q.weights);
  FI_CHECK_ARG(q.weights_row_stride >= q.num_heads, kInvalidArgument, "queries.weights_row_stride",
               at_least(q.num_heads), q.weights_row_stride);
  FI_CHECK_ARG(fits(rows, q.weights_row_stride), kOverflow, "queries.weights_row_stride * rows",
               "to fit in int64", q.weights_row_stride);
  FI_CHECK_ARG(std::isfinite(q.weight_scale), kInvalidArgument, "queries.weight_scale", "finite",
               q.weight_scale);
  return Status::ok();
}

Status check_problem(const TopKProblem& p) {
  FI_RETURN_IF_ERROR(check_k(p.k, p.order));
  FI_RETURN_IF_ERROR(check_rows(p.rows));
  if (p.pages.page_size != 0 || p.pages.table != nullptr) FI_RETURN_IF_ERROR(check_page_map(p.pages, p.rows));
  FI_CHECK_ARG(p.logits != nullptr, kNullPointer, "logits", "non-null", p.logits);
  FI_CHECK_ARG(aligned(p.logits, 4), kMisaligned, "logits", "4-byte aligned", p.logits);
  FI_CHECK_ARG(p.logits_row_stride >= p.rows.max_context, kInvalidArgument, "logits_row_stride",
               ">= max_context (" + std::to_string(p.rows.max_context) + ")", p.logits_row_stride);
  FI_CHECK_ARG(fits(p.rows.rows(), p.logits_row_stride), kOverflow, "logits_row_stride * rows",
               "to fit in int64", p.logits_row_stride);
  return Status::ok();
}

namespace {

// One [rows, k] output array: 4-byte aligned, rows at least k apart, every row addressable.
Status check_row_array(const void* ptr, int64_t row_stride, int32_t k, int64_t rows, const std::string& name) {
  FI_CHECK_ARG(aligned(ptr, 4), kMisaligned, "outputs." + name, "4-byte aligned", ptr);
  FI_CHECK_ARG(row_stride >= k, kInvalidArgument, "outputs." + name + "_row_stride",
               ">= k (" + std::to_string(k) + ")", row_stride);
  FI_CHECK_ARG(fits(rows, row_stride), kOverflow, "outputs." + name + "_row_stride * rows", "to fit in int64",
               row_stride);
  return Status::ok();
}

}  // namespace

Status check_outputs(const TopKOutputs& o, const Rows& rows, int32_t k, bool has_page_map) {
  const int64_t n = rows.rows();
  FI_CHECK_ARG(o.positions != nullptr, kNullPointer, "outputs.positions", "non-null", o.positions);
  FI_RETURN_IF_ERROR(check_row_array(o.positions, o.positions_row_stride, k, n, "positions"));
  if (o.slots != nullptr) {
    FI_CHECK_ARG(has_page_map, kInvalidArgument, "outputs.slots", "null when no page map is given",
                 static_cast<const void*>(o.slots));
    FI_RETURN_IF_ERROR(check_row_array(o.slots, o.slots_row_stride, k, n, "slots"));
  }
  if (o.scores != nullptr) FI_RETURN_IF_ERROR(check_row_array(o.scores, o.scores_row_stride, k, n, "scores"));
  FI_CHECK_ARG(aligned(o.counts, 4), kMisaligned, "outputs.counts", "4-byte aligned", o.counts);
  FI_CHECK_ARG(aligned(o.status, 4), kMisaligned, "outputs.status", "4-byte aligned", o.status);
  return Status::ok();
}

Status check_outputs(const LogitsOutput& o, const Rows& rows) {
  FI_CHECK_ARG(o.logits != nullptr, kNullPointer, "out.logits", "non-null", o.logits);
  FI_CHECK_ARG(aligned(o.logits, 4), kMisaligned, "out.logits", "4-byte aligned", o.logits);
  FI_CHECK_ARG(o.row_stride >= rows.max_context, kInvalidArgument, "out.row_stride",
               ">= max_context (" + std::to_string(rows.max_context) + ")", o.row_stride);
  FI_CHECK_ARG(fits(rows.rows(), o.row_stride), kOverflow, "out.row_stride * rows", "to fit in int64",
               o.row_stride);
  FI_CHECK_ARG(aligned(o.status, 4), kMisaligned, "out.status", "4-byte aligned", o.status);
  return Status::ok();
}

Status check_workspace(const Launch& launch, size_t required) {
  FI_CHECK_ARG(launch.workspace_bytes >= required, kWorkspaceTooSmall, "launch.workspace_bytes",
               at_least(static_cast<long long>(required)), launch.workspace_bytes);
  if (required > 0) {
    FI_CHECK_ARG(launch.workspace != nullptr, kNullPointer, "launch.workspace", "non-null", launch.workspace);
    FI_CHECK_ARG(aligned(launch.workspace, 16), kMisaligned, "launch.workspace", "16-byte aligned",
                 launch.workspace);
  }
  return Status::ok();
}

}  // namespace flashindexer
