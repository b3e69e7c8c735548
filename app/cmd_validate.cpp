// agtrace validate SCENARIO: parse and validate only (the file and every statement).
#include <iostream>

#include "commands.hpp"
#include "scenario/scenario.hpp"

namespace agtrace::app {

Runner add_validate(CLI::App& root) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = root.add_subcommand("validate", "Parse and validate a scenario without running it.\n\n"
                                                  "Example:\n  agtrace validate scenarios/seed_walk.json");
  cmd->add_option("scenario", *path, "scenario file (JSON)")->required();
  return [path]() -> int {
    auto sc = load_scenario_file(*path);
    const int unknown = report_unknown_operations(*sc, *path);
    if (unknown > 0) return kBadInput;
    std::cout << *path << ": valid scenario '" << sc->name << "' (" << sc->tensors.size() << " tensors, "
              << sc->statement_count << " statements)\n";
    return kOk;
  };
}

}  // namespace agtrace::app
