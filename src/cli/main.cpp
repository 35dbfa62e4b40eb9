// flashindexer: the command-line tool.
//   flashindexer run [--backend auto|cpu|cuda]  synthetic V4-Flash-shaped problem, verified (cuda: copied to the device)
//   flashindexer run --problem F [--out R] [--logits]
//   flashindexer make-problem --preset v4-pro --out F
//   flashindexer info                      compiled backends and devices
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include <cstdlib>

#if defined(FLASHINDEXER_WITH_CUDA)
#include "bench_topk.h"
#endif
#include "flashindexer/host_problem.h"
#include "flashindexer/operators.h"

namespace fi = flashindexer;

namespace {

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
  int threads = 0;
  bool json = false;
  std::string problem, out;
  bool logits = false;
};

void add_shape_options(CLI::App* app, Options& o) {
  app->add_option("--preset", o.preset, "model preset")
      ->check(CLI::IsMember({"v4-flash", "v4-pro", "v32", "glm5"}))
      ->capture_default_str();
  app->add_option("--rows", o.rows, "prefill rows (ragged, causal C4 windows)")->capture_default_str();
  app->add_option("--context", o.context, "C4 context (max_context)")->capture_default_str();
  app->add_option("--batch", o.batch, "decode: number of requests (switches to decode rows)");
  app->add_option("--next-n", o.next_n, "decode: rows per request (1..4)")->capture_default_str();
  app->add_option("--k", o.k, "top-k (default: the preset's)");
  app->add_option("--seed", o.seed, "generator seed")->capture_default_str();
  std::vector<std::string> gens;
  for (fi::Generator g : fi::kAllGenerators) gens.push_back(fi::to_string(g));
  app->add_option("--generator", o.generator, "synthetic data")->check(CLI::IsMember(gens))->capture_default_str();
  app->add_option("--order", o.order, "output order")->check(CLI::IsMember({"position", "rank"}))->capture_default_str();
  app->add_option("--accuracy", o.accuracy,
                  "score mode (CONTRACT §4): production (default; 2^-8 * M, FP8 tensor cores) or exact "
                  "(2e-4 * M); with --problem, overrides the file's mode")
      ->check(CLI::IsMember({"production", "exact"}));
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

fi::Backend parse_backend(const std::string& s) {
  return s == "cpu" ? fi::Backend::kCpu : s == "cuda" ? fi::Backend::kCuda : fi::Backend::kAuto;
}

int fail(const fi::Status& s) {
  std::cerr << "flashindexer: " << s.to_string() << "\n";
  return 2;
}

// The backend `run` uses: cpu or cuda as asked; auto takes a usable CUDA device (the host
// runners copy the problem there) and the CPU otherwise.
fi::Backend run_backend(const std::string& asked) {
  const fi::Backend b = parse_backend(asked);
  if (b != fi::Backend::kAuto) return b;
  return fi::list_backends()[1].usable ? fi::Backend::kCuda : fi::Backend::kCpu;
}

int cmd_run(const Options& o) {
  fi::HostProblem hp;
  if (fi::Status s = build_problem(o, &hp); !s.is_ok()) return fail(s);
  fi::Launch launch;
  launch.backend = run_backend(o.backend);
  launch.cpu_threads = o.threads;

  fi::HostResults fused, dense;
  auto t0 = std::chrono::steady_clock::now();
  fi::Status s = fi::run_fused(hp, launch, &fused);
  if (s.code() == fi::StatusCode::kUnsupported && o.backend == "auto") {  // a shape the GPU kernels lack
    std::cerr << "flashindexer: " << s.to_string() << "; running on the CPU\n";
    launch.backend = fi::Backend::kCpu;
    t0 = std::chrono::steady_clock::now();
    s = fi::run_fused(hp, launch, &fused);
  }
  if (!s.is_ok()) return fail(s);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const fi::Backend resolved = launch.backend;
  const size_t ws_bytes = fused.workspace_bytes;
  if (s = fi::run_dense_then_topk(hp, launch, &dense, o.logits); !s.is_ok()) return fail(s);
  const std::string diff = fi::first_difference(fused, dense);
  const bool verified = diff.empty();
  if (!o.out.empty()) {
    fused.logits = std::move(dense.logits);
    fused.logits_width = dense.logits_width;
    if (s = fi::write_result_file(o.out, fused); !s.is_ok()) return fail(s);
  }

  int64_t failed_rows = 0, nan_rows = 0;
  for (uint32_t st : fused.status) {
    failed_rows += (st & fi::row_status::kFailMask) != 0;
    nan_rows += (st & fi::row_status::kHasNaN) != 0;
  }
  const int64_t rows = hp.rows();
  const int64_t dense_bytes = rows * hp.max_context * 4;
  const std::string shape = std::string(fi::to_string(hp.format)) + " H=" + std::to_string(hp.num_heads) +
                            " D=128 page=" + std::to_string(hp.page_size) +
                            (hp.form == fi::RowForm::kDecode ? " decode B=" + std::to_string(hp.num_requests) +
                                                                   " next_n=" + std::to_string(hp.next_n)
                                                             : " prefill");
  if (o.json) {
    nlohmann::json j = {{"backend", fi::to_string(resolved)},
                        {"shape", shape},
                        {"format", fi::to_string(hp.format)},
                        {"rows", rows},
                        {"context", hp.max_context},
                        {"k", hp.k},
                        {"accuracy", fi::to_string(hp.accuracy)},
                        {"time_ms", ms},
                        {"workspace_bytes", ws_bytes},
                        {"dense_logits_bytes", dense_bytes},
                        {"failed_rows", failed_rows},
                        {"nan_rows", nan_rows},
                        {"verified", verified}};
    if (!verified) j["first_difference"] = diff;
    std::cout << j.dump() << "\n";
  } else {
    std::printf("flashindexer fused indexer TopK\n");
    std::printf("  %-22s %s\n", "backend", fi::to_string(resolved));
    std::printf("  %-22s %s\n", "shape", shape.c_str());
    std::printf("  %-22s rows=%lld context=%lld k=%d\n", "problem", static_cast<long long>(rows),
                static_cast<long long>(hp.max_context), hp.k);
    std::printf("  %-22s %s\n", "score mode", fi::to_string(hp.accuracy));
    std::printf("  %-22s %.2f ms%s\n", "fused time", ms,
                resolved == fi::Backend::kCuda ? " (with the copies to and from the device)" : "");
    std::printf("  %-22s %.2f MiB\n", "fused workspace", ws_bytes / 1048576.0);
    std::printf("  %-22s %.2f MiB\n", "dense logits would use", dense_bytes / 1048576.0);
    std::printf("  %-22s %lld failed, %lld with NaN scores\n", "row status", static_cast<long long>(failed_rows),
                static_cast<long long>(nan_rows));
    std::printf("  %-22s %s\n", "verified vs dense+topk",
                verified ? "yes (bit-identical)" : ("NO: " + diff).c_str());
  }
  return verified ? 0 : 1;
}

int cmd_make_problem(const Options& o) {
  fi::HostProblem hp;
  if (fi::Status s = build_problem(o, &hp); !s.is_ok()) return fail(s);
  if (fi::Status s = fi::write_problem_file(o.out, hp); !s.is_ok()) return fail(s);
  std::printf("wrote %s: %s, %lld rows, context %lld, k %d, %s\n", o.out.c_str(), fi::to_string(hp.format),
              static_cast<long long>(hp.rows()), static_cast<long long>(hp.max_context), hp.k,
              fi::to_string(hp.accuracy));
  return 0;
}

int cmd_info() {
  for (const fi::BackendInfo& b : fi::list_backends())
    std::printf("%-5s compiled=%s usable=%s  %s\n", fi::to_string(b.backend), b.compiled ? "yes" : "no",
                b.usable ? "yes" : "no", b.detail.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flashindexer: fused lightning-indexer scoring + exact TopK"};
  app.require_subcommand(0, 1);
  Options o;

  CLI::App* run = app.add_subcommand("run", "run the fused operator and verify it against dense logits + TopK");
  add_shape_options(run, o);
  run->add_option("--backend", o.backend, "backend (auto: a usable CUDA device, else the CPU)")->check(CLI::IsMember({"auto", "cpu", "cuda"}))->capture_default_str();
  run->add_option("--threads", o.threads, "CPU worker threads (0 = all)")->capture_default_str();
  run->add_flag("--json", o.json, "print one JSON object");
  run->add_option("--problem", o.problem, "replay a problem file (safetensors, CONTRACT §7)");
  run->add_option("--out", o.out, "write the results (safetensors)");
  run->add_flag("--logits", o.logits, "also write the dense logits to --out");

  CLI::App* make = app.add_subcommand("make-problem", "write a synthetic problem file");
  add_shape_options(make, o);
  make->add_option("--out", o.out, "output file")->required();

  CLI::App* info = app.add_subcommand("info", "list the backends and devices");

#if defined(FLASHINDEXER_WITH_CUDA)
  flashindexer::bench::BenchOptions bench;
  const char* git = std::getenv("FLASHINDEXER_GIT");
  bench.git = git ? git : "unknown";
  CLI::App* bench_topk = app.add_subcommand("bench-topk", "GPU: TopK over logits vs the copy floor (JSON lines)");
  bench_topk->add_option("--iters", bench.iters, "timed iterations (median)")->capture_default_str();
  bench_topk->add_option("--only", bench.only, "one point by name");
  bench_topk->add_flag("--json", bench.json, "JSON lines (the only output format)");
  CLI::App* bench_score = app.add_subcommand("bench", "GPU: dense-logits scorer vs the FP8 GEMM and copy floors");
  bench_score->add_option("--iters", bench.iters, "timed iterations (median)")->capture_default_str();
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

  CLI11_PARSE(app, argc, argv);
  if (*make) return cmd_make_problem(o);
  if (*info) return cmd_info();
#if defined(FLASHINDEXER_WITH_CUDA)
  if (*bench_topk) return flashindexer::bench::bench_topk(bench);
  if (*bench_score) return flashindexer::bench::bench_score(bench);
#endif
  return cmd_run(o);  // `run` is also the default
}
