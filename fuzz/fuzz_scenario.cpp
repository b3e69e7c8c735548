// libFuzzer harness: the scenario loader on arbitrary bytes. Every input must either load
// or be refused with an InputError; anything else (a crash, a sanitizer report, another
// exception escaping) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "errors.hpp"
#include "scenario/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto sc = agtrace::load_scenario_text(text, "fuzz.json");
    // The loader's promises: statements are numbered in order and point into the program.
    for (std::size_t i = 0; i < sc->statements.size(); ++i)
      if (sc->statements[i]->index != static_cast<int>(i)) __builtin_trap();
    if (static_cast<int>(sc->statements.size()) != sc->statement_count) __builtin_trap();
    for (const auto& leaf : sc->tensors) (void)leaf.name.size();
  } catch (const agtrace::InputError& e) {
    if (e.kind.empty() || e.detail.empty()) __builtin_trap();
    (void)e.describe();
  }
  return 0;
}
