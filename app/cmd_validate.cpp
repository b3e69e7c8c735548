// agtrace validate SCENARIO: parse and validate only (the file and every statement).
#include <iostream>

#include "commands.hpp"
#include "scenario/scenario.hpp"
#include "syntax/ast.hpp"
#include "errors.hpp"
#include "interp/static_check.hpp"

namespace agtrace::app {

Runner add_validate(CLI::App& root) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = root.add_subcommand("validate", "Parse and validate a scenario without running it.\n\n"
                                                  "Example:\n  agtrace validate scenarios/seed_walk.json");
  cmd->add_option("scenario", *path, "scenario file (JSON)")->required();
  return [path]() -> int {
    auto sc = load_scenario_file(*path);
    int unknown = 0;
    for (const ProgramItem* item : sc->statements) {
      syntax::Stmt stmt;
      try {
        stmt = syntax::parse_statement(item->source);
      } catch (InputError& e) {
        e.file = *path;
        e.statement = item->index;
        e.source = item->source;
        if (e.json_pointer.empty()) e.json_pointer = item->pointer;
        throw;
      }
      // Every call names an operation agtrace has: a program that would stop at
      // `unsupported` is not a valid scenario for it.
      for (const interp::UnknownOperation& u : interp::unknown_operations(stmt)) {
        ++unknown;
        std::cerr << "agtrace: error: [unsupported] " << *path << ": " << item->pointer << ": statement " << item->index
                  << ", column " << u.column << ": '" << u.spelling << "' is not an operation agtrace supports"
                  << (u.hint.empty() ? "" : "; did you mean '" + u.hint + "'?") << "\n";
      }
    }
    if (unknown > 0) return kBadInput;
    std::cout << *path << ": valid scenario '" << sc->name << "' (" << sc->tensors.size() << " tensors, "
              << sc->statement_count << " statements)\n";
    return kOk;
  };
}

}  // namespace agtrace::app
