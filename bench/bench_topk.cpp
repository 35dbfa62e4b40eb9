// flashindexer bench-topk: TopK over logits on the GPU, with the copy-bandwidth floor
// measured in the same run. One JSON line per point (schema shared with
// bench/torch_topk_baseline.py); each line carries the command that reproduces it.
#include "bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_data.cuh"
#include "bench_util.h"
#include "cuda/sm90/kernels/topk_over_logits.h"
#include "flashindexer/operators.h"

namespace flashindexer::bench {
namespace {

struct Point {
  const char* name;
  int64_t rows, width;
  int32_t k;
  bool all_dists;
};

}  // namespace

nlohmann::json topk_profile_json(const unsigned long long (&prof)[sm90::kTopKProfileSlots]) {
  const double ctas = double(prof[sm90::kTopKProfileCtas]);
  const char* names[] = {"ctas", "check", "wait", "sample", "select", "reduce", "order", "write", "sync"};
  static_assert(sizeof(names) / sizeof(names[0]) == sm90::kTopKProfileSlots);
  nlohmann::json per_cta = {{"ctas", ctas}};
  for (int i = 1; i < sm90::kTopKProfileSlots; ++i) per_cta[std::string(names[i]) + "_cycles"] = prof[i] / ctas;
  return per_cta;
}

bool bench_device_usable(const char* command) {
  const BackendInfo cuda = list_backends()[1];
  if (!cuda.usable) std::fprintf(stderr, "flashindexer: %s needs a usable CUDA device: %s\n", command, cuda.detail.c_str());
  return cuda.usable;
}

int bench_topk(const BenchOptions& opt) {
  const Point points[] = {
      {"prefill_196k", 8192, 196608, 1024, true}, {"prefill_64k", 8192, 65536, 2048, false},
      {"decode_b64_64k", 64, 65536, 2048, true},  {"decode_b1_256k", 1, 262144, 2048, true},
      {"decode_b128_128k", 128, 131072, 2048, false},
      // the path crossovers (heuristics.h plan_topk), gaussian only
      {"decode_b4_256k", 4, 262144, 2048, false}, {"decode_b8_64k", 8, 65536, 2048, false},
      {"decode_b32_64k", 32, 65536, 2048, false},
  };
  if (!opt.only.empty() &&
      std::none_of(std::begin(points), std::end(points), [&](const Point& pt) { return opt.only == pt.name; })) {
    std::fprintf(stderr, "--only %s: no such point\n", opt.only.c_str());
    return kBenchExitUsage;
  }
  if (!bench_device_usable("bench-topk")) return kBenchExitNoDevice;
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  // Floor: a device-to-device copy (bytes read + written) of 2 GiB.
  const size_t copy_bytes = size_t(1) << 31;
  const double copy_gbps = copy_floor_gbps(copy_bytes);
  if (copy_gbps <= 0) return 1;
  const double copy_ms = 2.0 * copy_bytes / (copy_gbps * 1e6);
  const nlohmann::json base = {{"gpu", prop.name}, {"git", opt.git}, {"sms", prop.multiProcessorCount}};
  {
    nlohmann::json j = base;
    j["op"] = "copy_floor";
    j["impl"] = "cudaMemcpy";
    j["bytes"] = 2 * copy_bytes;
    j["time_ms"] = copy_ms;
    j["gbps"] = copy_gbps;
    std::printf("%s\n", j.dump().c_str());
  }
  for (const Point& pt : points) {
    if (!opt.only.empty() && opt.only != pt.name) continue;
    const int64_t cells = pt.rows * pt.width;
    float* logits = nullptr;
    BENCH_CHECK(cudaMalloc(&logits, size_t(cells) * 4));
    std::vector<int32_t> ends(size_t(pt.rows), int32_t(pt.width)), zeros(size_t(pt.rows), 0);
    int32_t *d_start = nullptr, *d_end = nullptr, *d_batch = nullptr, *d_pos = nullptr, *d_cnt = nullptr;
    float* d_scores = nullptr;
    uint32_t* d_status = nullptr;
    BENCH_CHECK(cudaMalloc(&d_start, size_t(pt.rows) * 4));
    BENCH_CHECK(cudaMalloc(&d_end, size_t(pt.rows) * 4));
    BENCH_CHECK(cudaMalloc(&d_batch, size_t(pt.rows) * 4));
    BENCH_CHECK(cudaMalloc(&d_pos, size_t(pt.rows) * pt.k * 4));
    BENCH_CHECK(cudaMalloc(&d_scores, size_t(pt.rows) * pt.k * 4));
    BENCH_CHECK(cudaMalloc(&d_cnt, size_t(pt.rows) * 4));
    BENCH_CHECK(cudaMalloc(&d_status, size_t(pt.rows) * 4));
    BENCH_CHECK(cudaMemcpy(d_start, zeros.data(), zeros.size() * 4, cudaMemcpyHostToDevice));
    BENCH_CHECK(cudaMemcpy(d_batch, zeros.data(), zeros.size() * 4, cudaMemcpyHostToDevice));
    BENCH_CHECK(cudaMemcpy(d_end, ends.data(), ends.size() * 4, cudaMemcpyHostToDevice));
    TopKProblem p;
    p.logits = logits;
    p.logits_row_stride = pt.width;
    p.rows.num_rows = pt.rows;
    p.rows.num_requests = 1;
    p.rows.row_batch = d_batch;
    p.rows.window_start = d_start;
    p.rows.window_end = d_end;
    p.rows.max_context = pt.width;
    p.pages.page_size = 0;
    p.k = pt.k;
    TopKOutputs o;
    o.positions = d_pos;
    o.positions_row_stride = pt.k;
    o.scores = d_scores;
    o.scores_row_stride = pt.k;
    o.counts = d_cnt;
    o.status = d_status;
    Launch l;
    l.backend = Backend::kCuda;
    size_t ws_bytes = 0;
    Status st = workspace_size(p, l, &ws_bytes);
    if (!st.is_ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      return 1;
    }
    void* ws = nullptr;
    BENCH_CHECK(cudaMalloc(&ws, std::max<size_t>(ws_bytes, 16)));
    l.workspace = ws;
    l.workspace_bytes = ws_bytes;
    for (Dist d : kDists) {
      if (!pt.all_dists && d != Dist::kGaussian) continue;
      BENCH_CHECK(fill_logits(logits, pt.rows, pt.width, d, 42, nullptr));
      BENCH_CHECK(cudaDeviceSynchronize());
      Status run_status;
      const float ms = median_ms([&] { run_status = topk_over_logits(p, o, l); }, 3, opt.iters);
      BENCH_CHECK(cudaDeviceSynchronize());
      if (!run_status.is_ok()) {
        std::fprintf(stderr, "%s\n", run_status.to_string().c_str());
        return 1;
      }
      // The same call replayed from a CUDA graph: no host launch overhead in the time.
      const float graph_ms = median_graph_ms(
          [&](cudaStream_t s) {
            Launch lg = l;
            lg.stream = s;
            run_status = topk_over_logits(p, o, lg);
          },
          3, opt.iters);
      BENCH_CHECK(cudaDeviceSynchronize());
      if (!run_status.is_ok() || graph_ms < 0) {
        std::fprintf(stderr, "graph replay failed: %s\n", run_status.to_string().c_str());
        return 1;
      }
      const double bytes = double(cells) * 4;
      nlohmann::json j = base;
      j["op"] = "topk_over_logits";
      j["impl"] = "flashindexer";
      j["point"] = pt.name;
      j["dist"] = to_string(d);
      j["rows"] = pt.rows;
      j["width"] = pt.width;
      j["k"] = pt.k;
      j["time_ms"] = ms;
      j["graph_ms"] = graph_ms;
      j["gbps"] = bytes / (ms * 1e6);
      j["floor_ms"] = bytes / (copy_gbps * 1e6);
      j["workspace_bytes"] = ws_bytes;
      j["command"] = "flashindexer bench-topk --json --only " + std::string(pt.name);
      // Builds with -DFI_TOPK_PROFILE=1: one more call, its per-phase cycles per CTA.
      unsigned long long prof[sm90::kTopKProfileSlots];
      if (sm90::topk_profile(prof, true)) {
        run_status = topk_over_logits(p, o, l);
        BENCH_CHECK(cudaDeviceSynchronize());
        if (run_status.is_ok() && sm90::topk_profile(prof, true) && prof[sm90::kTopKProfileCtas] > 0) {
          j["profile_per_cta"] = topk_profile_json(prof);
        }
      }
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
    }
    cudaFree(ws);
    cudaFree(logits);
    cudaFree(d_start);
    cudaFree(d_end);
    cudaFree(d_batch);
    cudaFree(d_pos);
    cudaFree(d_scores);
    cudaFree(d_cnt);
    cudaFree(d_status);
  }
  return 0;
}

}  // namespace flashindexer::bench
