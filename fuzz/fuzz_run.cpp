// libFuzzer harness: load and run a scenario, then print every report, under a 1 MiB
// element-data budget. Bad input is an InputError; errors the program raises are recorded
// in the result; nothing else may escape, and nothing may crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "errors.hpp"
#include "interp/interpreter.hpp"
#include "report/report.hpp"
#include "scenario/scenario.hpp"

using namespace agtrace;

namespace {

// Statements a run executes, repeat blocks multiplied out (saturating at `cap`).
int64_t executed(const std::vector<ProgramItem>& items, int64_t times, int64_t cap) {
  int64_t total = 0;
  for (const ProgramItem& it : items) {
    if (it.kind == ProgramItem::Kind::Statement) {
      total += times;
    } else {
      int64_t inner = times;
      if (it.kind == ProgramItem::Kind::Repeat) inner = it.repeat > cap / times ? cap + 1 : times * it.repeat;
      total += executed(it.body, inner, cap);
    }
    if (total > cap) return cap + 1;
  }
  return total;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto sc = load_scenario_text(text, "fuzz.json");
    if (sc->device == "cuda") return 0;  // no device here; the CLI refuses it as usage
    // Keep each input fast: long repeat loops only cost time, not coverage.
    if (executed(sc->program, 1, 2000) > 2000) return 0;
    RunOptions ro;
    ro.max_memory = int64_t{1} << 20;
    RunResult r = run_scenario(*sc, ro);
    (void)report_json(r, true).dump(2);
    TextOptions to;
    to.values = true;
    (void)report_text(r, to);
    (void)report_dot(r);
    (void)check_expect(r);
  } catch (const InputError& e) {
    if (e.kind.empty()) __builtin_trap();
  }
  return 0;
}
