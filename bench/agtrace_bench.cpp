// Times an agtrace scenario in process, as `agtrace run` runs it (accounting on, every
// event recorded), without process start-up and report printing, which the cold_start
// workload measures separately. Prints one JSON line per timed repetition.
//
//   agtrace_bench SCENARIO --threads N --reps R [--warmup W] [--statement I] [--no-report]
//
// --statement I also reports the time of statement I alone (from the --profile rows), for
// the gemm workload's GFLOP/s.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "interp/interpreter.hpp"
#include "report/report.hpp"
#include "scenario/scenario.hpp"
#include "tensor/kernels.hpp"
#include "util/profile.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: agtrace_bench SCENARIO [--threads N] [--reps R] [--statement I]\n");
    return 2;
  }
  const std::string path = argv[1];
  int threads = 1, reps = 3, statement = -1, warmup = 1;
  bool with_report = true;
  for (int i = 2; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--no-report")) with_report = false;
    else if (has_value && !std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[++i]);
    else if (has_value && !std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[++i]);
    else if (has_value && !std::strcmp(argv[i], "--statement")) statement = std::atoi(argv[++i]);
    else if (has_value && !std::strcmp(argv[i], "--warmup")) warmup = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "agtrace_bench: unknown or incomplete option %s\n", argv[i]);
      return 2;
    }
  }
  agtrace::kernels::set_threads(threads);
  agtrace::kernels::keep_freed_buffers();  // as agtrace run does
  using Clock = std::chrono::steady_clock;
  auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  for (int r = -warmup; r < reps; ++r) {  // r < 0: warm-up
    if (statement >= 0) agtrace::profile::set_enabled(true);
    const double c0 = cpu_now();
    const auto t0 = Clock::now();
    auto sc = agtrace::load_scenario_file(path);
    agtrace::RunResult result = agtrace::run_scenario(*sc, agtrace::RunOptions{});
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double cpu = cpu_now() - c0;
    const auto t1 = Clock::now();
    // --no-report: for profiling the run alone (perf record sees no JSON building).
    const std::string report = with_report ? agtrace::dump_report_json(agtrace::report_json_skeleton(result, false), result, false) : std::string();
    const double report_s = std::chrono::duration<double>(Clock::now() - t1).count();
    double statement_s = -1;
    if (statement >= 0) {
      for (const auto& row : agtrace::profile::rows())
        if (row.section == agtrace::profile::Section::StatementForward && row.statement == statement)
          statement_s = row.total_s;
      agtrace::profile::set_enabled(false);
    }
    if (r < 0) continue;
    std::printf("{\"scenario\": \"%s\", \"threads\": %d, \"seconds\": %.9f, \"cpu_seconds\": %.9f, "
                "\"report_seconds\": %.9f, \"report_bytes\": %zu, \"events\": %zu, \"statement_seconds\": %.9f}\n",
                sc->name.c_str(), threads, s, cpu, report_s, report.size(),
                result.storages.size() + result.saved.size(), statement_s);
  }
  return 0;
}
