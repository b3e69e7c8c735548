// A scenario file as plain, validated structs (spec: shared/spec/scenario-format.md).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor/dtype.hpp"

namespace agtrace {

struct InitSpec {
  enum class Kind { Zeros, Ones, Full, Values, Arange, Linspace, Uniform, Normal, Randint };
  Kind kind = Kind::Zeros;
  double a = 0.0, b = 0.0;        // full: a; arange: start a, step b; linspace/uniform/randint: lo a, hi b; normal: mean a, std b
  std::vector<double> values;     // values: flattened row-major (already checked against the shape)
};

struct LeafSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::Float32;
  bool requires_grad = false;
  InitSpec init;
  std::string pointer;  // "/tensors/<name>" for later error messages
};

struct ProgramItem {
  enum class Kind { Statement, NoGrad, EnableGrad, SetGradEnabled, Try, SavedTensorHooks, Repeat, Checkpoint, Autocast };
  Kind kind = Kind::Statement;
  // Statement
  int index = -1;            // statement number: 0-based, in order of appearance, blocks flattened
  std::string source;        // the statement text
  // Blocks
  std::vector<ProgramItem> body;
  std::string hooks_kind;    // saved_tensor_hooks: "save_on_cpu", "fp16", "bf16", "count"
  int64_t repeat = 0;        // repeat: N
  DType autocast_dtype = DType::BFloat16;  // autocast: bfloat16 or float16
  std::string device_type;   // autocast: "cpu", "cuda", or "" (the run's device; cuda on meta)
  bool grad_mode = false;    // set_grad_enabled: BOOL
  std::vector<std::string> inputs, outputs;  // checkpoint
  std::string pointer;       // JSON pointer of this item, e.g. "/program/3/try/0"
};

struct Scenario {
  std::string file;          // path as given, for messages
  int format = 1;
  std::string name;
  std::string description;
  std::string device = "cpu";
  DType dtype = DType::Float32;
  uint64_t seed = 0;
  std::vector<LeafSpec> tensors;          // in the order written in the file
  std::vector<ProgramItem> program;
  int statement_count = 0;
  std::vector<const ProgramItem*> statements;  // statements[i]->index == i (points into program)
  nlohmann::json expect = nlohmann::json::object();
};

// Parses and validates a scenario. Throws InputError (kind "io", "json" or "schema")
// naming the file and the JSON pointer of the offending value.
std::unique_ptr<Scenario> load_scenario_file(const std::string& path);
std::unique_ptr<Scenario> load_scenario_text(const std::string& text, const std::string& file_label);

// Any JSON input of agtrace (a golden report, a report given to `diff`) parsed as a scenario
// is: nesting deeper than 512 levels is an error (kind "limit") naming the JSON pointer where
// it happened, malformed text names its line and column, a duplicate key its pointer.
nlohmann::ordered_json parse_json_bounded(const std::string& text, const std::string& file_label);

// The values of a leaf as the initialiser defines them, row-major, already rounded to the
// leaf's dtype. Random kinds use the generator documented in scenario/init.cpp, seeded from
// the scenario seed and the tensor name.
std::vector<double> initial_values(const LeafSpec& leaf, uint64_t scenario_seed);
// The same values written into dst (numel floats) for a float32 leaf.
void fill_initial_values_f32(const LeafSpec& leaf, uint64_t scenario_seed, float* dst);

}  // namespace agtrace
