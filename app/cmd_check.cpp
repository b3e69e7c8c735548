// agtrace check SCENARIO...|DIR: run each scenario and assert its expect block.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "errors.hpp"
#include "interp/interpreter.hpp"
#include "report/report.hpp"
#include "scenario/scenario.hpp"

namespace agtrace::app {

Runner add_check(CLI::App& root) {
  auto paths = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = root.add_subcommand("check", "Run scenarios and assert their expect blocks (exit 1 when a fact differs).\n\n"
                                               "Examples:\n"
                                               "  agtrace check scenarios/\n"
                                               "  agtrace check scenarios/seed_walk.json scenarios/seed_pow_same_object.json");
  cmd->add_option("scenarios", *paths, "scenario files or folders")->required();
  return [paths]() -> int {
    std::vector<std::string> files;
    for (const std::string& p : *paths) {
      if (std::filesystem::is_directory(p)) {
        std::vector<std::string> found;
        for (const auto& entry : std::filesystem::directory_iterator(p))
          if (entry.path().extension() == ".json") found.push_back(entry.path().string());
        std::sort(found.begin(), found.end());
        files.insert(files.end(), found.begin(), found.end());
      } else {
        files.push_back(p);
      }
    }
    int failed = 0, passed = 0;
    for (const std::string& f : files) {
      auto sc = load_scenario_file(f);
      RunResult r = run_scenario(*sc, {});
      auto failures = check_expect(r);
      if (sc->expect.empty()) {
        std::cout << "SKIP " << f << " (no expect block)\n";
        continue;
      }
      if (failures.empty()) {
        std::cout << "PASS " << f << "\n";
        ++passed;
      } else {
        std::cout << "FAIL " << f << "\n";
        for (const auto& fl : failures)
          std::cout << "     " << fl.fact << ": expected " << fl.expected << ", got " << fl.actual << "\n";
        ++failed;
      }
    }
    std::cout << passed << " passed, " << failed << " failed\n";
    return failed ? kCheckFailed : kOk;
  };
}

}  // namespace agtrace::app
