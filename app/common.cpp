#include <unistd.h>

#include <cstdlib>

#include <iostream>

#include "commands.hpp"
#include "errors.hpp"
#include "interp/static_check.hpp"
#include "scenario/scenario.hpp"
#include "syntax/ast.hpp"

namespace agtrace::app {

bool want_color(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;  // https://no-color.org
  return ::isatty(STDOUT_FILENO) != 0;
}

int64_t parse_bytes(const std::string& text) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (...) {
  }
  int shift = 0;
  const std::string unit = text.substr(used < text.size() ? used : text.size());
  if (unit == "K" || unit == "KiB") shift = 10;
  else if (unit == "M" || unit == "MiB") shift = 20;
  else if (unit == "G" || unit == "GiB") shift = 30;
  else if (!unit.empty() && unit != "B") v = -1;
  if (v <= 0 || v > (int64_t{1} << 50) >> shift)
    throw InputError("usage", "--max-memory: expected a positive size such as 512M or 4G, got '" + text + "'");
  return static_cast<int64_t>(v) << shift;
}

int report_unknown_operations(const Scenario& sc, const std::string& path) {
  int unknown = 0;
  for (const ProgramItem* item : sc.statements) {
    syntax::Stmt stmt;
    try {
      stmt = syntax::parse_statement(item->source);
    } catch (InputError& e) {
      e.file = path;
      e.statement = item->index;
      e.source = item->source;
      if (e.json_pointer.empty()) e.json_pointer = item->pointer;
      throw;
    }
    for (const interp::UnknownOperation& u : interp::unknown_operations(stmt)) {
      ++unknown;
      std::cerr << "agtrace: error: [unsupported] " << path << ": " << item->pointer << ": statement " << item->index
                << ", column " << u.column << ": '" << u.spelling << "' is not an operation agtrace supports"
                << (u.hint.empty() ? "" : "; did you mean '" + u.hint + "'?") << "\n";
    }
  }
  return unknown;
}

}  // namespace agtrace::app
