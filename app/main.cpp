// agtrace: autograd graph inspector and saved-tensor memory accountant.
// A thin shell: parse flags, call the library, print, choose the exit status. Every
// library error reaches this one boundary.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "errors.hpp"
#include "git_version.hpp"

using namespace agtrace;

int main(int argc, char** argv) {
  app::guard_standard_streams();
  CLI::App root{"agtrace — what autograd keeps, for how long, and what it costs.\n\n"
                "Examples:\n"
                "  agtrace run scenarios/seed_walk.json\n"
                "  agtrace run scenarios/seed_walk.json --format json -o report.json --dot graph.dot\n"
                "  agtrace check scenarios/\n"
                "  agtrace ops --filter mm\n",
                "agtrace"};
  root.set_version_flag("--version", std::string("agtrace ") + AGTRACE_VERSION + " (git " + AGTRACE_GIT_COMMIT + ")");
  root.require_subcommand(1);
  std::string log_level = "warn";
  bool verbose = false;
  root.add_option("--log-level", log_level, "trace|debug|info|warn|error|off (logs go to stderr)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  root.add_flag("-v,--verbose", verbose, "same as --log-level debug");

  app::Runner run = app::add_run(root), check = app::add_check(root), validate = app::add_validate(root),
              ops = app::add_ops(root), export_ = app::add_export(root);
  app::Runner diff = app::add_diff(root);  // issue #4
  app::Runner record = app::add_record(root);
  try {
    root.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = root.exit(e);
    return code == 0 ? 0 : app::kBadInput;
  }
  auto logger = spdlog::stderr_color_mt("agtrace");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(verbose ? "debug" : log_level));

  try {
    for (CLI::App* sub : root.get_subcommands()) {
      const std::string name = sub->get_name();
      if (name == "run") return run();
      if (name == "check") return check();
      if (name == "validate") return validate();
      if (name == "ops") return ops();
      if (name == "export") return export_();
      if (name == "diff") return diff();
      if (name == "record") return record();
    }
  } catch (const InputError& e) {
    std::cerr << "agtrace: error: [" << e.kind << "] " << e.describe() << "\n";
    if (!e.source.empty() && e.column > 0) {
      std::cerr << "    " << e.source << "\n    " << std::string(static_cast<size_t>(e.column - 1), ' ') << "^\n";
    }
    return app::kBadInput;
  } catch (const std::exception& e) {
    std::cerr << "agtrace: internal error: " << e.what() << "\n";
    return 4;
  }
  return app::kBadInput;
}
