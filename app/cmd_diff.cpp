// agtrace diff A B: two runs' memory side by side. A and B are JSON reports
// (`agtrace run --format json`) or scenarios (run here first).
#include <iostream>

#include "commands.hpp"
#include "errors.hpp"
#include "interp/interpreter.hpp"
#include "report/diff_report.hpp"
#include "report/report.hpp"
#include "scenario/scenario.hpp"
#include "util/atomic_file.hpp"

namespace agtrace::app {

namespace {

struct DiffOpts {
  std::string a, b;
  std::string format = "text";
  std::string device;
  bool b_without_checkpoint = false;
  bool b_without_autocast = false;
};

// A report, or a scenario run into one (a JSON object with "program" is a scenario).
nlohmann::json load_side(const std::string& path, const std::string& device, bool without_checkpoint,
                         bool without_autocast) {
  // Read once with a bound (a FIFO or <(gen) cannot be read twice) and parsed with the
  // scenario loader's depth bound; a scenario is loaded from the same text.
  const std::string text = read_file(path, kMaxInputBytes, "report");
  const nlohmann::json j(parse_json_bounded(text, path));
  if (j.is_object() && j.contains("program")) {
    auto sc = load_scenario_text(text, path);
    RunOptions ro;
    ro.device = device;
    ro.checkpoint_plain = without_checkpoint;  // checkpoint blocks as plain calls
    ro.autocast_plain = without_autocast;      // autocast blocks' bodies as plain statements
    return nlohmann::json::parse(report_json(run_scenario(*sc, ro), false).dump());
  }
  if (without_checkpoint || without_autocast) {
    InputError e("usage", std::string(without_checkpoint ? "--b-without-checkpoint" : "--b-without-autocast") +
                              " needs B to be a scenario, not a report");
    e.file = path;
    throw e;
  }
  check_diffable_report(j, path);
  return j;
}

}  // namespace

Runner add_diff(CLI::App& root) {
  auto opts = std::make_shared<DiffOpts>();
  CLI::App* cmd = root.add_subcommand("diff", "Compare two runs' memory: summary, categories, saved bytes per node.\n\n"
                                              "Examples:\n"
                                              "  agtrace diff before.json after.json\n"
                                              "  agtrace diff scenarios/a.json scenarios/b.json --format json\n"
                                              "  agtrace diff scenarios/checkpoint.json scenarios/checkpoint.json --b-without-checkpoint\n"
                                              "  agtrace diff scenarios/autocast_mlp.json scenarios/autocast_mlp.json --b-without-autocast");
  cmd->add_option("a", opts->a, "report (agtrace run --format json) or scenario")->required();
  cmd->add_option("b", opts->b, "report or scenario")->required();
  cmd->add_option("--format", opts->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--device", opts->device, "device for sides given as scenarios")->check(CLI::IsMember({"cpu", "meta"}));
  cmd->add_flag("--b-without-checkpoint", opts->b_without_checkpoint,
                "run B's checkpoint blocks as plain calls (the same program without checkpointing)");
  cmd->add_flag("--b-without-autocast", opts->b_without_autocast,
                "run B's autocast blocks' bodies as plain statements (the same program without autocast)");
  return [opts]() -> int {
    const nlohmann::json a = load_side(opts->a, opts->device, false, false),
                         b = load_side(opts->b, opts->device, opts->b_without_checkpoint, opts->b_without_autocast);
    const ReportDiff d = diff_reports(a, b);
    if (opts->format == "json") std::cout << diff_json(d).dump(2) << "\n";
    else std::cout << diff_text(d);
    return kOk;
  };
}

}  // namespace agtrace::app
