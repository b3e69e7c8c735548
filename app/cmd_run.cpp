// agtrace run SCENARIO: run it and print the report.
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "cuda/device.hpp"
#include "account/analysis.hpp"
#include "errors.hpp"
#include "interp/interpreter.hpp"
#include "report/report.hpp"
#include "scenario/scenario.hpp"
#include "tensor/kernels.hpp"
#include "util/atomic_file.hpp"
#include "util/process.hpp"
#include "util/profile.hpp"

namespace agtrace::app {

namespace {
// AGTRACE_THREADS=N, for CI setups that cannot add an option to every command.
int threads_from_env() {
  const char* v = std::getenv("AGTRACE_THREADS");
  if (!v || !*v) return 1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 1 || n > 256) {
    InputError e("usage", std::string("AGTRACE_THREADS must be a whole number from 1 to 256, got '") + v + "'");
    throw e;
  }
  return static_cast<int>(n);
}

// The progress line on stderr (--progress): which statement runs, how many calls ran, how
// long it has taken. On a terminal (auto) it appears once a run passes a second, rewrites
// itself in place and is erased at the end, so a quick run prints nothing and a report
// piped from stdout never contains it; `always` prints a line per update wherever stderr
// goes (for logs and tests); -q or `never` silences it.
class ProgressLine {
 public:
  ProgressLine(const std::string& mode, bool quiet, std::string scenario) : scenario_(std::move(scenario)) {
    terminal_ = ::isatty(STDERR_FILENO) != 0;
    enabled_ = !quiet && (mode == "always" || (mode == "auto" && terminal_));
    always_ = mode == "always";
    start_ = last_ = std::chrono::steady_clock::now();
  }
  ~ProgressLine() { erase(); }
  void statement_end(int statement, int statements, int64_t calls) {
    if (!enabled_ || !due()) return;
    char text[160];
    std::snprintf(text, sizeof text, "statement [%d] of %d, %lld calls", statement, statements,
                  static_cast<long long>(calls));
    show(text, false);
  }
  // A phase after the run (writing the report, rendering), shown if the line is showing.
  void phase(const std::string& what) {
    if (enabled_) show(what, true);
  }
  void erase() {
    if (shown_ && terminal_ && !always_) std::fputs("\r\033[K", stderr);
    shown_ = false;
  }

 private:
  // Whether a statement's line would be shown now: the text is only made when it would.
  bool due() const {
    const auto now = std::chrono::steady_clock::now();
    if (!always_ && now - start_ < std::chrono::seconds(1)) return false;
    return !shown_ || now - last_ >= std::chrono::milliseconds(200);
  }
  void show(const std::string& what, bool force) {
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    if (!always_ && elapsed < 1.0) return;
    if (!force && shown_ && now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    shown_ = true;
    if (always_ || !terminal_)
      std::fprintf(stderr, "agtrace: %s: %s, %.1f s\n", scenario_.c_str(), what.c_str(), elapsed);
    else
      std::fprintf(stderr, "\ragtrace: %s: %s, %.1f s\033[K", scenario_.c_str(), what.c_str(), elapsed);
    std::fflush(stderr);
  }
  std::string scenario_;
  bool terminal_ = false, enabled_ = false, always_ = false, shown_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

// --at N: a statement of the program.
int statement_number(const std::string& text, int statements) {
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || n < 0 || n >= statements)
    throw InputError("usage", "--at takes peak, end or a statement number from 0 to " + std::to_string(statements - 1) +
                                  ", got '" + text + "'");
  return static_cast<int>(n);
}

struct RunOpts {
  std::string scenario;
  std::string format = "text";
  bool values = false;
  int64_t values_limit = 1000000;
  bool quiet = false;
  std::string detail = "summary";
  bool compact = false;
  std::string progress = "auto";
  std::string dot_file;
  std::string svg_file;
  std::string png_file;
  std::string output;
  std::string device;
  std::string color = "auto";
  std::string max_memory = "4G";
  std::string max_process_memory;
  bool profile = false;
  int threads = 0;  // 0: AGTRACE_THREADS, else 1
  double render_timeout = kDefaultRenderTimeoutSeconds;
  int64_t render_max_nodes = kDefaultRenderMaxNodes;
  std::string at = "peak";
  bool no_saved = false;
  int64_t max_nodes = 0;
  std::string edges = "backward";
};
}  // namespace

Runner add_run(CLI::App& root) {
  auto opts = std::make_shared<RunOpts>();
  CLI::App* cmd = root.add_subcommand("run", "Run a scenario and report what autograd built and what it costs.\n\n"
                                             "Examples:\n"
                                             "  agtrace run scenarios/seed_walk.json\n"
                                             "  agtrace run scenarios/seed_walk.json --format json --values\n"
                                             "  agtrace run scenarios/seed_walk.json --svg walk.svg");
  cmd->add_option("scenario", opts->scenario, "scenario file (JSON)")->required();
  cmd->add_option("--format", opts->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->add_flag("--values", opts->values, "include element values of leaves and gradients");
  cmd->add_option("--values-limit", opts->values_limit,
                  "with --values: a leaf or gradient of more elements gives only its count (values_elided); "
                  "0 for no limit (default 1000000)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("-q,--quiet", opts->quiet, "text: the summary only; no progress line");
  cmd->add_option("--detail", opts->detail,
                  "json: summary (default: the stable core, per-node and per-statement figures, the accountant) "
                  "or full (adds the event timeline and every storage's and saved value's lifetime)")
      ->check(CLI::IsMember({"summary", "full"}));
  cmd->add_flag("--compact", opts->compact, "json: no indentation or line breaks (the same document)");
  cmd->add_option("--progress", opts->progress,
                  "a progress line on stderr: auto (on a terminal, once a run passes a second), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->add_option("--dot", opts->dot_file, "also write the graph as Graphviz DOT to FILE");
  cmd->add_option("--svg", opts->svg_file, "also render the graph to FILE with Graphviz's dot");
  cmd->add_option("--png", opts->png_file, "also render the graph to FILE (PNG) with Graphviz's dot");
  cmd->add_option("--at", opts->at,
                  "the picture: the graph after statement N, `end`, or `peak` (default: after the statement when the "
                  "most saved bytes were alive)");
  cmd->add_flag("--no-saved", opts->no_saved, "the picture: no saved-tensor rows in the nodes' boxes");
  cmd->add_option("--max-nodes", opts->max_nodes,
                  "the picture: fold repeated blocks, then the earliest nodes, into boxes to draw at most N nodes")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--edges", opts->edges,
                  "the picture: backward (node -> its next_functions, default) or forward (torchviz: input -> node)")
      ->check(CLI::IsMember({"backward", "forward"}));
  cmd->add_option("--render-max-nodes", opts->render_max_nodes,
                  "the most graph nodes --svg/--png start Graphviz for (default 5000; more is a limit error)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--render-timeout", opts->render_timeout,
                  "seconds Graphviz's dot may take for --svg/--png before it is stopped (default 60)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("-o,--output", opts->output, "write the report to FILE instead of stdout");
  cmd->add_option("--device", opts->device, "override the scenario's device")->check(CLI::IsMember({"cpu", "meta", "cuda"}));
  cmd->add_option("--max-memory", opts->max_memory, "budget for element data, e.g. 512M or 4G (default 4G; meta is exempt)");
  cmd->add_option("--max-process-memory", opts->max_process_memory,
                  "budget for the process's peak resident memory, graph and records included, checked after the "
                  "first statement, every 32nd, and any that moves element data by 1 MiB, e.g. 2G (default half the "
                  "machine's memory)");
  cmd->add_option("--color", opts->color, "auto, always or never")->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->add_flag("--profile", opts->profile,
                "add wall time per op and per statement, forward and backward (JSON: the \"profile\" key)");
  cmd->add_option("--threads", opts->threads,
                  "threads for matrix products and parallel kernels (default: $AGTRACE_THREADS, else 1); a "
                  "given count always gives the same results, but OpenBLAS rounds some float32 products "
                  "differently under another count, as PyTorch's do under torch.set_num_threads")
      ->check(CLI::Range(1, 256));
  return [opts]() -> int {
    auto sc = load_scenario_file(opts->scenario);
    const std::string device = opts->device.empty() ? sc->device : opts->device;
    const device::Availability avail = device::check(device);
    if (!avail.available) {
      InputError e("usage", "device '" + device + "' is not available: " + avail.reason);
      e.file = opts->scenario;
      throw e;
    }
    spdlog::debug("running {} ({} statements)", sc->name, sc->statement_count);
    // --at is checked before the run, not after it.
    const int dot_at = opts->at == "end"    ? DotOptions::kAtEnd
                       : opts->at == "peak" ? DotOptions::kAtPeak
                                            : statement_number(opts->at, static_cast<int>(sc->statement_count));
    RunOptions ro;
    ro.max_memory = parse_bytes(opts->max_memory);
    if (!opts->max_process_memory.empty()) ro.max_process_memory = parse_bytes(opts->max_process_memory);
    ro.device = opts->device;
    ro.keep_values = opts->values;
    ro.values_limit = opts->values_limit;
    kernels::set_threads(opts->threads > 0 ? opts->threads : threads_from_env());
    kernels::keep_freed_buffers();
    if (opts->profile) profile::set_enabled(true);
    ProgressLine progress(opts->progress, opts->quiet, opts->scenario);
    ro.on_statement_end = [&progress](int statement, int statements, int64_t calls) {
      progress.statement_end(statement, statements, calls);
    };
    RunResult r = run_scenario(*sc, ro);
    std::vector<profile::Row> profile_rows;
    double profile_total = 0.0;
    if (opts->profile) {
      profile_total = profile::elapsed_s();
      profile_rows = profile::rows();
      profile::set_enabled(false);
    }
    if (!opts->dot_file.empty() || !opts->svg_file.empty() || !opts->png_file.empty()) {
      progress.phase("drawing the graph");
      DotOptions dot_options;
      dot_options.saved = !opts->no_saved;
      dot_options.max_nodes = opts->max_nodes;
      dot_options.forward_edges = opts->edges == "forward";
      dot_options.at = dot_at;
      const std::string dot = report_dot(r, dot_options);
      if (!opts->dot_file.empty()) write_file_atomic(opts->dot_file, dot);
      if (!opts->svg_file.empty()) {
        progress.phase("rendering " + opts->svg_file + " with Graphviz");
        render_graphviz(dot, "svg", opts->svg_file, opts->render_timeout, opts->render_max_nodes);
      }
      if (!opts->png_file.empty()) {
        progress.phase("rendering " + opts->png_file + " with Graphviz");
        render_graphviz(dot, "png", opts->png_file, opts->render_timeout, opts->render_max_nodes);
      }
    }
    // The report goes to its file (or stdout) as it is written: a long program's report is
    // tens of megabytes, never held whole in memory. A file is replaced only once complete.
    progress.phase("writing the report");
    std::unique_ptr<AtomicFileWriter> file;
    if (!opts->output.empty()) file = std::make_unique<AtomicFileWriter>(opts->output);
    auto emit = [&file](std::string_view text) {
      if (file) file->write(text);
      else std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
    };
    if (opts->format == "json") {
      const SharedAnalysis analysis = std::make_shared<const MemoryAnalysis>(analyse_memory(r));
      auto j = report_json_skeleton(r, opts->values, analysis);
      // The timeline and the lifetimes are most of a long program's report (a 10,000-op
      // chain: 7.5 of 31 MB and 4.1 MB): behind --detail full.
      if (opts->detail != "full") {
        j.erase("events");
        j.erase("lifetimes");
      }
      if (opts->profile) j["profile"] = report_profile_json(r, profile_rows, profile_total);
      json_text::Minifier minifier;
      std::string compacted;
      write_report_json(j, r, opts->values, [&](std::string_view text) {
        if (!opts->compact) return emit(text);
        compacted.clear();
        minifier.feed(text, compacted);
        emit(compacted);
      }, analysis);
      emit("\n");
    } else {
      TextOptions to;
      to.values = opts->values;
      to.quiet = opts->quiet;
      to.color = opts->output.empty() && want_color(opts->color);
      if (file) {
        // Text goes out through a stream whose buffer hands each filled block to the file.
        struct ToFile : std::streambuf {
          AtomicFileWriter& f;
          char block[1 << 16];
          explicit ToFile(AtomicFileWriter& f) : f(f) { setp(block, block + sizeof block); }
          int_type overflow(int_type c) override {
            sync();
            if (c != traits_type::eof()) sputc(static_cast<char>(c));
            return traits_type::not_eof(c);
          }
          int sync() override {
            f.write(std::string_view(pbase(), static_cast<size_t>(pptr() - pbase())));
            setp(block, block + sizeof block);
            return 0;
          }
          // The report's long sections arrive in pieces of 64 KiB (text_lines::Lines): those go
          // to the file as they are, after what the block holds, instead of through the block
          // (copying them was a tenth of a 2,000-op chain's text report under callgrind).
          std::streamsize xsputn(const char* s, std::streamsize n) override {
            if (n < static_cast<std::streamsize>(sizeof block / 4)) return std::streambuf::xsputn(s, n);
            sync();
            f.write(std::string_view(s, static_cast<size_t>(n)));
            return n;
          }
        } buffer(*file);
        std::ostream out(&buffer);
        // The file's write error (a full disk, a size limit) is thrown from the buffer; a
        // stream only sets badbit for it unless asked to rethrow, and the error then surfaced
        // at commit as "cannot sync" on the descriptor the failed write had closed.
        out.exceptions(std::ios::badbit);
        write_report_text(out, r, to);
        if (opts->profile) out << report_profile_text(r, profile_rows, profile_total);
        out.flush();
      } else {
        write_report_text(std::cout, r, to);
        if (opts->profile) std::cout << report_profile_text(r, profile_rows, profile_total);
      }
    }
    if (file) file->commit();
    else std::cout << std::flush;
    progress.erase();
    if (r.raised && !opts->output.empty()) {
      // The report is in a file: say on stderr what ended the program, and where, so a CI log
      // shows why the run exited 3 without opening it.
      for (const ErrorRecord& e : r.errors)
        if (!e.caught) {
          std::cerr << "agtrace: " << opts->scenario << ": statement " << e.statement << " raised " << e.kind << " ("
                    << e.phase << "): " << e.message << " (report in " << opts->output << ")\n";
          break;
        }
    }
    if (r.raised) return kRaised;
    if (!r.expect.empty() && !check_expect(r).empty()) return kCheckFailed;
    return kOk;
  };
}

}  // namespace agtrace::app
