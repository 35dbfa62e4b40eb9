// flashindexer: the command-line tool.
//   flashindexer run [--backend auto|cpu|cuda] [--verify none|sample|full]   a synthetic problem, fused
//   flashindexer run --problem F [--out R [--logits]]                         replay a problem file
//   flashindexer make-problem --preset v4-pro --out F
//   flashindexer info                                                         compiled backends and devices
// Every option is checked before any work (docs/cli.md lists the rules, their messages and the
// exit codes); with --json, errors are a JSON object on stdout as well.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#if defined(FLASHINDEXER_WITH_CUDA)
#include "bench.h"
#endif
#include "flashindexer/host_problem.h"
#include "flashindexer/operators.h"

namespace fi = flashindexer;

namespace {

// Exit codes (docs/cli.md).
enum Exit : int {
  kExitOk = 0,
  kExitInternal = 1,    // a bug: an unexpected exception or a broken invariant
  kExitUsage = 2,       // an option out of range, contradictory or inapplicable; not enough memory
  kExitInputFile = 3,   // a problem file that cannot be read or parsed
  kExitRowsFailed = 4,  // the run completed, but some rows failed closed (CONTRACT §5 status bits)
  kExitMismatch = 5,    // the fused result differs from dense logits + TopK
  kExitDevice = 6,      // no usable device for the asked backend, or a CUDA error
};

const char* exit_kind(int code) {
  switch (code) {
    case kExitUsage: return "usage";
    case kExitInputFile: return "input_file";
    case kExitRowsFailed: return "rows_failed";
    case kExitMismatch: return "mismatch";
    case kExitDevice: return "device";
    default: return "internal";
  }
}

constexpr int64_t kMaxInt32 = 2147483647;
constexpr int kSampleRows = 64;

struct Options {
  std::string preset = "v4-flash";
  int64_t rows = 64;
  int64_t context = 8192;
  int32_t batch = 0;  // > 0: decode rows
  int32_t next_n = 1;
  int32_t k = 0;      // 0: the preset's K
  std::string backend = "auto";
  uint64_t seed = 1;
  std::string generator = "gaussian";
  std::string order = "position";
  std::string accuracy;  // "" = the problem file's mode, else production
  std::string verify = "sample";
  bool verify_given = false;  // --verify on the command line (else the default, sample)
  int threads = 0;
  bool json = false;
  bool progress = false;
  std::string problem, out;
  bool logits = false;
};

bool json_errors = false;

int fail(int code, const std::string& message) {
  if (json_errors)
    std::cout << nlohmann::json{{"error", {{"kind", exit_kind(code)}, {"exit_code", code}, {"message", message}}}}.dump()
              << "\n";
  std::cerr << "flashindexer: " << message << "\n";
  return code;
}

int exit_of(const fi::Status& s) {
  switch (s.code()) {
    case fi::StatusCode::kIoError:
    case fi::StatusCode::kFormatError: return kExitInputFile;
    case fi::StatusCode::kBackendUnavailable: return kExitDevice;
    case fi::StatusCode::kInternal: return s.message().find("CUDA") != std::string::npos ? kExitDevice : kExitInternal;
    default: return kExitUsage;
  }
}

int fail(const fi::Status& s) { return fail(exit_of(s), s.to_string()); }

// ---- options -----------------------------------------------------------------------------

struct ShapeOptions {
  CLI::Option *preset, *rows, *context, *batch, *next_n, *k, *seed, *generator, *order, *accuracy;
};

ShapeOptions add_shape_options(CLI::App* app, Options& o) {
  ShapeOptions s;
  s.preset = app->add_option("--preset", o.preset, "model preset")
                 ->check(CLI::IsMember({"v4-flash", "v4-pro", "v32", "glm5"}))
                 ->capture_default_str();
  s.rows = app->add_option("--rows", o.rows, "prefill rows (ragged, causal C4 windows)")
               ->check(CLI::Range(int64_t{1}, kMaxInt32))
               ->capture_default_str();
  s.context = app->add_option("--context", o.context, "C4 context (max_context)")
                  ->check(CLI::Range(int64_t{1}, kMaxInt32))
                  ->capture_default_str();
  s.batch = app->add_option("--batch", o.batch, "decode: number of requests (switches to decode rows)")
                ->check(CLI::Range(1, int32_t(kMaxInt32)));
  s.next_n = app->add_option("--next-n", o.next_n, "decode: rows per request")->check(CLI::Range(1, 4))
                 ->capture_default_str();
  s.k = app->add_option("--k", o.k, "top-k (default: the preset's; the CUDA kernels take up to 2048)")
            ->check(CLI::Range(1, 65536));
  s.seed = app->add_option("--seed", o.seed, "generator seed")->capture_default_str();
  std::vector<std::string> gens;
  for (fi::Generator g : fi::kAllGenerators) gens.push_back(fi::to_string(g));
  s.generator = app->add_option("--generator", o.generator, "synthetic data")->check(CLI::IsMember(gens))
                    ->capture_default_str();
  s.order = app->add_option("--order", o.order, "output order")->check(CLI::IsMember({"position", "rank"}))
                ->capture_default_str();
  s.accuracy = app->add_option("--accuracy", o.accuracy,
                               "score mode: production (default; 2^-8 * M, FP8 tensor cores) or exact (2e-4 * M); "
                               "with --problem, overrides the file's mode")
                   ->check(CLI::IsMember({"production", "exact"}));
  s.next_n->needs(s.batch);
  s.rows->excludes(s.batch);
  return s;
}

// A problem file sets the shape itself: the synthetic options do not apply to it.
void exclude_with_problem(CLI::Option* problem, const ShapeOptions& s) {
  for (CLI::Option* o : {s.preset, s.rows, s.context, s.batch, s.next_n, s.k, s.seed, s.generator, s.order})
    problem->excludes(o);
}

fi::Status build_problem(const Options& o, fi::HostProblem* p) {
  if (!o.problem.empty()) {
    const fi::Status s = fi::read_problem_file(o.problem, p);
    if (s.is_ok() && !o.accuracy.empty()) fi::parse_accuracy(o.accuracy.c_str(), &p->accuracy);
    return s;
  }
  fi::SyntheticSpec spec;
  fi::apply_preset(o.preset, &spec);
  if (o.k > 0) spec.k = o.k;
  spec.context = o.context;
  spec.seed = o.seed;
  spec.order = o.order == "rank" ? fi::OutputOrder::kRank : fi::OutputOrder::kPosition;
  if (!o.accuracy.empty()) fi::parse_accuracy(o.accuracy.c_str(), &spec.accuracy);
  fi::parse_generator(o.generator, &spec.generator);
  if (o.batch > 0) {
    spec.form = fi::RowForm::kDecode;
    spec.requests = o.batch;
    spec.next_n = o.next_n;
  } else {
    spec.rows = o.rows;
  }
  return fi::make_synthetic(spec, p);
}

// The output file must be writable before any work starts (the file is created, then removed).
fi::Status check_writable(const std::string& path) {
  const bool existed = std::filesystem::exists(path);
  std::ofstream f(path, std::ios::binary | std::ios::app);
  if (!f) return {fi::StatusCode::kInvalidArgument, "--out: expected a writable file path, got " + path};
  f.close();
  if (!existed) std::filesystem::remove(path);
  return fi::Status::ok();
}

// ---- memory --------------------------------------------------------------------------------

double available_host_bytes() {
  std::ifstream m("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (m >> key >> kb) {
    if (key == "MemAvailable:") return kb * 1024.0;
    m.ignore(256, '\n');
  }
  return 1e18;  // unknown: do not refuse
}

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", bytes / double(1 << 30));
  return b;
}

// Host bytes a synthetic run holds at once: the pool, queries, weights, windows, outputs, and
// the dense logits of the verification (rows x context fp32, all or a sample of rows).
double synthetic_bytes(const Options& o, int64_t sample_rows) {
  fi::SyntheticSpec spec;
  fi::apply_preset(o.preset, &spec);
  const bool mx = spec.format == fi::CacheFormat::kMxfp4;
  const double token = mx ? 68 : 132;
  const double requests = o.batch > 0 ? o.batch : 1;
  const double rows = o.batch > 0 ? double(o.batch) * o.next_n : double(o.rows);
  const double pages = std::ceil(double(o.context) / spec.page_size);
  const double k = o.k > 0 ? o.k : spec.k;
  const double pool = requests * pages * spec.page_size * token;
  const double queries = rows * spec.num_heads * ((mx ? 64 : 128) + 4 + 4);
  const double outputs = rows * (k * 12 + 8) * 2;  // fused and the check's
  const double logits = double(o.verify == "full" ? rows : o.verify == "sample" ? std::min<double>(rows, sample_rows) : 0) *
                        double(o.context) * 4;
  return pool + queries + outputs + logits + requests * pages * 4;
}

// ---- progress ------------------------------------------------------------------------------

// Periodic "what, elapsed, estimate" lines on stderr while a long step runs, every 2 s
// (FLASHINDEXER_PROGRESS_INTERVAL: other seconds).
class Progress {
 public:
  Progress(bool on, std::string what, double estimate_s) : what_(std::move(what)), estimate_(estimate_s) {
    if (!on) return;
    const char* env = std::getenv("FLASHINDEXER_PROGRESS_INTERVAL");
    const double every = env ? std::max(0.05, std::atof(env)) : 2.0;
    thread_ = std::thread([this, every] {
      std::unique_lock<std::mutex> lock(mu_);
      const auto t0 = std::chrono::steady_clock::now();
      while (!cv_.wait_for(lock, std::chrono::duration<double>(every), [this] { return done_; })) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (estimate_ > 0)
          std::fprintf(stderr, "flashindexer: %s: %.0f s elapsed, about %.0f s left (estimate)\n", what_.c_str(), s,
                       std::max(0.0, estimate_ - s));
        else
          std::fprintf(stderr, "flashindexer: %s: %.0f s elapsed\n", what_.c_str(), s);
      }
    });
  }
  ~Progress() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::string what_;
  double estimate_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Seconds a CPU run of `cells` scored (row, position) pairs takes, from the reference backend's
// measured rate (~6.5 GFLOP/s per thread on the 2-core development machine).
double cpu_estimate_s(const fi::HostProblem& p, int threads) {
  double cells = 0;
  if (p.form == fi::RowForm::kDecode) {
    for (int32_t len : p.context_lens) cells += double(std::max(len, 0)) * p.next_n;
  } else {
    for (size_t r = 0; r < p.window_end.size(); ++r) cells += std::max(0, p.window_end[r] - p.window_start[r]);
  }
  const double t = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  return cells * 2.0 * p.num_heads * fi::kHeadDim / (6.5e9 * t);
}

// ---- run ---------------------------------------------------------------------------------

fi::Backend parse_backend(const std::string& s) {
  return s == "cpu" ? fi::Backend::kCpu : s == "cuda" ? fi::Backend::kCuda : fi::Backend::kAuto;
}

// The backend `run` uses: cpu or cuda as asked; auto takes a usable CUDA device (the host
// runners copy the problem there) and the CPU otherwise.
fi::Backend run_backend(const std::string& asked) {
  const fi::Backend b = parse_backend(asked);
  if (b != fi::Backend::kAuto) return b;
  return fi::list_backends()[1].usable ? fi::Backend::kCuda : fi::Backend::kCpu;
}

// "3 of 64 rows failed closed: 2 page (...), 1 window (...)".
std::string failed_rows_summary(const std::vector<uint32_t>& status, int64_t* failed) {
  struct Bit {
    uint32_t bit;
    const char* what;
  } bits[] = {{fi::row_status::kFailWindow, "window (start < 0, end < start or end > max_context)"},
              {fi::row_status::kFailRequest, "request (id outside [0, num_requests))"},
              {fi::row_status::kFailPage, "page (a page-table entry outside the pool or past the table)"},
              {fi::row_status::kFailSlot, "slot (a physical slot above INT32_MAX)"}};
  *failed = 0;
  int64_t counts[4] = {0, 0, 0, 0};
  for (uint32_t st : status) {
    *failed += (st & fi::row_status::kFailMask) != 0;
    for (int i = 0; i < 4; ++i) counts[i] += (st & bits[i].bit) != 0;
  }
  std::string s = std::to_string(*failed) + " of " + std::to_string(status.size()) + " rows failed closed";
  const char* sep = ": ";
  for (int i = 0; i < 4; ++i)
    if (counts[i] > 0) {
      s += sep + std::to_string(counts[i]) + " " + bits[i].what;
      sep = ", ";
    }
  return s;
}

int cmd_run(Options o) {
  if (!o.out.empty())
    if (fi::Status s = check_writable(o.out); !s.is_ok()) return fail(kExitUsage, s.message());
  if (o.logits && o.verify != "full") {  // the dense logits of every row go to --out
    if (o.verify_given)
      return fail(kExitUsage, "--logits: writes every row's dense logits, so it needs --verify full; got --verify " +
                                  o.verify);
    o.verify = "full";
  }
  // The CUDA backend checks every row even for --verify sample: a sample of rows as a problem
  // of its own can group its rows differently in the scoring kernels, whose exact-mode path
  // choice (s8 or E5M2 operands) is made per group of rows; a dense pass on the GPU costs about
  // what the fused one does. The CPU scores each row on its own.
  const bool on_cuda = run_backend(o.backend) == fi::Backend::kCuda;
  const int64_t sample_rows = on_cuda ? INT64_MAX : kSampleRows;
  if (o.problem.empty()) {
    const double need = synthetic_bytes(o, sample_rows), have = available_host_bytes();
    if (need > have)
      return fail(kExitUsage, "the run needs about " + gib(need) + " of host memory (pool, queries, outputs" +
                                  std::string(o.verify == "none" ? "" : ", the check's logits") + "); " + gib(have) +
                                  " are available: lower --context, --rows or --batch, or use --verify none");
  }
  const fi::Backend asked = parse_backend(o.backend);
  if (asked == fi::Backend::kCuda && !fi::list_backends()[1].usable)
    return fail(kExitDevice, "--backend cuda: " + fi::list_backends()[1].detail);

  fi::HostProblem hp;
  {
    Progress progress(o.progress, o.problem.empty() ? "generating the problem" : "reading " + o.problem, 0);
    if (fi::Status s = build_problem(o, &hp); !s.is_ok()) return fail(s);
  }
  if (!o.problem.empty() && o.verify != "none") {  // the check's logits come on top of the file's buffers
    const double rows = double(o.verify == "full" ? hp.rows() : std::min<int64_t>(hp.rows(), sample_rows));
    const double need = rows * double(std::max<int64_t>(hp.max_context, 1)) * 4, have = available_host_bytes();
    if (need > have)
      return fail(kExitUsage, "--verify " + o.verify + ": the check's logits need about " + gib(need) +
                                  " of host memory; " + gib(have) + " are available: use --verify sample or none");
  }
  fi::Launch launch;
  launch.backend = run_backend(o.backend);
  launch.cpu_threads = o.threads;

  fi::HostResults fused;
  auto t0 = std::chrono::steady_clock::now();
  fi::Status s;
  {
    Progress progress(o.progress, std::string("fused on ") + fi::to_string(launch.backend),
                      launch.backend == fi::Backend::kCpu ? cpu_estimate_s(hp, o.threads) : 0);
    s = fi::run_fused(hp, launch, &fused);
  }
  if (s.code() == fi::StatusCode::kUnsupported && o.backend == "auto" && launch.backend == fi::Backend::kCuda) {
    if (!o.json) std::cerr << "flashindexer: the CUDA kernels do not take this problem (" << s.message()
                           << "); running on the CPU\n";
    launch.backend = fi::Backend::kCpu;
    t0 = std::chrono::steady_clock::now();
    Progress progress(o.progress, "fused on cpu", cpu_estimate_s(hp, o.threads));
    s = fi::run_fused(hp, launch, &fused);
  }
  if (!s.is_ok()) return fail(s);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const size_t ws_bytes = fused.workspace_bytes;

  // The check: dense logits + TopK on every row (full) or on a sample of rows, bit for bit.
  std::string diff;
  int64_t checked_rows = 0;
  fi::HostResults dense;
  if (o.verify != "none") {
    const double estimate = launch.backend == fi::Backend::kCpu ? cpu_estimate_s(hp, o.threads) : 0;
    if (o.verify == "full" || launch.backend == fi::Backend::kCuda) {
      Progress progress(o.progress, "checking every row against dense logits + TopK", estimate);
      if (s = fi::run_dense_then_topk(hp, launch, &dense, o.logits); !s.is_ok()) return fail(s);
      diff = fi::first_difference(fused, dense);
      checked_rows = hp.rows();
    } else {
      std::vector<int64_t> rows;
      fi::HostProblem sample = fi::take_row_sample(hp, kSampleRows, &rows);
      Progress progress(o.progress, "checking a sample of rows against dense logits + TopK",
                        estimate * double(rows.size()) / double(std::max<int64_t>(hp.rows(), 1)));
      s = fi::run_dense_then_topk(sample, launch, &dense, false);
      hp.pool = std::move(sample.pool);
      if (!s.is_ok()) return fail(s);
      diff = fi::first_difference(fi::select_rows(fused, rows), dense);
      checked_rows = int64_t(rows.size());
    }
  }
  if (!o.out.empty()) {
    if (o.logits) {
      fused.logits = std::move(dense.logits);
      fused.logits_width = dense.logits_width;
    }
    if (s = fi::write_result_file(o.out, fused); !s.is_ok()) return fail(kExitUsage, s.to_string());
  }

  int64_t failed_rows = 0, nan_rows = 0;
  const std::string failures = failed_rows_summary(fused.status, &failed_rows);
  for (uint32_t st : fused.status) nan_rows += (st & fi::row_status::kHasNaN) != 0;
  const int64_t rows = hp.rows();
  const int64_t dense_bytes = rows * hp.max_context * 4;
  const bool verified = diff.empty();
  const std::string shape = std::string(fi::to_string(hp.format)) + " H=" + std::to_string(hp.num_heads) +
                            " D=128 page=" + std::to_string(hp.page_size) +
                            (hp.form == fi::RowForm::kDecode ? " decode B=" + std::to_string(hp.num_requests) +
                                                                   " next_n=" + std::to_string(hp.next_n)
                                                             : " prefill");
  const std::string check =
      o.verify == "none" ? "not checked (--verify none)"
      : !verified       ? "NO: " + diff
                        : "yes, bit-identical on " + std::to_string(checked_rows) + " of " + std::to_string(rows) +
                        " rows (--verify " + o.verify +
                        (o.verify == "sample" && launch.backend == fi::Backend::kCuda ? ": every row on cuda" : "") + ")";
  if (o.json) {
    nlohmann::json j = {{"backend", fi::to_string(launch.backend)},
                        {"shape", shape},
                        {"format", fi::to_string(hp.format)},
                        {"rows", rows},
                        {"context", hp.max_context},
                        {"k", hp.k},
                        {"accuracy", fi::to_string(hp.accuracy)},
                        {"time_ms", ms},
                        {"workspace_bytes", ws_bytes},
                        {"plan", fused.plan},
                        {"dense_logits_bytes", dense_bytes},
                        {"failed_rows", failed_rows},
                        {"nan_rows", nan_rows},
                        {"verify", o.verify},
                        {"verified_rows", checked_rows},
                        {"verified", o.verify == "none" ? nlohmann::json(nullptr) : nlohmann::json(verified)}};
    if (!verified) j["first_difference"] = diff;
    if (failed_rows > 0) j["failures"] = failures;
    std::cout << j.dump() << "\n";
  } else {
    std::printf("flashindexer fused indexer TopK\n");
    std::printf("  %-22s %s\n", "backend", fi::to_string(launch.backend));
    std::printf("  %-22s %s\n", "shape", shape.c_str());
    std::printf("  %-22s rows=%lld context=%lld k=%d\n", "problem", static_cast<long long>(rows),
                static_cast<long long>(hp.max_context), hp.k);
    std::printf("  %-22s %s\n", "score mode", fi::to_string(hp.accuracy));
    std::printf("  %-22s %.2f ms%s\n", "fused time", ms,
                launch.backend == fi::Backend::kCuda ? " (with the copies to and from the device)" : "");
    std::printf("  %-22s %.2f MiB\n", "fused workspace", ws_bytes / 1048576.0);
    for (size_t at = 0; at < fused.plan.size();) {  // describe(): one decision per line
      const size_t nl = std::min(fused.plan.find('\n', at), fused.plan.size());
      std::printf("  %-22s %s\n", at == 0 ? "plan" : "", fused.plan.substr(at, nl - at).c_str());
      at = nl + 1;
    }
    std::printf("  %-22s %.2f MiB\n", "dense logits would use", dense_bytes / 1048576.0);
    std::printf("  %-22s %s, %lld with NaN scores\n", "row status", failures.c_str(), static_cast<long long>(nan_rows));
    std::printf("  %-22s %s\n", "checked vs dense+topk", check.c_str());
  }
  if (!verified) return fail(kExitMismatch, "the fused result differs from dense logits + TopK: " + diff);
  if (failed_rows > 0) return fail(kExitRowsFailed, failures);
  return kExitOk;
}

int cmd_make_problem(const Options& o) {
  if (fi::Status s = check_writable(o.out); !s.is_ok()) return fail(kExitUsage, s.message());
  const double need = synthetic_bytes(o, 0), have = available_host_bytes();
  if (need > have)
    return fail(kExitUsage, "the problem needs about " + gib(need) + " of host memory; " + gib(have) + " are available");
  fi::HostProblem hp;
  if (fi::Status s = build_problem(o, &hp); !s.is_ok()) return fail(s);
  if (fi::Status s = fi::write_problem_file(o.out, hp); !s.is_ok()) return fail(kExitUsage, s.to_string());
  std::printf("wrote %s: %s, %lld rows, context %lld, k %d, %s\n", o.out.c_str(), fi::to_string(hp.format),
              static_cast<long long>(hp.rows()), static_cast<long long>(hp.max_context), hp.k,
              fi::to_string(hp.accuracy));
  return kExitOk;
}

int cmd_info(bool json) {
  nlohmann::json all = nlohmann::json::array();
  for (const fi::BackendInfo& b : fi::list_backends()) {
    if (json)
      all.push_back({{"backend", fi::to_string(b.backend)}, {"compiled", b.compiled}, {"usable", b.usable},
                     {"detail", b.detail}});
    else
      std::printf("%-5s compiled=%s usable=%s  %s\n", fi::to_string(b.backend), b.compiled ? "yes" : "no",
                  b.usable ? "yes" : "no", b.detail.c_str());
  }
  if (json) std::cout << all.dump() << "\n";
  return kExitOk;
}

int main_checked(int argc, char** argv) {
  CLI::App app{"flashindexer: fused lightning-indexer scoring + exact TopK (docs/cli.md: options and exit codes)"};
  app.require_subcommand(0, 1);
  Options o;
  for (int i = 1; i < argc; ++i) json_errors |= std::string(argv[i]) == "--json";

  CLI::App* run = app.add_subcommand("run", "run the fused operator on a problem and check it against dense logits + TopK");
  const ShapeOptions run_shape = add_shape_options(run, o);
  run->add_option("--backend", o.backend, "backend (auto: a usable CUDA device, else the CPU)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  run->add_option("--threads", o.threads, "CPU worker threads (0 = all)")->check(CLI::Range(0, 4096))
      ->capture_default_str();
  run->add_option("--verify", o.verify,
                  "check the fused result bit for bit against dense logits + TopK: on a sample of up to 64 rows "
                  "(default), on every row, or not at all")
      ->check(CLI::IsMember({"none", "sample", "full"}))
      ->capture_default_str();
  run->add_flag("--json", o.json, "print one JSON object (errors too)");
  run->add_flag("--progress", o.progress, "progress lines on stderr (default: when stderr is a terminal, without --json)");
  CLI::Option* problem = run->add_option("--problem", o.problem, "replay a problem file (safetensors, docs/semantics.md)");
  CLI::Option* out = run->add_option("--out", o.out, "write the results (safetensors)");
  run->add_flag("--logits", o.logits, "also write the dense logits to --out (checks every row)")->needs(out);
  exclude_with_problem(problem, run_shape);

  CLI::App* make = app.add_subcommand("make-problem", "write a synthetic problem file");
  add_shape_options(make, o);
  make->add_option("--out", o.out, "output file")->required();

  CLI::App* info = app.add_subcommand("info", "list the backends and devices");
  info->add_flag("--json", o.json, "print a JSON array");

#if defined(FLASHINDEXER_WITH_CUDA)
  flashindexer::bench::BenchOptions bench;
  const char* git = std::getenv("FLASHINDEXER_GIT");
  bench.git = git ? git : "unknown";
  CLI::App* bench_topk = app.add_subcommand("bench-topk", "GPU: TopK over logits vs the copy floor (JSON lines)");
  bench_topk->add_option("--iters", bench.iters, "timed iterations (median)")->check(CLI::Range(1, 100000))
      ->capture_default_str();
  bench_topk->add_option("--only", bench.only, "one point by name");
  bench_topk->add_flag("--json", bench.json, "JSON lines (the only output format)");
  CLI::App* bench_score = app.add_subcommand("bench", "GPU: dense-logits scorer vs the FP8 GEMM and copy floors");
  bench_score->add_option("--iters", bench.iters, "timed iterations (median)")->check(CLI::Range(1, 100000))
      ->capture_default_str();
  bench_score->add_option("--only", bench.only, "one point by name");
  bench_score->add_flag("--full", bench.full, "every prefill context and decode point of the scorer issue");
  bench_score->add_flag("--json", bench.json, "JSON lines (the only output format)");
  bench_score->add_option_function<std::string>(
                 "--accuracy", [&](const std::string& v) { fi::parse_accuracy(v.c_str(), &bench.accuracy); },
                 "score mode of the fused and dense + TopK timings (the dense scorer times both)")
      ->check(CLI::IsMember({"production", "exact"}))
      ->default_str("production");
  bench_score->add_option("--k", bench.k, "top-k of the fused and dense + TopK timings (default: the preset's)")
      ->check(CLI::Range(1, 2048));
  bench_score->add_flag("--plan-sweep", bench.plan_sweep,
                        "also time every plan of the fused decode clusters on decode points");
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(kExitUsage, e.what());
  }
  o.verify_given = run->count("--verify") > 0;
  if (!o.json && !o.progress) o.progress = isatty(STDERR_FILENO) != 0;
  if (o.json && run->count("--progress") == 0) o.progress = false;
  if (*make) return cmd_make_problem(o);
  if (*info) return cmd_info(o.json);
#if defined(FLASHINDEXER_WITH_CUDA)
  static_assert(flashindexer::bench::kBenchExitUsage == kExitUsage &&
                flashindexer::bench::kBenchExitNoDevice == kExitDevice);
  if (*bench_topk) return flashindexer::bench::bench_topk(bench);
  if (*bench_score) return flashindexer::bench::bench_score(bench);
#endif
  return cmd_run(o);  // `run` is also the default
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return main_checked(argc, argv);
  } catch (const std::bad_alloc&) {
    return fail(kExitUsage, "out of host memory: the problem does not fit; lower --context, --rows or --batch");
  } catch (const std::exception& e) {
    return fail(kExitInternal, std::string("unexpected error: ") + e.what());
  }
}
