// agtrace export --torch SCENARIO [-o FILE]: print a runnable PyTorch script that does
// what the scenario does and prints the stable core of the JSON report.
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "report/export_torch.hpp"
#include "scenario/scenario.hpp"
#include "util/atomic_file.hpp"

namespace agtrace::app {

namespace {
struct ExportOpts {
  bool torch = false;
  std::string scenario;
  std::string output;
};
}  // namespace

Runner add_export(CLI::App& root) {
  auto opts = std::make_shared<ExportOpts>();
  CLI::App* cmd = root.add_subcommand(
      "export",
      "Translate a scenario into a self-contained PyTorch script: it creates the leaves with the\n"
      "values agtrace's initialisers give, runs the program in real PyTorch and prints the stable\n"
      "core of the JSON report (statements, printed, walks, errors, grads, memory.saved_bytes).\n"
      "Scenarios with saved_tensor_hooks or checkpoint blocks, or that call an operation agtrace\n"
      "does not have (as validate reports them), are refused (exit 2).\n\n"
      "Examples:\n"
      "  agtrace export --torch scenarios/seed_walk.json -o seed_walk.py && python3 seed_walk.py\n"
      "  agtrace export --torch scenarios/seed_walk.json | python3 - --indent 0 > torch-report.json");
  cmd->add_flag("--torch", opts->torch, "export as a PyTorch script (the one target there is)")->required();
  cmd->add_option("scenario", opts->scenario, "scenario file (JSON)")->required();
  cmd->add_option("-o,--output", opts->output, "write the script to FILE instead of stdout");
  return [opts]() -> int {
    auto sc = load_scenario_file(opts->scenario);
    // What run would stop at as unsupported is not exported either: the script would run it
    // in Python (`__import__('os').system(...)`).
    if (report_unknown_operations(*sc, opts->scenario) > 0) return kBadInput;
    TorchExportOptions eo;
    eo.source_path = opts->scenario;
    if (!opts->output.empty()) eo.script_name = std::filesystem::path(opts->output).filename().string();
    const std::string script = export_torch_script(*sc, eo);
    if (opts->output.empty()) std::cout << script << std::flush;
    else write_file_atomic(opts->output, script);
    return kOk;
  };
}

}  // namespace agtrace::app
