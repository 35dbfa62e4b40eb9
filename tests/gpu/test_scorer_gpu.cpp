// GPU (label gpu): the sm_90a dense-logits operator (paged scorer) against the fp64
// oracle (CONTRACT §4), the CPU reference (windows, -inf cells, status), and itself
// (reruns, streams, graph replays).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "gpu/gpu_util.h"
#include "oracle/fp64_oracle.h"

namespace fit {
namespace {

struct Logits {
  int64_t width = 0;
  std::vector<float> v;        // [rows, width]
  std::vector<uint32_t> status;  // [rows]
};

Logits gpu_logits(const IndexerProblem& p, cudaStream_t stream = nullptr) {
  Logits out;
  const int64_t rows = p.rows.rows();
  out.width = p.rows.max_context;
  DeviceVector<float> lg(size_t(rows * out.width), 0x7F);  // poison: 3.4e38
  DeviceVector<uint32_t> st(size_t(rows), 0x7F);
  const LogitsOutput o{lg.get(), out.width, st.get()};
  const Status s = dense_logits(p, o, gpu_launch(stream));
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  out.v = lg.to_host();
  out.status = st.to_host();
  return out;
}

Logits cpu_logits(const HostProblem& h) {
  const IndexerProblem p = h.view();
  Logits out;
  out.width = p.rows.max_context;
  out.v.assign(size_t(p.rows.rows() * out.width), 0.0f);
  out.status.assign(size_t(p.rows.rows()), 0xFFFFFFFFu);
  size_t bytes = 0;
  EXPECT_TRUE(workspace_size(p, Operator::kDenseLogits, cpu(), &bytes).is_ok());
  std::vector<uint8_t> ws(bytes + 64);
  Launch l = cpu();
  l.workspace = ws.data();
  l.workspace_bytes = bytes;
  const Status s = dense_logits(p, LogitsOutput{out.v.data(), out.width, out.status.data()}, l);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out;
}

// Counts cells that break CONTRACT §4 against the oracle, or the CPU reference's
// window / -inf / status pattern. Returns the worst |gpu - exact| / M seen.
struct Check {
  int64_t bad = 0, scored = 0;
  double worst = 0;
  std::string first;
};

Check check_against_oracle(const HostProblem& h, const Logits& g, const Logits& c, double rel = 2e-4) {
  const IndexerProblem p = h.view();
  Check k;
  for (int64_t r = 0; r < p.rows.rows(); ++r) {
    const bool failed = c.status[size_t(r)] & row_status::kFailMask;
    auto note = [&](int64_t s, const std::string& why) {
      if (k.bad++ == 0) k.first = "row " + std::to_string(r) + " position " + std::to_string(s) + ": " + why;
    };
    if (g.status[size_t(r)] != c.status[size_t(r)])
      note(-1, "status " + std::to_string(g.status[size_t(r)]) + " vs cpu " + std::to_string(c.status[size_t(r)]));
    const oracle::Window w = oracle::window(p.rows, r);
    for (int64_t s = 0; s < g.width; ++s) {
      const float v = g.v[size_t(r * g.width + s)];
      const bool inside = !failed && s >= w.start && s < w.end;
      if (!inside) {
        if (!(std::isinf(v) && v < 0)) note(s, "expected -inf, got " + std::to_string(v));
        continue;
      }
      ++k.scored;
      const oracle::Exact e = oracle::score(p, r, s);
      if (std::isnan(e.score) || std::isinf(e.score)) {
        // Infinite weights make M infinite: a head's dot that rounds across 0 turns
        // inf * relu(dot) into NaN (inf * 0) or back, so either is within the bound.
        const bool inf_m = std::isinf(e.m);
        const bool same = std::isnan(e.score) ? std::isnan(v) || (inf_m && std::isinf(v))
                                              : v == e.score || (inf_m && std::isnan(v));
        if (!same) note(s, "expected " + std::to_string(e.score) + ", got " + std::to_string(v));
        continue;
      }
      const double err = std::fabs(double(v) - e.score);
      const double bound = rel * e.m;
      if (!(err <= bound)) note(s, "score " + std::to_string(v) + " exact " + std::to_string(e.score) + " M " +
                                       std::to_string(e.m));
      if (e.m > 0) k.worst = std::max(k.worst, err / e.m);
    }
  }
  return k;
}

// rel: the bound |score - exact| <= rel * M; 0 means the mode's contract bound.
void expect_matches_oracle(const HostProblem& h, const std::string& what, int64_t extra_pages = 0,
                           ScoreAccuracy accuracy = ScoreAccuracy::kExact, double rel = 0) {
  DeviceProblem d(h, extra_pages);
  ASSERT_NE(d.pool.ptr, nullptr) << what << ": device pool allocation";
  d.p.accuracy = accuracy;
  const Logits g = gpu_logits(d.p);
  const Logits c = cpu_logits(h);
  if (rel == 0) rel = score_error_bound(accuracy);
  const Check k = check_against_oracle(h, g, c, rel);
  EXPECT_EQ(k.bad, 0) << what << ": " << k.bad << " bad cells of " << k.scored << "; first: " << k.first;
  EXPECT_GT(k.scored, 0) << what;
  std::printf("[ oracle   ] %-44s scored %8lld  worst |err|/M %.3g\n", what.c_str(), (long long)k.scored, k.worst);
}

SyntheticSpec spec(CacheFormat f, Generator g, int64_t rows, int32_t requests, int64_t context, uint64_t seed) {
  return gpu_spec(f, g, rows, requests, context, 64, seed);
}

TEST(GpuScorer, MatchesOracleOnEveryGenerator) {
  SKIP_WITHOUT_GPU();
  for (CacheFormat f : kFormats)
    for (Generator g : kAllGenerators) {
      const HostProblem h = make(spec(f, g, 22, 2, 1300, 7 + uint64_t(g)));
      expect_matches_oracle(h, std::string(name(f)) + " " + to_string(g));
    }
}

// mxfp4 decode groups of N <= 128 columns (next_n 1, 2; H 64, 32) take the register-key path
// (keys converted by the consumers); every generator, including blocks scaled 2^-28 (ulp).
TEST(GpuScorer, RegisterKeyPathMatchesOracleOnEveryGenerator) {
  SKIP_WITHOUT_GPU();
  for (Generator g : kAllGenerators)
    for (int32_t next_n : {1, 2}) {
      SyntheticSpec d = spec(CacheFormat::kMxfp4, g, 0, 3, 2600, 90 + uint64_t(g));
      d.form = RowForm::kDecode;
      d.next_n = next_n;
      d.num_heads = g == Generator::kTies ? 32 : 64;
      expect_matches_oracle(make(d), "mxfp4 decode next_n=" + std::to_string(next_n) + " H=" +
                                         std::to_string(d.num_heads) + " " + to_string(g));
    }
  // Pages of 128 tokens (a tile starts at token 0 or 64 of its page) at a padded stride.
  SyntheticSpec d = spec(CacheFormat::kMxfp4, Generator::kStructured, 0, 3, 2600, 99);
  d.form = RowForm::kDecode;
  d.next_n = 2;
  d.page_size = 128;
  d.page_stride = page_payload_bytes(CacheFormat::kMxfp4, 128) + 208;
  d.weight_type = WeightType::kBF16;
  expect_matches_oracle(make(d), "mxfp4 decode page 128, padded stride, bf16");
}

// The spread (largest minus least block exponent) of every token in the pool and, apart,
// of every query head.
struct Spreads {
  int keys = 0, heads = 0;
};
Spreads max_spreads(const HostProblem& h) {
  auto spread = [](const uint8_t* s) {
    return int(*std::max_element(s, s + 4)) - int(*std::min_element(s, s + 4));
  };
  Spreads out;
  for (int64_t pg = 0; pg < h.num_pages; ++pg)
    for (int32_t t = 0; t < h.page_size; ++t)
      out.keys = std::max(out.keys, spread(h.pool.data() + pg * h.page_stride + h.page_size * 64 + t * 4));
  for (size_t i = 0; i + 4 <= h.q_scale.size(); i += 4) out.heads = std::max(out.heads, spread(&h.q_scale[i]));
  return out;
}

// mxfp4 groups of N = 256 columns (prefill) take the integer path: s8 values shifted to
// each vector's least block exponent, exact int32 dot products, where every block exponent
// lies within 3 of it. A tile holding a token that spreads wider is stored unshifted and
// scored block by block; a group with a query head that spreads wider takes the E5M2 path.
// Decode groups (N <= 128) take the E5M2 register-key path, whose block factors take any
// spread; the same inputs check it there. Gaussian vectors quantized as the model does
// spread by 2 at most, so this test widens some tokens and one head on purpose, both H,
// prefill and decode (next_n 1 and 2).
TEST(GpuScorer, IntegerPathWithWideTokensAndQueryHeads) {
  SKIP_WITHOUT_GPU();
  for (int32_t heads : {64, 32})
    for (int32_t next_n : {0, 1, 2}) {  // 0: prefill
      SyntheticSpec sp = spec(CacheFormat::kMxfp4, Generator::kGaussian, next_n ? 0 : 40, next_n ? 3 : 2,
                              next_n ? 5000 : 1300, 31 + uint64_t(next_n));
      if (next_n) {
        sp.form = RowForm::kDecode;
        sp.next_n = next_n;
      }
      sp.num_heads = heads;
      const HostProblem narrow = make(sp);
      const Spreads s0 = max_spreads(narrow);
      EXPECT_LE(s0.keys, 3);
      EXPECT_LE(s0.heads, 3);
      const std::string h =
          "H=" + std::to_string(heads) + (next_n ? " decode next_n=" + std::to_string(next_n) : " prefill");
      const std::string path = next_n ? "mxfp4 register-key path" : "mxfp4 integer path";
      expect_matches_oracle(narrow, path + ", every spread <= 3, " + h);

      HostProblem keys = narrow;
      widen_key_tokens(keys);
      EXPECT_GT(max_spreads(keys).keys, 3);
      expect_matches_oracle(keys, path + ", wide tokens, " + h);

      HostProblem head = narrow;  // prefill: its group scores through the E5M2 path
      widen_query_head(head, std::min<int64_t>(9, head.rows() - 1));
      EXPECT_GT(max_spreads(head).heads, 3);
      expect_matches_oracle(head, (next_n ? path : std::string("mxfp4 E5M2 path")) + ", a wide query head, " + h);
    }
}

TEST(GpuScorer, ShapesAndLayouts) {
  SKIP_WITHOUT_GPU();
  for (CacheFormat f : kFormats) {
    SyntheticSpec s = spec(f, Generator::kGaussian, 13, 2, 900, 31);
    s.num_heads = 32;  // R = 8 rows per group
    expect_matches_oracle(make(s), std::string(name(f)) + " H=32, 13 rows");
    s = spec(f, Generator::kStructured, 10, 3, 1000, 32);
    s.page_size = 128;
    s.page_stride = page_payload_bytes(f, 128) + 208;  // interleaved layers
    s.weight_type = WeightType::kBF16;
    s.sliding_window = 300;  // nonzero starts
    expect_matches_oracle(make(s), std::string(name(f)) + " page 128, padded stride, bf16, sliding");
    s = spec(f, Generator::kGaussian, 9, 1, 700, 33);
    s.contiguous = true;
    expect_matches_oracle(make(s), std::string(name(f)) + " contiguous cache");
    for (int32_t next_n = 1; next_n <= 4; ++next_n)
      for (int32_t heads : {64, 32}) {
        SyntheticSpec d = spec(f, Generator::kGaussian, 0, 3, next_n == 1 ? 9000 : 2500, 40 + uint64_t(next_n));
        d.form = RowForm::kDecode;
        d.next_n = next_n;
        d.num_heads = heads;
        expect_matches_oracle(make(d), std::string(name(f)) + " decode next_n=" + std::to_string(next_n) +
                                           " H=" + std::to_string(heads));
      }
  }
}

// fp8 token scales below zero: relu(c x) = c min(x, 0) for c < 0 (a separate path).
TEST(GpuScorer, NegativeFp8KeyScales) {
  SKIP_WITHOUT_GPU();
  HostProblem h = make(spec(CacheFormat::kFp8E4M3, Generator::kGaussian, 10, 2, 700, 45));
  for (int64_t pg = 0; pg < h.num_pages; ++pg)
    for (int32_t t = 0; t < h.page_size; t += 3) {
      uint8_t* sc = h.pool.data() + pg * h.page_stride + int64_t(h.page_size) * 128 + t * 4;
      float v;
      std::memcpy(&v, sc, 4);
      v = -v;
      std::memcpy(sc, &v, 4);
    }
  expect_matches_oracle(h, "fp8 negative key scales");
}

// The production mode (the default: one FP8 WGMMA chain, Hopper's FP8 accumulator): CONTRACT
// §4's 2^-8 * M on every generator. The fp8 blocks of wide dynamic range come closest: the
// accumulator drops the products below 2^-13 of a k32 block's largest, at most 32 of them.
TEST(GpuScorer, ProductionModeMeetsItsBound) {
  SKIP_WITHOUT_GPU();
  for (CacheFormat f : kFormats)
    for (Generator g : kAllGenerators)
      expect_matches_oracle(make(spec(f, g, 22, 2, 1300, 200 + uint64_t(g))),
                            std::string(name(f)) + " production " + to_string(g), 0, ScoreAccuracy::kProduction);
  for (CacheFormat f : kFormats) {
    SyntheticSpec d = spec(f, Generator::kStructured, 0, 2, 5000, 210);
    d.form = RowForm::kDecode;
    d.next_n = 2;
    expect_matches_oracle(make(d), std::string(name(f)) + " production decode", 0, ScoreAccuracy::kProduction);
  }
}

TEST(GpuScorer, UnalignedQueries) {
  SKIP_WITHOUT_GPU();
  for (CacheFormat f : kFormats) {
    const HostProblem h = make(spec(f, Generator::kGaussian, 8, 1, 600, 50));
    DeviceProblem d(h);
    DeviceVector<uint8_t> shifted(h.q.size() + 16, 0);
    ASSERT_EQ(cudaMemcpy(shifted.ptr + 4, h.q.data(), h.q.size(), cudaMemcpyHostToDevice), cudaSuccess);
    d.p.queries.q = shifted.ptr + 4;  // no 16-byte vector loads possible
    const Logits a = gpu_logits(d.p);
    const DeviceProblem aligned(h);
    const Logits b = gpu_logits(aligned.p);
    EXPECT_EQ(std::memcmp(a.v.data(), b.v.data(), a.v.size() * 4), 0) << name(f);
  }
}

// All values 1.0, all scales 2^0, weights 1: every score is exactly 64 * 128 = 8192.
TEST(GpuScorer, ConstantCaseIsExact) {
  SKIP_WITHOUT_GPU();
  for (CacheFormat f : kFormats) {
    HostProblem h = make(spec(f, Generator::kGaussian, 12, 2, 800, 60));
    const bool mx = f == CacheFormat::kMxfp4;
    std::fill(h.q.begin(), h.q.end(), mx ? uint8_t(0x22) : uint8_t(0x38));  // E2M1 1.0 pairs | e4m3 1.0
    std::fill(h.q_scale.begin(), h.q_scale.end(), uint8_t(127));
    std::vector<float> ones(h.weights.size() / 4, 1.0f);
    std::memcpy(h.weights.data(), ones.data(), h.weights.size());
    const int64_t vb = value_bytes_per_token(f);
    for (int64_t pg = 0; pg < h.num_pages; ++pg) {
      uint8_t* base = h.pool.data() + pg * h.page_stride;
      std::fill(base, base + h.page_size * vb, mx ? uint8_t(0x22) : uint8_t(0x38));
      for (int32_t t = 0; t < h.page_size; ++t) {
        uint8_t* sc = base + h.page_size * vb + t * 4;
        if (mx) {
          std::fill(sc, sc + 4, uint8_t(127));
        } else {
          const float one = 1.0f;
          std::memcpy(sc, &one, 4);
        }
      }
    }
    for (ScoreAccuracy acc : kAccuracies) {  // CONTRACT §4: short exact sums are exact in both modes
      h.accuracy = acc;
      const DeviceProblem d(h);
      const Logits g = gpu_logits(d.p);
      const IndexerProblem p = h.view();
      int64_t exact = 0;
      for (int64_t r = 0; r < p.rows.rows(); ++r) {
        const oracle::Window w = oracle::window(p.rows, r);
        for (int64_t s = w.start; s < w.end; ++s) {
          ASSERT_EQ(g.v[size_t(r * g.width + s)], 8192.0f)
              << name(f) << " " << to_string(acc) << " row " << r << " position " << s;
          ++exact;
        }
      }
      EXPECT_GT(exact, 0);
    }
  }
}

TEST(GpuScorer, PoolBeyond4GiB) {
  SKIP_WITHOUT_GPU();
  const HostProblem h = make(spec(CacheFormat::kMxfp4, Generator::kGaussian, 8, 2, 600, 70));
  const int64_t extra = (int64_t(4) << 30) / h.page_stride + 1000;  // every page above 4 GiB
  ASSERT_GT(extra * h.page_stride, int64_t(1) << 32);
  expect_matches_oracle(h, "mxfp4 pages above 4 GiB", extra);
  const DeviceProblem low(h), high(h, extra);
  const Logits a = gpu_logits(low.p), b = gpu_logits(high.p);
  EXPECT_EQ(std::memcmp(a.v.data(), b.v.data(), a.v.size() * 4), 0);
}

TEST(GpuScorer, FailingRowsFailClosed) {
  SKIP_WITHOUT_GPU();
  for (CacheFormat f : kFormats) {
    HostProblem h = make(spec(f, Generator::kGaussian, 16, 2, 900, 80));
    h.window_end[1] = int32_t(h.max_context + 1);              // window past max_context
    h.row_batch[2] = 7;                                        // request out of range
    h.window_start[3] = 5, h.window_end[3] = 4;                // end < start
    h.window_start[4] = 0, h.window_end[4] = 0;                // empty: not a failure
    h.page_table[size_t(h.table_width + 3)] = int32_t(h.num_pages);  // request 1, page 3: out of the pool
    expect_matches_oracle(h, std::string(name(f)) + " failing rows");
    const Logits c = cpu_logits(h);
    int failed = 0;
    for (uint32_t s : c.status) failed += (s & row_status::kFailMask) != 0;
    EXPECT_GE(failed, 4) << "the corrupted rows must fail";
  }
}

// A wrong page table or permuted scales must be caught by the oracle comparison.
TEST(GpuScorer, SensitivityToWrongMetadata) {
  SKIP_WITHOUT_GPU();
  const HostProblem h = make(spec(CacheFormat::kMxfp4, Generator::kGaussian, 8, 1, 1000, 90));
  {
    HostProblem wrong = h;
    std::swap(wrong.page_table[2], wrong.page_table[5]);
    const DeviceProblem d(wrong);
    const Check k = check_against_oracle(h, gpu_logits(d.p), cpu_logits(h));
    EXPECT_GT(k.bad, 0) << "swapped page-table entries went unnoticed";
  }
  {
    HostProblem wrong = h;
    for (size_t i = 0; i + 4 <= wrong.q_scale.size(); i += 4) std::swap(wrong.q_scale[i], wrong.q_scale[i + 3]);
    const DeviceProblem d(wrong);
    const Check k = check_against_oracle(h, gpu_logits(d.p), cpu_logits(h));
    EXPECT_GT(k.bad, 0) << "permuted query scales went unnoticed";
  }
}

TEST(GpuScorer, TwentyRerunsBitIdentical) {
  SKIP_WITHOUT_GPU();
  for (CacheFormat f : kFormats) {
    SyntheticSpec s = spec(f, Generator::kGaussian, 0, 2, 20000, 100);
    s.form = RowForm::kDecode;
    s.next_n = 2;  // split rows
    const HostProblem h = make(s);
    const DeviceProblem d(h);
    const Logits first = gpu_logits(d.p);
    cudaStream_t other = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    for (int i = 0; i < 20; ++i) {
      const Logits again = gpu_logits(d.p, i % 2 ? other : nullptr);
      ASSERT_EQ(std::memcmp(first.v.data(), again.v.data(), first.v.size() * 4), 0) << name(f) << " rerun " << i;
      ASSERT_EQ(first.status, again.status);
    }
    cudaStreamDestroy(other);
  }
}

// Captured once; windows (ragged) and context lengths (decode) change between replays.
TEST(GpuScorer, GraphReplayWithMutatedMetadata) {
  SKIP_WITHOUT_GPU();
  for (RowForm form : {RowForm::kRagged, RowForm::kDecode}) {
    SyntheticSpec s = spec(CacheFormat::kMxfp4, Generator::kGaussian, 12, 2, 5000, 110);
    s.form = form;
    s.next_n = 2;
    HostProblem h = make(s);
    DeviceProblem d(h);
    const int64_t rows = h.rows(), width = h.max_context;
    DeviceVector<float> lg(size_t(rows * width), 0x7F);
    DeviceVector<uint32_t> st(size_t(rows), 0x7F);
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    cudaGraph_t graph;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    const Status cap = dense_logits(d.p, LogitsOutput{lg.get(), width, st.get()}, gpu_launch(stream));
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_TRUE(cap.is_ok()) << cap.to_string();
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    std::mt19937 rng(5);
    for (int replay = 0; replay < 4; ++replay) {
      if (replay > 0) {  // new metadata, same device buffers
        if (form == RowForm::kRagged) {
          for (int64_t r = 0; r < rows; ++r) {
            const int32_t e = int32_t(rng() % (width + 1));
            h.window_end[size_t(r)] = e;
            h.window_start[size_t(r)] = e ? int32_t(rng() % e) : 0;
          }
          d.window_start.assign(h.window_start);
          d.window_end.assign(h.window_end);
        } else {
          for (int32_t& c : h.context_lens) c = int32_t(rng() % (width + 1));
          d.context_lens.assign(h.context_lens);
        }
      }
      GPU_CHECK(cudaMemset(lg.ptr, 0x7F, lg.n * 4));
      GPU_CHECK(cudaGraphLaunch(exec, stream));
      GPU_CHECK(cudaStreamSynchronize(stream));
      const std::vector<float> replayed = lg.to_host();
      const Logits fresh = gpu_logits(d.p);
      ASSERT_EQ(std::memcmp(replayed.data(), fresh.v.data(), replayed.size() * 4), 0) << "replay " << replay;
      const Check k = check_against_oracle(h, fresh, cpu_logits(h));
      ASSERT_EQ(k.bad, 0) << "replay " << replay << ": " << k.first;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

// Small cases for compute-sanitizer (memcheck, racecheck): both formats, a split decode.
TEST(GpuScorer, SanitizerSmallCases) {
  SKIP_WITHOUT_GPU();
  expect_matches_oracle(make(spec(CacheFormat::kMxfp4, Generator::kSpecials, 9, 2, 500, 120)), "sanitizer mxfp4");
  SyntheticSpec s = spec(CacheFormat::kFp8E4M3, Generator::kGaussian, 0, 1, 6000, 121);
  s.form = RowForm::kDecode;
  s.next_n = 3;
  expect_matches_oracle(make(s), "sanitizer fp8 decode split");
  for (int32_t next_n : {1, 2}) {  // the register-key path, split
    SyntheticSpec m = spec(CacheFormat::kMxfp4, Generator::kSpecials, 0, 1, 5000, 122);
    m.form = RowForm::kDecode;
    m.next_n = next_n;
    expect_matches_oracle(make(m), "sanitizer mxfp4 decode next_n=" + std::to_string(next_n));
  }
}

}  // namespace
}  // namespace fit
