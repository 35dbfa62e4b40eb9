// flashindexer bench: on the GPU, against the floors measured in the same run (FP8 GEMM
// through cuBLASLt for prefill, device copy for decode):
// - the dense-logits scorer, one JSON line per point and accuracy mode (production, exact);
// - the fused indexer TopK against our dense logits + our TopK over logits (the preset's
//   K, default accuracy): time, extra device memory (workspace; logits + workspace for the
//   dense path), and whether the two paths' outputs are bit-identical on the point.
// Each line carries the command that reproduces it.
//
// Inputs: one request's keys and queries come from the synthetic generator (the
// preset's format, H, page size); decode batches replicate that request's pages
// into B distinct physical copies, so every request reads its own bytes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "bench.h"
#include "bench_util.h"
#include "cuda/sm90/kernels/fused_topk.h"
#include "cuda/sm90/kernels/topk_over_logits.h"
#include "flashindexer/host_problem.h"
#include "flashindexer/operators.h"

namespace flashindexer::bench {
namespace {

struct ScorePoint {
  std::string preset;
  bool decode;
  int64_t rows_or_batch;
  int32_t next_n;
  int64_t context;
  bool fused_only = false;  // skip the dense-logits lines (fused vs dense + TopK only)
  std::string name() const {
    return preset + (decode ? "_decode_b" + std::to_string(rows_or_batch) + "_n" + std::to_string(next_n)
                            : "_prefill_" + std::to_string(rows_or_batch)) +
           "_c" + std::to_string(context);
  }
};

template <typename T>
T* upload(const std::vector<T>& v) {
  T* p = nullptr;
  if (cudaMalloc(&p, std::max<size_t>(v.size(), 1) * sizeof(T)) != cudaSuccess) return nullptr;
  if (!v.empty()) cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return p;
}

struct DeviceBuffers {
  std::vector<void*> ptrs;
  template <typename T>
  T* add(T* p) {
    ptrs.push_back(p);
    return p;
  }
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
  }
};

// L2 rotation: decode points whose keys fit in L2 read one of `n` identical copies of the
// pool per call, in turn, so that a timed call does not find its keys in L2.
struct PoolRotation {
  uint8_t* base = nullptr;
  size_t stride = 0;
  int n = 1;
  int i = 0;
  const void* next() { return base + stride * size_t(i++ % n); }
};

// Bytes and flops of one point (for the floors).
struct Work {
  double flops, key_bytes, logits_bytes;
};

int time_point(const ScorePoint& pt, const HostProblem& h, IndexerProblem p, const LogitsOutput& out,
               const Work& w, const BenchOptions& opt, const nlohmann::json& base, double gemm_tflops,
               double copy_gbps, PoolRotation& rotation) {
  Launch l;
  l.backend = Backend::kCuda;
  Status run_status;
  const float ms = median_ms(
      [&] {
        p.cache.pool = rotation.next();
        run_status = dense_logits(p, out, l);
      },
      3, opt.iters);
  BENCH_CHECK(cudaDeviceSynchronize());
  if (!run_status.is_ok()) {
    std::fprintf(stderr, "%s\n", run_status.to_string().c_str());
    return 1;
  }
  nlohmann::json j = base;
  j["op"] = "dense_logits";
  j["impl"] = "flashindexer";
  j["point"] = pt.name();
  j["preset"] = pt.preset;
  j["format"] = h.format == CacheFormat::kMxfp4 ? "mxfp4" : "fp8_e4m3";
  j["heads"] = h.num_heads;
  j["rows"] = p.rows.rows();
  j["context"] = pt.context;
  j["next_n"] = pt.decode ? pt.next_n : 0;
  j["accuracy"] = to_string(p.accuracy);
  j["time_ms"] = ms;
  j["tflops"] = w.flops / (ms * 1e9);
  j["key_gbps"] = w.key_bytes / (ms * 1e6);
  j["tensor_floor_ms"] = w.flops / (gemm_tflops * 1e9);
  j["key_read_floor_ms"] = w.key_bytes / (copy_gbps * 1e6);
  j["logits_write_floor_ms"] = w.logits_bytes / (copy_gbps * 1e6);
  j["pct_tensor_floor"] = 100.0 * (w.flops / (gemm_tflops * 1e9)) / ms;
  j["pct_copy_bw_keys"] = 100.0 * (w.key_bytes / (copy_gbps * 1e6)) / ms;
  j["l2_resident_keys"] = w.key_bytes < 50e6 && rotation.n == 1;
  j["l2_rotation"] = rotation.n;
  j["command"] = "flashindexer bench --json --only " + pt.name();
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
  return 0;
}

// The first difference between two TopK output sets (rows x k, every optional output
// allocated; "" when they are bit-identical): the field, the row, the entry and both values.
std::string output_difference(const TopKOutputs& a, const TopKOutputs& b, int64_t rows, int32_t k) {
  const size_t row_entries = size_t(rows) * size_t(k);
  for (auto [name, x, y, n, width] : {std::tuple{"positions", (void*)a.positions, (void*)b.positions, row_entries, k},
                                      std::tuple{"slots", (void*)a.slots, (void*)b.slots, row_entries, k},
                                      std::tuple{"scores", (void*)a.scores, (void*)b.scores, row_entries, k},
                                      std::tuple{"counts", (void*)a.counts, (void*)b.counts, size_t(rows), 1},
                                      std::tuple{"status", (void*)a.status, (void*)b.status, size_t(rows), 1}}) {
    std::vector<uint32_t> u(n), v(n);
    if (cudaMemcpy(u.data(), x, n * 4, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(v.data(), y, n * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
      return "cudaMemcpy failed";
    for (size_t i = 0; i < n; ++i)
      if (u[i] != v[i])
        return std::string(name) + " row " + std::to_string(i / size_t(width)) + " entry " +
               std::to_string(i % size_t(width)) + ": " + std::to_string(u[i]) + " vs " + std::to_string(v[i]) +
               " (bits)";
  }
  return "";
}

// The decode-cluster plan that the CUDA backend takes for p where it applies on this device
// (cuda::fused_staged_plan); cluster 0 otherwise (the lockstep kernel runs).
cuda::FusedStagedPlan backend_staged_plan(const IndexerProblem& p) {
  int dev = 0, sms = 0, smem_optin = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
    return {};
  return cuda::fused_staged_plan(p, {sms, size_t(smem_optin), sm90::staged_cluster_capacities()});
}

// --plan-sweep (a developer tool: the data behind heuristics.h's plan_fused_staged): on a
// decode point, every plan of the fused decode clusters (fused_staged.cu) that
// covers the row, timed through sm90::fused_staged_topk with poisoned outputs and compared
// bit for bit with the dense path's (outs[1]). The plan the cost model picks on this device
// says "chosen": true.
int sweep_staged_plans(const ScorePoint& pt, IndexerProblem p, TopKOutputs (&outs)[2], const BenchOptions& opt,
                       const nlohmann::json& base, double dense_ms, DeviceBuffers& mem, PoolRotation& rotation) {
  int dev = 0, smem_optin = 0, sms = 0;
  BENCH_CHECK(cudaGetDevice(&dev));
  BENCH_CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  BENCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int64_t rows = p.rows.rows();
  const int grouped = cuda::fused_staged_rows_per_cta(p.cache.format == CacheFormat::kFp8E4M3, p.rows.next_n);
  const cuda::FusedStagedPlan chosen = backend_staged_plan(p);
  std::vector<cuda::FusedStagedPlan> plans;
  size_t ws_bytes = 1;
  // Rows on their own, and grouped where the backend groups them.
  for (const int r : grouped > 1 ? std::vector<int>{1, grouped} : std::vector<int>{1}) {
    for (const int c : {2, 4, 8}) {
      cuda::for_each_fused_staged_plan(
          p.rows.max_context, c,
          [&](const cuda::FusedStagedPlan& plan) {
            if (!flashindexer::cuda::fused_staged_applies(p, plan, size_t(smem_optin))) return;
            plans.push_back(cuda::with_merge(p, plan, sms));
            ws_bytes = std::max(ws_bytes, flashindexer::cuda::fused_staged_workspace_bytes(p, plan));
          },
          r);
    }
  }
  void* ws = nullptr;
  BENCH_CHECK(cudaMalloc(&ws, ws_bytes));
  mem.add(ws);
  const size_t row_bytes = size_t(rows) * size_t(p.k) * 4;
  int mismatches = 0;
  for (const cuda::FusedStagedPlan& plan : plans) {
    for (void* o : {(void*)outs[0].positions, (void*)outs[0].slots, (void*)outs[0].scores})
      BENCH_CHECK(cudaMemset(o, 0x7f, row_bytes));
    BENCH_CHECK(cudaMemset(outs[0].counts, 0x7f, size_t(rows) * 4));
    BENCH_CHECK(cudaMemset(outs[0].status, 0x7f, size_t(rows) * 4));
    cudaError_t e = cudaSuccess;
    const float ms = median_ms(
        [&] {
          p.cache.pool = rotation.next();
          if (e == cudaSuccess) e = sm90::fused_staged_topk(p, outs[0], plan, ws, nullptr);
        },
        3, opt.iters);
    BENCH_CHECK(e);
    BENCH_CHECK(cudaDeviceSynchronize());
    nlohmann::json j = base;
    j["op"] = "fused_staged_plan";
    j["point"] = pt.name();
    j["k"] = p.k;
    j["format"] = p.cache.format == CacheFormat::kMxfp4 ? "mxfp4" : "fp8_e4m3";
    j["cluster"] = plan.cluster;
    j["segments"] = plan.segments;
    j["chunk"] = plan.chunk;
    j["rows_per_cta"] = plan.rows_per_cta;
    j["merge_keys"] = plan.segments > 1 ? int64_t(plan.segments) * p.k : 0;
    j["chosen"] = plan.cluster == chosen.cluster && plan.segments == chosen.segments && plan.rows_per_cta == chosen.rows_per_cta;
    j["time_ms"] = ms;
    j["dense_then_topk_ms"] = dense_ms;
    const std::string difference = output_difference(outs[0], outs[1], rows, p.k);
    j["identical"] = difference.empty();
    if (!difference.empty()) j["difference"] = difference;
    j["command"] = "flashindexer bench --json --plan-sweep --full --only " + pt.name();
    std::printf("%s\n", j.dump().c_str());
    mismatches += !difference.empty();
  }
  std::fflush(stdout);
  return mismatches > 0 ? 2 : 0;  // every plan is timed and compared first
}

// The fused operator against dense logits + TopK over logits on one point, in the mode of
// --accuracy (production by default).
int time_fused(const ScorePoint& pt, const HostProblem& h, IndexerProblem p, const LogitsOutput& logits,
               const Work& w, const BenchOptions& opt, const nlohmann::json& base, double gemm_tflops,
               double copy_gbps, DeviceBuffers& mem, PoolRotation& rotation) {
  p.accuracy = opt.accuracy;
  const int64_t rows = p.rows.rows();
  const int32_t k = p.k;
  Launch l;
  l.backend = Backend::kCuda;
  // Two output sets (fused, dense path) to compare bit for bit.
  TopKOutputs outs[2];
  for (TopKOutputs& o : outs) {
    BENCH_CHECK(cudaMalloc(&o.positions, size_t(rows) * k * 4));
    BENCH_CHECK(cudaMalloc(&o.slots, size_t(rows) * k * 4));
    BENCH_CHECK(cudaMalloc(&o.scores, size_t(rows) * k * 4));
    BENCH_CHECK(cudaMalloc(&o.counts, size_t(rows) * 4));
    BENCH_CHECK(cudaMalloc(&o.status, size_t(rows) * 4));
    mem.add(o.positions), mem.add(o.slots), mem.add(o.scores), mem.add(o.counts), mem.add(o.status);
    o.positions_row_stride = o.slots_row_stride = o.scores_row_stride = k;
  }
  size_t fused_ws = 0, topk_ws = 0;
  if (Status st = workspace_size(p, Operator::kFusedTopK, l, &fused_ws); !st.is_ok()) {
    std::fprintf(stderr, "%s: %s\n", pt.name().c_str(), st.to_string().c_str());
    return 1;
  }
  TopKProblem t;
  t.logits = logits.logits;
  t.logits_row_stride = logits.row_stride;
  t.rows = p.rows;
  t.pages = p.cache.pages;
  t.k = k;
  t.order = p.order;
  if (Status st = workspace_size(t, l, &topk_ws); !st.is_ok()) return 1;
  void* ws = nullptr;
  BENCH_CHECK(cudaMalloc(&ws, std::max<size_t>({fused_ws, topk_ws, 1})));
  mem.add(ws);
  l.workspace = ws;
  Status fused_status, dense_status;
  l.workspace_bytes = fused_ws;
  const float fused_ms = median_ms(
      [&] {
        p.cache.pool = rotation.next();
        fused_status = fused_topk(p, outs[0], l);
      },
      3, opt.iters);
  BENCH_CHECK(cudaDeviceSynchronize());
  Launch ld = l;
  ld.workspace_bytes = topk_ws;
  const float dense_ms = median_ms(
      [&] {
        p.cache.pool = rotation.next();
        dense_status = dense_logits(p, logits, ld);
        if (dense_status.is_ok()) dense_status = topk_over_logits(t, outs[1], ld);
      },
      3, opt.iters);
  BENCH_CHECK(cudaDeviceSynchronize());
  // Decode points also as inference servers run them: CUDA-graph replays, without the host's
  // enqueue time (validation, plan, launches). One graph holds one call per pool copy of the
  // L2 rotation, so each call reads keys the previous one did not; the time is per call. The
  // outputs compared below are then the replays' (the same inputs: the same bits).
  float fused_graph_ms = -1.0f, dense_graph_ms = -1.0f;
  if (pt.decode) {
    auto graph_ms = [&](const Launch& base_launch, auto&& call) {
      const float ms = median_graph_ms(
          [&](cudaStream_t s) {
            Launch gl = base_launch;
            gl.stream = s;
            for (int c = 0; c < rotation.n; ++c) {
              p.cache.pool = rotation.next();
              call(gl);
            }
          },
          3, opt.iters);
      return ms < 0 ? ms : ms / float(rotation.n);
    };
    fused_graph_ms = graph_ms(l, [&](const Launch& gl) {
      if (Status st = fused_topk(p, outs[0], gl); !st.is_ok()) fused_status = st;
    });
    dense_graph_ms = graph_ms(ld, [&](const Launch& gl) {
      Status st = dense_logits(p, logits, gl);
      if (st.is_ok()) st = topk_over_logits(t, outs[1], gl);
      if (!st.is_ok()) dense_status = st;
    });
    BENCH_CHECK(cudaDeviceSynchronize());
  }
  if (!fused_status.is_ok() || !dense_status.is_ok()) {
    std::fprintf(stderr, "%s: fused %s, dense %s\n", pt.name().c_str(), fused_status.to_string().c_str(),
                 dense_status.to_string().c_str());
    return 1;
  }
  const std::string difference = output_difference(outs[0], outs[1], rows, k);
  const bool identical = difference.empty();
  if (opt.plan_sweep && pt.decode) {
    if (int rc = sweep_staged_plans(pt, p, outs, opt, base, dense_ms, mem, rotation); rc != 0) return rc;
  }
  // Builds with -DFI_FUSED_PROFILE=1: one more fused call per kernel's profile (the lockstep
  // kernel, fused_topk.cu; the decode clusters, fused_staged.cu), its per-phase cycles per
  // CTA. read(out, reset) copies a profile; it returns false in builds without the knob.
  nlohmann::json profile;
  auto profiled = [&](auto&& read, auto& sums) {
    if (!read(sums, true)) return false;  // (zeroed)
    fused_status = fused_topk(p, outs[0], l);
    return fused_status.is_ok() && cudaDeviceSynchronize() == cudaSuccess && read(sums, true) && sums[0] > 0;
  };
  unsigned long long prof[sm90::kFusedProfileSlots];
  if (profiled(sm90::fused_topk_profile, prof)) {
    const double ctas = double(prof[sm90::kProfileCtas]);
    profile = {{"ctas", ctas},
               {"consume_cycles", prof[sm90::kProfileConsume] / ctas},
               {"vote_cycles", prof[sm90::kProfileVotes] / ctas},
               {"compact_cycles", prof[sm90::kProfileCompactCycles] / ctas},
               {"compactions", prof[sm90::kProfileCompactions] / ctas},
               {"keys_per_compaction",
                prof[sm90::kProfileCompactedKeys] / std::max(1.0, double(prof[sm90::kProfileCompactions]))},
               {"finish_cycles", prof[sm90::kProfileFinish] / ctas},
               {"sort_cycles", prof[sm90::kProfileSortCycles] / ctas},
               {"guess_cycles", prof[sm90::kProfileGuessCycles] / ctas},
               {"vote_wait_cycles", prof[sm90::kProfileVoteWaitCycles] / ctas},
               {"guesses_held_rows", prof[sm90::kProfileGuessesHeld]},  // totals over the call's rows
               {"repaired_rows", prof[sm90::kProfileRepairs]}};
  }
  unsigned long long sprof[sm90::kFusedStagedProfileSlots];
  if (profiled(sm90::fused_staged_profile, sprof)) {
    const double ctas = double(sprof[sm90::kStagedProfileCtas]);  // the finish: CTA 0s only
    profile["staged"] = {{"ctas", ctas},
                         {"score_cycles", sprof[sm90::kStagedProfileScore] / ctas},
                         {"guess_cycles", sprof[sm90::kStagedProfileGuess] / ctas},
                         {"pass_cycles", sprof[sm90::kStagedProfilePasses] / ctas},
                         {"gather_cycles", sprof[sm90::kStagedProfileGather] / ctas},
                         {"finish_cycles_over_all_ctas", sprof[sm90::kStagedProfileFinish] / ctas}};
  }
  // Builds with -DFI_TOPK_PROFILE=1: the split merge's phases (split decode rows), per CTA.
  unsigned long long tprof[sm90::kTopKProfileSlots];
  if (profiled(sm90::topk_profile, tprof)) {
    profile["merge"] = topk_profile_json(tprof);
  }
  const double dense_extra = double(rows) * double(logits.row_stride) * 4 + double(topk_ws);
  for (int path = 0; path < 2; ++path) {
    const double ms = path == 0 ? fused_ms : dense_ms;
    nlohmann::json j = base;
    j["op"] = path == 0 ? "fused_topk" : "dense_then_topk";
    j["impl"] = "flashindexer";
    j["point"] = pt.name();
    j["preset"] = pt.preset;
    j["format"] = h.format == CacheFormat::kMxfp4 ? "mxfp4" : "fp8_e4m3";
    j["heads"] = h.num_heads;
    j["k"] = k;
    j["rows"] = rows;
    j["context"] = pt.context;
    j["next_n"] = pt.decode ? pt.next_n : 0;
    j["accuracy"] = to_string(opt.accuracy);
    j["time_ms"] = ms;
    const float graph_ms = path == 0 ? fused_graph_ms : dense_graph_ms;
    if (graph_ms >= 0) {
      j["graph_ms"] = graph_ms;
      j["graph_speedup_vs_dense"] = dense_graph_ms > 0 ? dense_graph_ms / graph_ms : 0.0;
    }
    j["extra_bytes"] = path == 0 ? double(fused_ws) : dense_extra;
    j["speedup_vs_dense"] = dense_ms / ms;
    j["l2_rotation"] = rotation.n;
    j["identical"] = identical;
    if (!identical) j["difference"] = difference;
    if (path == 0 && pt.decode) {  // the decode clusters' plan, or the lockstep kernel
      const cuda::FusedStagedPlan plan = backend_staged_plan(p);
      j["staged_plan"] = plan.cluster == 0 ? nlohmann::json("lockstep")
                                           : nlohmann::json{{"cluster", plan.cluster},
                                                            {"segments", plan.segments},
                                                            {"chunk", plan.chunk},
                                                            {"rows_per_cta", plan.rows_per_cta}};
    }
    j["tensor_floor_ms"] = w.flops / (gemm_tflops * 1e9);
    j["key_read_floor_ms"] = w.key_bytes / (copy_gbps * 1e6);
    j["x_tensor_floor"] = ms / (w.flops / (gemm_tflops * 1e9));
    j["x_key_read_floor"] = ms / (w.key_bytes / (copy_gbps * 1e6));
    j["command"] = "flashindexer bench --json --accuracy " + std::string(to_string(opt.accuracy)) + " " +
                   (opt.k > 0 ? "--k " + std::to_string(opt.k) + " " : "") + "--only " + pt.name();
    if (path == 0 && !profile.is_null()) j["profile_per_cta"] = profile;
    std::printf("%s\n", j.dump().c_str());
  }
  std::fflush(stdout);
  return identical ? 0 : 2;
}

int run_point(const ScorePoint& pt, const BenchOptions& opt, const nlohmann::json& base, double gemm_tflops,
              double copy_gbps) {
  SyntheticSpec s;
  if (!apply_preset(pt.preset, &s)) {
    std::fprintf(stderr, "unknown preset %s\n", pt.preset.c_str());
    return 1;
  }
  s.context = pt.context;
  s.seed = 7;
  if (opt.k > 0) s.k = opt.k;
  if (pt.decode) {
    s.form = RowForm::kDecode;
    s.requests = 1;
    s.next_n = pt.next_n;
  } else {
    s.rows = pt.rows_or_batch;
    s.requests = 1;
  }
  HostProblem h;
  if (Status st = make_synthetic(s, &h); !st.is_ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  DeviceBuffers mem;
  IndexerProblem p = h.view();
  const int64_t copies = pt.decode ? pt.rows_or_batch : 1;
  // Pool: `copies` physical copies of the request's pages; table row b points at copy b.
  // Decode pools under 100 MB are replicated for L2 rotation (PoolRotation; prefill keys
  // are meant to stay in L2: every row group re-reads them).
  const size_t pool_bytes = size_t(copies) * h.pool.size();
  PoolRotation rotation;
  rotation.stride = pool_bytes;
  if (pt.decode && pool_bytes < (size_t(100) << 20)) rotation.n = int(std::min<size_t>(16, (size_t(200) << 20) / pool_bytes + 1));
  uint8_t* pool = nullptr;
  BENCH_CHECK(cudaMalloc(&pool, pool_bytes * size_t(rotation.n)));
  mem.add(pool);
  rotation.base = pool;
  for (int64_t c = 0; c < copies * rotation.n; ++c)
    BENCH_CHECK(cudaMemcpy(pool + size_t(c) * h.pool.size(), h.pool.data(), h.pool.size(), cudaMemcpyHostToDevice));
  std::vector<int32_t> table;
  for (int64_t c = 0; c < copies; ++c)
    for (int32_t e : h.page_table) table.push_back(e + int32_t(c * h.num_pages));
  p.cache.pool = pool;
  p.cache.pages.num_pages = h.num_pages * copies;
  p.cache.pages.table = mem.add(upload(table));
  if (pt.decode) {
    // Every query row of the batch reuses the generated request's queries.
    std::vector<uint8_t> q, qs, w;
    for (int64_t c = 0; c < copies; ++c) {
      q.insert(q.end(), h.q.begin(), h.q.end());
      qs.insert(qs.end(), h.q_scale.begin(), h.q_scale.end());
      w.insert(w.end(), h.weights.begin(), h.weights.end());
    }
    p.queries.q = mem.add(upload(q));
    p.queries.q_scale = h.q_scale.empty() ? nullptr : mem.add(upload(qs));
    p.queries.weights = mem.add(upload(w));
    p.rows.num_requests = int32_t(copies);
    p.rows.context_lens = mem.add(upload(std::vector<int32_t>(size_t(copies), int32_t(pt.context))));
  } else {
    p.queries.q = mem.add(upload(h.q));
    p.queries.q_scale = h.q_scale.empty() ? nullptr : mem.add(upload(h.q_scale));
    p.queries.weights = mem.add(upload(h.weights));
    p.rows.row_batch = mem.add(upload(h.row_batch));
    p.rows.window_start = mem.add(upload(h.window_start));
    p.rows.window_end = mem.add(upload(h.window_end));
  }
  const int64_t rows = p.rows.rows();
  float* logits = nullptr;
  BENCH_CHECK(cudaMalloc(&logits, size_t(rows) * size_t(pt.context) * 4));
  mem.add(logits);
  uint32_t* status = nullptr;
  BENCH_CHECK(cudaMalloc(&status, size_t(rows) * 4));
  mem.add(status);
  const LogitsOutput out{logits, pt.context, status};
  // Work: every scored cell costs 2 H D flops; every request's keys are read once.
  double cells = 0, key_bytes = 0;
  const int64_t tok_bytes = value_bytes_per_token(h.format) + scale_bytes_per_token(h.format);
  if (pt.decode) {
    for (int32_t n = 0; n < pt.next_n; ++n) cells += double(copies) * double(std::max<int64_t>(0, pt.context - n));
    key_bytes = double(copies) * double(pt.context) * double(tok_bytes);
  } else {
    for (size_t r = 0; r < h.window_end.size(); ++r) cells += double(h.window_end[r] - h.window_start[r]);
    key_bytes = double(pt.context) * double(tok_bytes);
  }
  const double flops = 2.0 * h.num_heads * kHeadDim * cells;
  const double logits_bytes = double(rows) * double(pt.context) * 4;
  const Work work{flops, key_bytes, logits_bytes};
  if (!pt.fused_only) {
    for (ScoreAccuracy accuracy : {ScoreAccuracy::kProduction, ScoreAccuracy::kExact}) {
      p.accuracy = accuracy;
      if (int rc = time_point(pt, h, p, out, work, opt, base, gemm_tflops, copy_gbps, rotation); rc != 0) return rc;
    }
  }
  return time_fused(pt, h, p, out, work, opt, base, gemm_tflops, copy_gbps, mem, rotation);
}

// The benchmark's points: V3.2 and V4-Pro prefill and decode, V4-Flash fused; --full adds the context and batch sweeps
// (and GLM-5).
std::vector<ScorePoint> score_points(bool full) {
  std::vector<ScorePoint> points;
  for (const char* preset : {"v32", "v4-pro"}) {
    points.push_back({preset, false, 8192, 1, 65536});
    if (full) {
      for (int64_t c : {131072, 196608, 262144}) points.push_back({preset, false, 8192, 1, c});
    }
    points.push_back({preset, true, 64, 1, 65536});
    if (full) points.push_back({preset, true, 1, 1, 65536});
    if (full) {
      for (int64_t b : {1, 8, 32, 64, 128})
        for (int32_t n : {1, 2})
          for (int64_t c : {8192, 32768, 131072, 262144}) points.push_back({preset, true, b, n, c});
    }
  }
  if (full) points.push_back({"glm5", false, 8192, 1, 65536});  // H = 32, fp8, K = 2048
  // V4-Flash (K = 512): fused vs dense + TopK.
  points.push_back({"v4-flash", false, 8192, 1, 65536, true});
  points.push_back({"v4-flash", true, 64, 1, 65536, true});
  points.push_back({"v4-flash", true, 1, 1, 65536, true});
  if (!full) points.push_back({"v4-pro", false, 8192, 1, 196608, true});  // --full times it in full above
  return points;
}

}  // namespace

int bench_score(const BenchOptions& opt) {
  const std::vector<ScorePoint> points = score_points(opt.full);
  if (!opt.only.empty() && std::none_of(points.begin(), points.end(),
                                        [&](const ScorePoint& pt) { return pt.name() == opt.only; })) {
    std::fprintf(stderr, "--only %s: no such point%s\n", opt.only.c_str(),
                 opt.full ? "" : " (the context and batch sweeps and GLM-5 need --full)");
    return kBenchExitUsage;
  }
  if (!bench_device_usable("bench")) return kBenchExitNoDevice;
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double copy_gbps = copy_floor_gbps();
  const double gemm_tflops = fp8_gemm_floor_tflops();
  if (copy_gbps <= 0 || gemm_tflops <= 0) {
    std::fprintf(stderr, "floor measurement failed (copy %.1f GB/s, fp8 gemm %.1f TFLOP/s)\n", copy_gbps, gemm_tflops);
    return 1;
  }
  const nlohmann::json base = {{"gpu", prop.name}, {"git", opt.git}, {"sms", prop.multiProcessorCount}};
  {
    nlohmann::json j = base;
    j["op"] = "floors";
    j["copy_gbps"] = copy_gbps;
    j["fp8_gemm_tflops"] = gemm_tflops;
    j["fp8_gemm_shape"] = "8192^3 e4m3 -> bf16, cuBLASLt";
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);  // kept if a point later hangs and is killed
  }
  for (const ScorePoint& pt : points) {
    if (!opt.only.empty() && opt.only != pt.name()) continue;
    if (int rc = run_point(pt, opt, base, gemm_tflops, copy_gbps); rc != 0) return rc;
  }
  return 0;
}

}  // namespace flashindexer::bench
