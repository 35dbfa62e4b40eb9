// Problem files (CONTRACT §7): write, read back, replay; malformed files fail cleanly.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/safetensors.h"
#include "test_util.h"

namespace fit {
namespace {

// Unique per test and process: ctest runs the tests of this file side by side, and two of
// them writing one name raced (one removed the file the other was reading).
std::string temp_path(const std::string& name) {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  return ::testing::TempDir() + "flashindexer_" + (t != nullptr ? std::string(t->name()) + "_" : "") + name + "_" +
         std::to_string(::getpid()) + ".safetensors";
}

void expect_same_problem(const HostProblem& a, const HostProblem& b) {
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.page_size, b.page_size);
  EXPECT_EQ(a.page_stride, b.page_stride);
  EXPECT_EQ(a.num_pages, b.num_pages);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.order, b.order);
  EXPECT_EQ(a.accuracy, b.accuracy);
  EXPECT_EQ(a.weight_scale, b.weight_scale);
  EXPECT_EQ(a.weight_type, b.weight_type);
  EXPECT_EQ(a.form, b.form);
  EXPECT_EQ(a.num_requests, b.num_requests);
  EXPECT_EQ(a.next_n, b.next_n);
  EXPECT_EQ(a.rows(), b.rows());
  EXPECT_EQ(a.max_context, b.max_context);
  EXPECT_EQ(a.table_width, b.table_width);
  EXPECT_EQ(a.pool, b.pool);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.q_scale, b.q_scale);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_EQ(a.page_table, b.page_table);
  EXPECT_EQ(a.row_batch, b.row_batch);
  EXPECT_EQ(a.window_start, b.window_start);
  EXPECT_EQ(a.window_end, b.window_end);
  EXPECT_EQ(a.context_lens, b.context_lens);
}

TEST(ProblemFile, WriteReadReplayIdentical) {
  struct Variant {
    RowForm form;
    CacheFormat format;
    WeightType wt;
    OutputOrder order;
    bool contiguous;
  } variants[] = {{RowForm::kRagged, CacheFormat::kMxfp4, WeightType::kF32, OutputOrder::kPosition, false},
                  {RowForm::kDecode, CacheFormat::kFp8E4M3, WeightType::kBF16, OutputOrder::kRank, false},
                  {RowForm::kRagged, CacheFormat::kFp8E4M3, WeightType::kF32, OutputOrder::kRank, true}};
  int i = 0;
  for (const Variant& var : variants) {
    SyntheticSpec s = small_spec(Generator::kSpecials, var.format);
    s.form = var.form;
    s.weight_type = var.wt;
    s.order = var.order;
    s.contiguous = var.contiguous;
    s.accuracy = var.order == OutputOrder::kRank ? ScoreAccuracy::kExact : ScoreAccuracy::kProduction;
    if (var.contiguous) s.requests = 1;
    s.next_n = 2;
    HostProblem p = make(s);
    p.weight_scale = 0.375f;
    const std::string path = temp_path("problem" + std::to_string(i++));
    ASSERT_TRUE(write_problem_file(path, p).is_ok());
    HostProblem back;
    const Status st = read_problem_file(path, &back);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    expect_same_problem(p, back);
    const HostResults a = fused(p), b = fused(back);
    EXPECT_EQ(first_difference(a, b), "");

    HostResults with_logits = dense_topk(p, true);
    const std::string rpath = temp_path("result" + std::to_string(i));
    ASSERT_TRUE(write_result_file(rpath, with_logits).is_ok());
    HostResults rback;
    ASSERT_TRUE(read_result_file(rpath, &rback).is_ok());
    EXPECT_EQ(first_difference(with_logits, rback), "");
    EXPECT_EQ(rback.logits_width, p.max_context);
    ASSERT_EQ(rback.logits.size(), with_logits.logits.size());
    EXPECT_EQ(std::memcmp(rback.logits.data(), with_logits.logits.data(), rback.logits.size() * 4), 0);
    std::remove(path.c_str());
    std::remove(rpath.c_str());
  }
}

std::vector<uint8_t> file_bytes(const HostProblem& p) {
  const std::string path = temp_path("bytes");
  EXPECT_TRUE(write_problem_file(path, p).is_ok());
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(safetensors::read_file(path, &bytes).is_ok());
  std::remove(path.c_str());
  return bytes;
}

// Rebuilds a file from an edited header (data section unchanged).
std::vector<uint8_t> with_header(const std::vector<uint8_t>& file, const nlohmann::json& header) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[size_t(i)];
  const std::string text = header.dump();
  const size_t data = file.size() - 8 - size_t(n);
  std::vector<uint8_t> out(8 + text.size() + data);  // sized once: GCC 12 warns on growing inserts
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(uint64_t(text.size()) >> (8 * i));
  std::copy(text.begin(), text.end(), out.begin() + 8);
  std::copy(file.begin() + 8 + int64_t(n), file.end(), out.begin() + 8 + int64_t(text.size()));
  return out;
}

nlohmann::json header_of(const std::vector<uint8_t>& file) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[size_t(i)];
  return nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + int64_t(n));
}

// The fuzzer's seeds and every input it ever crashed on (tests/fuzz/corpus): each is read,
// refused or run on the CPU without a crash, and an accepted one gives fused == dense + TopK.
TEST(ProblemFile, FuzzCorpusReplaysCleanly) {
  int files = 0, accepted = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FI_FUZZ_CORPUS_DIR)) {
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(safetensors::read_file(entry.path().string(), &bytes).is_ok()) << entry.path();
    ++files;
    HostProblem p;
    if (!parse_problem(bytes.data(), bytes.size(), &p).is_ok()) continue;
    ++accepted;
    const HostResults f = fused(p), d = dense_topk(p);
    EXPECT_EQ(first_difference(f, d), "") << entry.path();
  }
  EXPECT_GE(files, 4);
  EXPECT_GE(accepted, 3);  // the valid seeds
}

// CONTRACT §4 and §7: the score mode travels as __metadata__.accuracy, and a file without it
// is a production-mode problem (the default of every entry point).
TEST(ProblemFile, AccuracyModeRoundTripsAndDefaultsToProduction) {
  EXPECT_EQ(IndexerProblem{}.accuracy, ScoreAccuracy::kProduction);
  EXPECT_EQ(HostProblem{}.accuracy, ScoreAccuracy::kProduction);
  EXPECT_EQ(SyntheticSpec{}.accuracy, ScoreAccuracy::kProduction);
  SyntheticSpec s = small_spec();
  s.context = 130;
  s.rows = 2;
  for (ScoreAccuracy a : {ScoreAccuracy::kProduction, ScoreAccuracy::kExact}) {
    s.accuracy = a;
    const std::vector<uint8_t> bytes = file_bytes(make(s));
    const nlohmann::json h = header_of(bytes);
    EXPECT_EQ(h["__metadata__"]["accuracy"], to_string(a));
    HostProblem back;
    ASSERT_TRUE(parse_problem(bytes.data(), bytes.size(), &back).is_ok());
    EXPECT_EQ(back.accuracy, a);
    EXPECT_EQ(back.view().accuracy, a);
    nlohmann::json without = h;
    without["__metadata__"].erase("accuracy");
    const std::vector<uint8_t> old = with_header(bytes, without);
    ASSERT_TRUE(parse_problem(old.data(), old.size(), &back).is_ok());
    EXPECT_EQ(back.accuracy, ScoreAccuracy::kProduction);
  }
  ScoreAccuracy parsed = ScoreAccuracy::kExact;
  EXPECT_TRUE(parse_accuracy("production", &parsed));
  EXPECT_EQ(parsed, ScoreAccuracy::kProduction);
  EXPECT_TRUE(parse_accuracy("exact", &parsed));
  EXPECT_EQ(parsed, ScoreAccuracy::kExact);
  for (const char* bad : {"fp32", "reduced", "", "Exact"}) EXPECT_FALSE(parse_accuracy(bad, &parsed)) << bad;
  EXPECT_FALSE(parse_accuracy(nullptr, &parsed));
  EXPECT_EQ(score_error_bound(ScoreAccuracy::kProduction), 1.0 / 256);
  EXPECT_EQ(score_error_bound(ScoreAccuracy::kExact), 2e-4);
}

TEST(ProblemFile, MalformedFilesAreRejectedWithAReason) {
  SyntheticSpec s = small_spec();
  s.context = 130;
  s.rows = 2;
  const std::vector<uint8_t> good = file_bytes(make(s));
  const nlohmann::json h = header_of(good);
  HostProblem out;
  ASSERT_TRUE(parse_problem(good.data(), good.size(), &out).is_ok());

  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    const char* needle;  // the message names this
  };
  std::vector<Case> cases;
  auto edit = [&](const char* what, const char* needle, auto&& f) {
    nlohmann::json e = h;
    f(e);
    cases.push_back({what, with_header(good, e), needle});
  };
  cases.push_back({"empty", {}, "file"});
  cases.push_back({"truncated header", std::vector<uint8_t>(good.begin(), good.begin() + 40), "header length"});
  cases.push_back({"truncated data", std::vector<uint8_t>(good.begin(), good.end() - 100), "data_offsets"});
  {
    std::vector<uint8_t> b = good;
    b[7] = 0x7F;  // absurd header length
    cases.push_back({"header length", b, "header length"});
  }
  {
    std::vector<uint8_t> b = good;
    b[8] = '[';
    cases.push_back({"not json", b, "header"});
  }
  edit("wrong format", "format", [](auto& e) { e["__metadata__"]["format"] = "nvfp4"; });
  edit("missing k", "k", [](auto& e) { e["__metadata__"].erase("k"); });
  edit("bad k", "k", [](auto& e) { e["__metadata__"]["k"] = "12abc"; });
  edit("bad order", "order", [](auto& e) { e["__metadata__"]["order"] = "sideways"; });
  edit("bad weight_scale", "weight_scale", [](auto& e) { e["__metadata__"]["weight_scale"] = "inf"; });
  edit("old accuracy name", "accuracy", [](auto& e) { e["__metadata__"]["accuracy"] = "reduced"; });
  edit("wrong dtype", "q.dtype", [](auto& e) { e["q"]["dtype"] = "I8"; });
  edit("unknown dtype", "dtype", [](auto& e) { e["q"]["dtype"] = "F8"; });
  edit("wrong shape", "weights", [](auto& e) { e["weights"]["shape"] = {2, 32}; });
  edit("offsets out of range", "data_offsets", [](auto& e) { e["q"]["data_offsets"] = {0, 1u << 30}; });
  edit("offsets reversed", "data_offsets", [](auto& e) { e["q"]["data_offsets"] = {100, 10}; });
  edit("size mismatch", "data bytes", [](auto& e) { e["q"]["shape"] = {2, 64, 32}; });
  edit("missing pool", "kv_pool", [](auto& e) { e.erase("kv_pool"); });
  edit("both row forms", "rows", [](auto& e) { e["context_lens"] = e["row_batch"]; });
  edit("no row form", "rows", [](auto& e) {
    e.erase("row_batch");
    e.erase("window_start");
    e.erase("window_end");
  });
  edit("negative dim", "shape", [](auto& e) { e["q"]["shape"] = {-2, 64, 64}; });
  edit("metadata not strings", "__metadata__", [](auto& e) { e["__metadata__"]["k"] = 12; });
  for (const Case& c : cases) {
    const Status st = parse_problem(c.bytes.data(), c.bytes.size(), &out);
    EXPECT_FALSE(st.is_ok()) << c.what;
    EXPECT_EQ(st.code(), StatusCode::kFormatError) << c.what;
    EXPECT_NE(st.message().find(c.needle), std::string::npos) << c.what << ": " << st.message();
  }
  EXPECT_EQ(read_problem_file("/nonexistent/flashindexer.safetensors", &out).code(), StatusCode::kIoError);
}

TEST(ProblemFile, EveryPrefixAndRandomByteFlipsNeverCrash) {
  SyntheticSpec s = small_spec();
  s.context = 70;
  s.rows = 2;
  const std::vector<uint8_t> good = file_bytes(make(s));
  HostProblem out;
  for (size_t n = 0; n < good.size(); n += 1 + n / 16) {
    std::vector<uint8_t> prefix(good.begin(), good.begin() + int64_t(n));  // exact-size buffer for ASan
    EXPECT_FALSE(parse_problem(prefix.data(), prefix.size(), &out).is_ok()) << n;
  }
  uint64_t x = 12345;
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> b = good;
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b[size_t((x >> 33) % 600)] ^= uint8_t(1u << ((x >> 20) % 8));  // flips land in the header
    if (parse_problem(b.data(), b.size(), &out).is_ok()) {
      // A flip that still parses must give a problem the operators accept or reject cleanly.
      HostResults r;
      (void)run_fused(out, cpu(), &r);
    }
  }
}

}  // namespace
}  // namespace fit
