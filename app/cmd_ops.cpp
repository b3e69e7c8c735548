// agtrace ops [--filter TEXT] [--format text|json]: the operation table the code uses.
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "ops/autocast_policy.hpp"
#include "ops/table.hpp"

namespace agtrace::app {

Runner add_ops(CLI::App& root) {
  auto filter = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("text");
  CLI::App* cmd = root.add_subcommand("ops", "List every supported operation: spellings, backward node, what it saves.\n\n"
                                             "Examples:\n  agtrace ops\n  agtrace ops --filter relu\n  agtrace ops --format json");
  cmd->add_option("--filter", *filter, "show entries whose name, spelling, node or category contains TEXT");
  cmd->add_option("--format", *format, "text or json")->check(CLI::IsMember({"text", "json"}));
  return [filter, format]() -> int {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const auto& e : ops::op_table()) {
      std::string hay = e.name + " " + e.node + " " + e.category;
      for (const auto& s : e.spellings) hay += " " + s;
      if (!filter->empty() && hay.find(*filter) == std::string::npos) continue;
      if (*format == "json") {
        all.push_back({{"name", e.name}, {"spellings", e.spellings}, {"signature", e.signature},
                       {"category", e.category}, {"node", e.node}, {"saves", e.saves},
                       {"autocast", ops::autocast_policy_text(e.name)}});
        continue;
      }
      std::string sp;
      for (size_t i = 0; i < e.spellings.size(); ++i) sp += (i ? ", " : "") + e.spellings[i];
      std::cout << e.name << e.signature << "  [" << e.category << "]\n"
                << "    spellings: " << sp << "\n"
                << "    node:      " << e.node << "\n"
                << "    saves:     " << e.saves << "\n"
                << "    autocast:  " << ops::autocast_policy_text(e.name) << "\n";
    }
    if (*format == "json") std::cout << all.dump(2) << "\n";
    return kOk;
  };
}

}  // namespace agtrace::app
