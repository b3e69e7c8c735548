// libFuzzer harness: the statement parser on arbitrary bytes, and the round trip through
// to_source: whatever parses must render to source that parses again to the same rendering.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "errors.hpp"
#include "syntax/ast.hpp"

using namespace agtrace;

namespace {

// One rendering of a statement, built from to_source of its parts.
std::string render(const syntax::Stmt& s) {
  switch (s.kind) {
    case syntax::StmtKind::Assign: return syntax::to_source(*s.target) + " = " + syntax::to_source(*s.value);
    case syntax::StmtKind::AugAssign:
      return syntax::to_source(*s.target) + " " + s.text + "= " + syntax::to_source(*s.value);
    case syntax::StmtKind::ExprStmt: return syntax::to_source(*s.value);
    case syntax::StmtKind::Del: {
      if (s.targets.empty()) return "del ()";  // `del ()` deletes nothing, as in Python
      std::string out = "del ";
      for (std::size_t i = 0; i < s.targets.size(); ++i) out += (i ? ", " : "") + syntax::to_source(*s.targets[i]);
      return out;
    }
  }
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string src(reinterpret_cast<const char*>(data), size);
  syntax::Stmt first;
  try {
    first = syntax::parse_statement(src);
  } catch (const InputError& e) {
    if (e.kind != "syntax" || e.column < 1) __builtin_trap();
    return 0;
  }
  const std::string once = render(first);
  try {
    const std::string twice = render(syntax::parse_statement(once));
    if (twice != once) {
      std::fprintf(stderr, "round trip differs:\n  input: %s\n  once:  %s\n  twice: %s\n", src.c_str(),
                   once.c_str(), twice.c_str());
      __builtin_trap();
    }
  } catch (const InputError& e) {
    // Rendering may add parentheses, which can take a statement near the nesting limit
    // over it; any other refusal of agtrace's own output is a finding.
    if (e.detail.find("nested too deeply") != std::string::npos) return 0;
    std::fprintf(stderr, "rendering does not parse:\n  input: %s\n  once:  %s\n  error: %s\n", src.c_str(),
                 once.c_str(), e.detail.c_str());
    __builtin_trap();
  }
  return 0;
}
