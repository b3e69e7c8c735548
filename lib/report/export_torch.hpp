// `agtrace export --torch`: a scenario as a runnable, self-contained PyTorch script.
//
// The script is: a header comment (what it is, the agtrace version, the source scenario,
// how to run it), then the text of tools/torch_runner.py verbatim (the same module the
// differential test tests/differential/compare_with_torch.py imports, embedded into the library
// at configure time by cmake/EmbedTorchRunner.cmake), then the scenario as loaded and the
// initial values of its leaves as agtrace's own initialisers compute them (so random
// initialisers match agtrace exactly), then `main(SCENARIO, LEAF_VALUES)`, which runs the
// program in PyTorch and prints the stable core of the JSON report.
//
// The library never prints: these functions return text.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "scenario/scenario.hpp"

namespace agtrace {

// The text of tools/torch_runner.py as it was when CMake last ran.
std::string_view torch_runner_source();

struct TorchExportOptions {
  std::string source_path;                // the scenario file, named in the header
  std::string script_name = "script.py";  // the file name the header's run line uses
};

// The whole script. Throws InputError as `agtrace run` would for a statement agtrace
// cannot parse (kind "syntax", with statement and column), and InputError kind "usage"
// (naming the file and the block's JSON pointer) when the program holds a block PyTorch
// cannot run the same way under the runner's saved-bytes pass: `saved_tensor_hooks` and
// `checkpoint` (both install saved-tensor hooks of their own, which would hide the saved
// tensors from the pass).
std::string export_torch_script(const Scenario& sc, const TorchExportOptions& opt);

// The scenario as loaded, back as JSON in the file format (defaults written out; `values`
// initialisers flat, row-major).
nlohmann::ordered_json scenario_to_json(const Scenario& sc);

// {"leaf": [v0, v1, ...], ...} as JSON text that Python's json.loads reads: the values of
// agtrace::initial_values, each the shortest decimal that reads back as the same double,
// NaN and infinities as NaN / Infinity / -Infinity, int64 and bool leaves as integers.
// Empty object on the meta device (no element data; the shapes may be huge).
std::string leaf_values_json(const Scenario& sc);

}  // namespace agtrace
