// GPU (label gpu): the sm_90a TopK over logits against the CPU reference, bit for bit.
#include <algorithm>
#include <initializer_list>
#include <limits>

#include "cuda/sm90/common/cluster_launch.h"
#include "gpu/gpu_util.h"

namespace fit {
namespace {

// A TopK problem held on the host; run() executes it on the CPU or the GPU.
struct LogitsCase {
  int64_t rows = 0, width = 0;  // width = max_context = logits row stride
  int32_t k = 0;
  OutputOrder order = OutputOrder::kPosition;
  RowForm form = RowForm::kRagged;
  int32_t next_n = 1, num_requests = 1;
  std::vector<float> logits;
  std::vector<int32_t> row_batch, start, end, context_lens;
  // page map (page_size 0 = none)
  int32_t page_size = 0;
  int64_t num_pages = 0, table_width = 0;
  std::vector<int32_t> table;

  TopKProblem problem(const float* lg, const int32_t* rb, const int32_t* ws, const int32_t* we, const int32_t* cl,
                      const int32_t* tb) const {
    TopKProblem p;
    p.logits = lg;
    p.logits_row_stride = width;
    p.rows.form = form;
    p.rows.num_requests = num_requests;
    p.rows.num_rows = form == RowForm::kRagged ? rows : 0;
    p.rows.row_batch = rb;
    p.rows.window_start = ws;
    p.rows.window_end = we;
    p.rows.next_n = next_n;
    p.rows.context_lens = cl;
    p.rows.max_context = width;
    p.pages.page_size = page_size;
    p.pages.num_pages = num_pages;
    p.pages.table = table.empty() ? nullptr : tb;
    p.pages.table_width = table_width;
    p.pages.table_row_stride = table_width;
    p.k = k;
    p.order = order;
    return p;
  }

  HostResults cpu() const {
    const TopKProblem p = problem(logits.data(), row_batch.data(), start.data(), end.data(), context_lens.data(),
                                  table.data());
    size_t bytes = 0;
    EXPECT_TRUE(workspace_size(p, fit::cpu(), &bytes).is_ok());
    std::vector<uint8_t> ws(bytes + 64);
    Launch l = fit::cpu();
    l.workspace = ws.data();
    l.workspace_bytes = bytes;
    HostResults r;
    r.reset(p.rows.rows(), k, page_size > 0);
    const Status st = topk_over_logits(p, r.outputs(), l);
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    return r;
  }
};

// Device copies of a case plus poisoned outputs.
struct DeviceCase {
  DeviceVector<float> logits;
  DeviceVector<int32_t> rb, ws, we, cl, table;
  DeviceVector<int32_t> positions, slots, counts;
  DeviceVector<float> scores;
  DeviceVector<uint32_t> status;
  DeviceVector<uint8_t> workspace;
  TopKProblem p;
  TopKOutputs o;
  Launch l;

  explicit DeviceCase(const LogitsCase& c)
      : logits(c.logits), rb(c.row_batch), ws(c.start), we(c.end), cl(c.context_lens), table(c.table),
        positions(size_t(c.rows * c.k), 0x7F), slots(size_t(c.rows * c.k), 0x7F), counts(size_t(c.rows), 0x7F),
        scores(size_t(c.rows * c.k), 0x7F), status(size_t(c.rows), 0x7F) {
    p = c.problem(logits.get(), rb.get(), ws.get(), we.get(), cl.get(), table.get());
    o.positions = positions.get();
    o.positions_row_stride = c.k;
    o.slots = c.page_size > 0 ? slots.get() : nullptr;
    o.slots_row_stride = c.k;
    o.scores = scores.get();
    o.scores_row_stride = c.k;
    o.counts = counts.get();
    o.status = status.get();
    l.backend = Backend::kCuda;
    size_t bytes = 0;
    const Status st = workspace_size(p, l, &bytes);
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    workspace.assign(std::vector<uint8_t>(bytes, 0xCD));
    l.workspace = workspace.get();
    l.workspace_bytes = bytes;
  }

  Status run(cudaStream_t stream = nullptr) {
    l.stream = stream;
    return topk_over_logits(p, o, l);
  }

  HostResults results(const LogitsCase& c) const {
    HostResults r;
    r.rows = c.rows;
    r.k = c.k;
    r.positions = positions.to_host();
    if (c.page_size > 0) r.slots = slots.to_host();
    r.scores = scores.to_host();
    r.counts = counts.to_host();
    r.status = status.to_host();
    return r;
  }
};

void expect_gpu_matches_cpu(const LogitsCase& c, const std::string& what) {
  DeviceCase d(c);
  const Status st = d.run();
  ASSERT_TRUE(st.is_ok()) << what << ": " << st.to_string();
  GPU_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(first_difference(c.cpu(), d.results(c)), "") << what;
}

LogitsCase rows_case(Dist dist, int64_t rows, int64_t width, int32_t k, uint32_t seed) {
  LogitsCase c;
  c.rows = rows;
  c.width = width;
  c.k = k;
  for (int64_t r = 0; r < rows; ++r) {
    const auto row = make_row(dist, width, seed + uint32_t(r));
    c.logits.insert(c.logits.end(), row.begin(), row.end());
    c.row_batch.push_back(0);
    // Mostly full windows; some with nonzero starts, some short, one empty.
    const int64_t kind = r % 5;
    const int64_t s = kind == 1 ? 3 : (kind == 3 ? width / 3 : 0);
    const int64_t e = kind == 2 ? std::min<int64_t>(width, k + 1) : (kind == 4 && r == 4 ? s : width - (r % 2));
    c.start.push_back(int32_t(s));
    c.end.push_back(int32_t(e));
  }
  return c;
}

TEST(GpuTopK, MatchesCpuOnAdversarialRowsManyRows) {
  SKIP_WITHOUT_GPU();
  for (Dist dist : kDists)
    for (int32_t k : {1, 64, 512, 2048})
      for (OutputOrder order : {OutputOrder::kPosition, OutputOrder::kRank}) {
        LogitsCase c = rows_case(dist, 300, 5000, k, 11 * uint32_t(k));
        c.order = order;
        expect_gpu_matches_cpu(c, "dist " + std::to_string(int(dist)) + " k " + std::to_string(k));
      }
}

TEST(GpuTopK, MatchesCpuOnLongSplitRows) {
  SKIP_WITHOUT_GPU();
  for (Dist dist : kDists)
    for (int32_t k : {7, 1024, 2048})
      for (int64_t width : {int64_t(k) - 1, int64_t(k), int64_t(k) + 1, int64_t(70001), int64_t(262144)}) {
        if (width < 1) continue;
        LogitsCase c = rows_case(dist, 3, width, k, 5 + uint32_t(width));
        c.order = width % 2 ? OutputOrder::kRank : OutputOrder::kPosition;
        expect_gpu_matches_cpu(c, "dist " + std::to_string(int(dist)) + " k " + std::to_string(k) + " width " +
                                      std::to_string(width));
      }
}

// rows_case rows of `width` positions on every distribution, for each K of ks (seed + K;
// the first K in rank order, the others by position).
void expect_matches_on_every_dist(int64_t rows, int64_t width, std::initializer_list<int32_t> ks, uint32_t seed) {
  for (Dist dist : kDists)
    for (int32_t k : ks) {
      LogitsCase c = rows_case(dist, rows, width, k, seed + uint32_t(k));
      c.order = k == *ks.begin() ? OutputOrder::kRank : OutputOrder::kPosition;
      expect_gpu_matches_cpu(c, "dist " + std::to_string(int(dist)) + " k " + std::to_string(k));
    }
}

// Decode-shaped rows: 5 .. SMs / 2 rows of 32,768 .. 131,072 positions (kStaged, a cluster of
// 2 .. 8 CTAs per row), K at both ends, both orders.
TEST(GpuTopK, MatchesCpuOnDecodeShapedRows) {
  SKIP_WITHOUT_GPU();
  expect_matches_on_every_dist(64, 65536, {512, 2048}, 31);
  expect_matches_on_every_dist(8, 40000, {2048}, 37);
}

// kStaged (rows in position order over a cluster of C CTAs, chunks staged in shared memory):
// C = 8 (1 and 2 rows of 262,144: unaligned start and end in row 1) and C = 4 (20 rows of
// 131,072) on every distribution, K at both ends; and a plateau at the top of one chunk,
// more candidates than that CTA holds, so CTA 0 streams the row alone.
TEST(GpuTopK, MatchesCpuOnStagedClusterRows) {
  SKIP_WITHOUT_GPU();
  for (Dist dist : kDists)
    for (int32_t k : {512, 2048})
      for (int64_t rows : {int64_t(1), int64_t(2), int64_t(20)}) {
        const LogitsCase c = rows_case(dist, rows, rows == 20 ? 131072 : 262144, k, 53 + uint32_t(k + rows));
        expect_gpu_matches_cpu(c, "dist " + std::to_string(int(dist)) + " k " + std::to_string(k) + " rows " +
                                      std::to_string(rows));
      }
  LogitsCase c = rows_case(Dist::kGaussian, 1, 262144, 2048, 59);
  for (int64_t s = 262144 - 20000; s < 262144; ++s) c.logits[size_t(s)] = 5.0f;
  expect_gpu_matches_cpu(c, "a plateau of 20,000 keys at the top of the last chunk");
}

// Rows between the grid-wide select and one CTA per row, wider than the rows path takes
// (heuristics.h kTopKRowsMaxWidth): local top K per split, merged.
TEST(GpuTopK, MatchesCpuOnSplitRows) {
  SKIP_WITHOUT_GPU();
  expect_matches_on_every_dist(12, 140001, {7, 2048}, 77);
}

// Few long rows where the threshold lands: in a NaN plateau, among ties just within the
// grid-wide select's tie list (4,096 keys) and just beyond it (its finish re-reads the row);
// rows of 100,000 positions take kStaged, rows of 300,000 the grid-wide select.
TEST(GpuTopK, SpreadRowsWithThresholdInNaNsOrTies) {
  SKIP_WITHOUT_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t width : {int64_t(100000), int64_t(300000)})
    for (int32_t ties : {0, 4000, 4096, 4097, 5000})
      for (OutputOrder order : {OutputOrder::kPosition, OutputOrder::kRank}) {
        LogitsCase c = rows_case(Dist::kGaussian, 2, width, 2048, 41 + uint32_t(ties));
        c.order = order;
        for (int64_t r = 0; r < c.rows; ++r) {
          c.start[size_t(r)] = int32_t(r);  // unaligned head in row 1
          c.end[size_t(r)] = int32_t(c.width);
          float* row = c.logits.data() + r * c.width;
          if (ties == 0) {  // every 97th a number, the rest NaN: the K-th key is a NaN
            for (int64_t s = 0; s < c.width; ++s)
              if (s % 97 != 0) row[s] = nan;
            continue;
          }
          for (int64_t s = 0; s < c.width; ++s) row[s] *= 0.01f;  // all below 1
          for (int i = 0; i < 1000; ++i) row[19 * i + 11] = 2.0f;  // 1,000 above the ties
          for (int i = 0; i < ties; ++i) row[19 * i + 7] = 1.0f;   // the K-th key among `ties` equal ones
        }
        expect_gpu_matches_cpu(c, "width " + std::to_string(width) + " ties " + std::to_string(ties) + " order " +
                                      std::to_string(int(order)));
      }
}

// Ascending position through the bitmap of the window (block_select.cuh, windows up to
// 262,144 positions) and through the radix sort beyond it, on every path: the grid-wide
// select (2 rows), split + merge (12 rows), one CTA per row (264 rows = 2 x 132 SMs).
TEST(GpuTopK, PositionOrderOnBothSidesOfTheBitmapLimit) {
  SKIP_WITHOUT_GPU();
  for (int64_t rows : {int64_t(2), int64_t(12), int64_t(264)})
    for (int64_t width : {int64_t(262144), int64_t(262145), int64_t(266000)}) {
      if (rows == 264 && width == 262145) continue;  // the largest case once on each side
      LogitsCase c = rows_case(Dist::kGaussian, rows, width, 2048, 3 + uint32_t(rows));
      for (int64_t r = 0; r < rows; ++r) {  // full windows, ends on both sides of the limit
        c.start[size_t(r)] = 0;
        c.end[size_t(r)] = int32_t(width - (r % 2));
      }
      expect_gpu_matches_cpu(c, "rows " + std::to_string(rows) + " width " + std::to_string(width));
    }
}

TEST(GpuTopK, DecodeRowsSlotsAndRowStatus) {
  SKIP_WITHOUT_GPU();
  // 16 requests (32 rows) of 40,000 positions take kStaged (C = 2 on the H200), the others one
  // CTA per row.
  for (int64_t requests : {int64_t(2), int64_t(16), int64_t(64), int64_t(300)}) {
    LogitsCase c;
    c.form = RowForm::kDecode;
    c.next_n = 2;
    c.num_requests = int32_t(requests);
    c.rows = requests * 2;
    c.width = requests == 16 ? 40000 : 20000;
    c.k = 512;
    c.page_size = 64;
    c.table_width = (c.width + 63) / 64;
    c.num_pages = requests * c.table_width;
    for (int64_t b = 0; b < requests; ++b) {
      c.context_lens.push_back(int32_t(b == 1 ? c.width + 1 : (b * 7919) % c.width));  // request 1 fails
      for (int64_t i = 0; i < c.table_width; ++i) c.table.push_back(int32_t((b * c.table_width + i * 7) % c.num_pages));
    }
    c.table[size_t(c.table_width * 0 + 5)] = -3;  // request 0: a bad entry (fails if its window reaches page 5)
    c.context_lens[0] = 5000;
    for (int64_t r = 0; r < c.rows; ++r) {
      const auto row = make_row(Dist::kGaussian, c.width, 99 + uint32_t(r));
      c.logits.insert(c.logits.end(), row.begin(), row.end());
    }
    expect_gpu_matches_cpu(c, "decode requests " + std::to_string(requests));
  }
}

TEST(GpuTopK, DenseLogitsOfEveryGenerator) {
  SKIP_WITHOUT_GPU();
  for (Generator g : kAllGenerators) {
    SyntheticSpec s = small_spec(g);
    s.rows = 40;
    s.requests = 4;
    s.context = 3000;
    s.k = 1024;
    const HostProblem hp = make(s);
    const HostResults d = dense_topk(hp, true);
    LogitsCase c;
    c.rows = hp.rows();
    c.width = hp.max_context;
    c.k = hp.k;
    c.logits = d.logits;
    c.row_batch = hp.row_batch;
    c.start = hp.window_start;
    c.end = hp.window_end;
    c.num_requests = hp.num_requests;
    c.page_size = hp.page_size;
    c.num_pages = hp.num_pages;
    c.table_width = hp.table_width;
    c.table = hp.page_table;
    expect_gpu_matches_cpu(c, to_string(g));
    EXPECT_EQ(first_difference(c.cpu(), d), "") << "CPU TopK of the CPU dense logits is the reference";
  }
}

// Small cases of every path (whole rows, the grid-wide select, split rows + merge, kStaged)
// for compute-sanitizer.
TEST(GpuTopK, SanitizerSmallCases) {
  SKIP_WITHOUT_GPU();
  LogitsCase whole = rows_case(Dist::kSpecials, 270, 3000, 512, 1);
  whole.page_size = 64;
  whole.table_width = (whole.width + 63) / 64;
  whole.num_pages = whole.table_width;
  for (int64_t i = 0; i < whole.table_width; ++i) whole.table.push_back(int32_t(whole.table_width - 1 - i));
  expect_gpu_matches_cpu(whole, "whole rows");
  LogitsCase grid = rows_case(Dist::kAscending, 2, 270000, 2048, 2);
  grid.order = OutputOrder::kRank;
  expect_gpu_matches_cpu(grid, "grid-wide select");
  LogitsCase staged_rank = rows_case(Dist::kGaussian, 3, 40000, 1024, 7);
  staged_rank.order = OutputOrder::kRank;
  expect_gpu_matches_cpu(staged_rank, "kStaged, by rank");
  expect_gpu_matches_cpu(rows_case(Dist::kOffset, 10, 140000, 2048, 3), "split rows");
  expect_gpu_matches_cpu(rows_case(Dist::kZeroPlateau, 10, 33000, 2048, 4), "few whole rows (kStaged)");
  expect_gpu_matches_cpu(rows_case(Dist::kGaussian, 3, 40000, 1024, 5), "kStaged, guessed");
  LogitsCase below_zero = rows_case(Dist::kGaussian, 3, 40001, 1024, 6);  // tau < 0, partial warp runs
  for (float& v : below_zero.logits) v -= 100.0f;
  expect_gpu_matches_cpu(below_zero, "kStaged, scores below 0");
}

// Spikes exactly where the selector samples its threshold guess: the guess is far
// too high, fewer than K keys beat it, and the exact fallback must take over.
TEST(GpuTopK, SampledGuessFallsBackExactly) {
  SKIP_WITHOUT_GPU();
  for (int64_t rows : {int64_t(1), int64_t(40), int64_t(300)}) {
    LogitsCase c = rows_case(Dist::kGaussian, rows, 131072, 2048, 23);
    for (int64_t r = 0; r < rows; ++r) {
      c.start[size_t(r)] = 0;
      c.end[size_t(r)] = int32_t(c.width);
      for (int64_t s = 0; s < c.width; s += 64) c.logits[size_t(r * c.width + s)] = 10.0f + float(s % 977) * 1e-3f;
    }
    expect_gpu_matches_cpu(c, "rows " + std::to_string(rows));
  }
}

TEST(GpuTopK, TwentyRerunsBitIdentical) {
  SKIP_WITHOUT_GPU();
  for (int64_t rows : {int64_t(2), int64_t(20), int64_t(400)}) {  // kStaged (C = 8, 4), rows kernel
    const LogitsCase c = rows_case(Dist::kZeroPlateau, rows, 40000, 2048, 3);
    DeviceCase d(c);
    ASSERT_TRUE(d.run().is_ok());
    GPU_CHECK(cudaDeviceSynchronize());
    const HostResults first = d.results(c);
    EXPECT_EQ(first_difference(c.cpu(), first), "");
    cudaStream_t stream;
    GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(d.run(i % 2 ? stream : nullptr).is_ok());
      GPU_CHECK(cudaDeviceSynchronize());
      ASSERT_EQ(first_difference(first, d.results(c)), "") << "rerun " << i;
    }
    GPU_CHECK(cudaStreamDestroy(stream));
  }
}

TEST(GpuTopK, GraphReplayWithMutatedWindows) {
  SKIP_WITHOUT_GPU();
  for (int64_t rows : {int64_t(3), int64_t(20), int64_t(300)}) {
    LogitsCase c = rows_case(Dist::kGaussian, rows, rows == 20 ? 40000 : 30000, 1024, 17);  // 20: kStaged
    DeviceCase d(c);
    cudaStream_t stream;
    GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    GPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const Status st = d.run(stream);
    GPU_CHECK(cudaStreamEndCapture(stream, &graph));
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 3; ++replay) {
      for (int64_t r = 0; r < rows; ++r) {  // new windows within max_context
        c.start[size_t(r)] = int32_t((r * 131 + replay * 977) % 20000);
        c.end[size_t(r)] = int32_t(std::min<int64_t>(c.width, c.start[size_t(r)] + 500 + (r * 61 + replay * 4001) % 9000));
      }
      if (replay == 2) c.end[0] = int32_t(c.width + 5);  // a failing row under replay
      GPU_CHECK(cudaMemcpy(d.ws.get(), c.start.data(), c.start.size() * 4, cudaMemcpyHostToDevice));
      GPU_CHECK(cudaMemcpy(d.we.get(), c.end.data(), c.end.size() * 4, cudaMemcpyHostToDevice));
      GPU_CHECK(cudaGraphLaunch(exec, stream));
      GPU_CHECK(cudaStreamSynchronize(stream));
      EXPECT_EQ(first_difference(c.cpu(), d.results(c)), "") << "replay " << replay;
    }
    GPU_CHECK(cudaGraphExecDestroy(exec));
    GPU_CHECK(cudaGraphDestroy(graph));
    GPU_CHECK(cudaStreamDestroy(stream));
  }
}

}  // namespace
}  // namespace fit

namespace fit {
namespace {

// Host only (no GPU needed; CUDA builds run it in CI): the configuration that the kStaged
// TopK and the fused decode clusters launch with (sm90/common/cluster_launch.h).
TEST(ClusterLaunch, ConfigNamesTheGridTheClusterAndTheStream) {
  cudaLaunchAttribute attr;
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(uintptr_t{0x1234});
  const cudaLaunchConfig_t cfg = sm90::cluster_config(attr, 64 * 8, 512, 200 * 1024, 8, stream);
  EXPECT_EQ(cfg.gridDim.x, 512u);
  EXPECT_EQ(cfg.gridDim.y, 1u);
  EXPECT_EQ(cfg.blockDim.x, 512u);
  EXPECT_EQ(cfg.blockDim.y, 1u);
  EXPECT_EQ(cfg.dynamicSmemBytes, size_t{200 * 1024});
  EXPECT_EQ(cfg.stream, stream);
  ASSERT_EQ(cfg.numAttrs, 1u);
  ASSERT_EQ(cfg.attrs, &attr);
  EXPECT_EQ(attr.id, cudaLaunchAttributeClusterDimension);
  EXPECT_EQ(attr.val.clusterDim.x, 8u);
  EXPECT_EQ(attr.val.clusterDim.y, 1u);
  EXPECT_EQ(attr.val.clusterDim.z, 1u);
  EXPECT_EQ(cfg.gridDim.x % attr.val.clusterDim.x, 0u);  // whole clusters
}

}  // namespace
}  // namespace fit
