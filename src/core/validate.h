// flashindexer: host-side argument validation shared by every backend (CONTRACT §5).
#pragma once

#include <cstddef>

#include "flashindexer/problem.h"
#include "flashindexer/status.h"

namespace flashindexer {

inline constexpr int32_t kMaxK = 65536;
inline constexpr int32_t kMaxPageSize = 4096;

Status check_problem(const IndexerProblem& p);
Status check_problem(const TopKProblem& p);
Status check_outputs(const TopKOutputs& out, const Rows& rows, int32_t k, bool has_page_map);
Status check_outputs(const LogitsOutput& out, const Rows& rows);
Status check_workspace(const Launch& launch, size_t required);

}  // namespace flashindexer
