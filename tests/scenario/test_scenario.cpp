// Tests of the scenario loader (lib/scenario/scenario.cpp) and the leaf initialisers
// (lib/scenario/init.cpp).
#include <catch2/catch.hpp>

#include "tensor/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "support/value_hash.hpp"

#include "errors.hpp"
#include "scenario/normal_math.hpp"
#include "scenario/scenario.hpp"

using agtrace::DType;
using agtrace::InitSpec;
using agtrace::InputError;
using agtrace::LeafSpec;
using agtrace::ProgramItem;
using agtrace::Tensor;
using agtrace::Scenario;
using OJ = nlohmann::ordered_json;

namespace {

// The example of the spec ("The file").
const char* kExample = R"json({
  "format": 1,
  "name": "seed-walk",
  "description": "y = (x @ W + b).relu().sum(): walk the graph, then backward",
  "device": "cpu",
  "dtype": "float32",
  "seed": 7,
  "tensors": {
    "x": {"shape": [2, 3], "requires_grad": true, "init": {"arange": [0, 0.1]}},
    "W": {"shape": [3, 4], "requires_grad": true, "init": {"uniform": [-1, 1]}},
    "b": {"shape": [4],    "requires_grad": true, "init": {"values": [0.1, -0.2, 0.3, 0.0]}}
  },
  "program": [
    "y = (x @ W + b).relu().sum()",
    "print(y.grad_fn.name())",
    "y.backward()",
    {"try": ["y.backward()"]},
    "print(x.grad.shape)"
  ],
  "expect": { "walk": {"y": ["SumBackward0", "ReluBackward0", "AddBackward0",
                             "MmBackward0", "AccumulateGrad", "AccumulateGrad",
                             "AccumulateGrad"]} }
})json";

std::unique_ptr<Scenario> load(const std::string& text) {
  return agtrace::load_scenario_text(text, "case.json");
}

InputError error_of(const std::string& text) {
  try {
    load(text);
  } catch (const InputError& e) {
    return e;
  }
  throw std::runtime_error("expected an InputError, none was thrown");
}

// The spec example, changed by `edit`.
std::string mutated(const std::function<void(OJ&)>& edit) {
  OJ j = OJ::parse(kExample);
  edit(j);
  return j.dump();
}

// A minimal scenario with the given tensors and program (JSON texts).
std::string minimal(const std::string& tensors, const std::string& program = "[\"pass_ = 1\"]",
                    const std::string& extra = "") {
  return "{\"name\": \"t\", \"tensors\": " + tensors + ", \"program\": " + program + extra + "}";
}

const LeafSpec& leaf(const Scenario& s, const std::string& name) {
  for (const auto& l : s.tensors)
    if (l.name == name) return l;
  throw std::runtime_error("no tensor " + name);
}

std::vector<double> values_of(const std::string& text, const std::string& name) {
  auto s = load(text);
  return agtrace::initial_values(leaf(*s, name), s->seed);
}

double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

}  // namespace

TEST_CASE("the spec example loads into the structs", "[scenario]") {
  auto s = load(kExample);
  CHECK(s->file == "case.json");
  CHECK(s->format == 1);
  CHECK(s->name == "seed-walk");
  CHECK(s->description == "y = (x @ W + b).relu().sum(): walk the graph, then backward");
  CHECK(s->device == "cpu");
  CHECK(s->dtype == DType::Float32);
  CHECK(s->seed == 7);

  REQUIRE(s->tensors.size() == 3);
  // File order, not sorted order (sorted would be W, b, x).
  CHECK(s->tensors[0].name == "x");
  CHECK(s->tensors[1].name == "W");
  CHECK(s->tensors[2].name == "b");
  const LeafSpec& x = s->tensors[0];
  CHECK(x.shape == std::vector<int64_t>{2, 3});
  CHECK(x.dtype == DType::Float32);
  CHECK(x.requires_grad);
  CHECK(x.pointer == "/tensors/x");
  CHECK(x.init.kind == InitSpec::Kind::Arange);
  CHECK(x.init.a == 0.0);
  CHECK(x.init.b == 0.1);
  CHECK(s->tensors[1].init.kind == InitSpec::Kind::Uniform);
  CHECK(s->tensors[1].init.a == -1.0);
  CHECK(s->tensors[1].init.b == 1.0);
  CHECK(s->tensors[2].init.kind == InitSpec::Kind::Values);
  CHECK(s->tensors[2].init.values == std::vector<double>{0.1, -0.2, 0.3, 0.0});

  REQUIRE(s->program.size() == 5);
  CHECK(s->program[3].kind == ProgramItem::Kind::Try);
  CHECK(s->program[3].pointer == "/program/3");
  REQUIRE(s->statement_count == 5);
  REQUIRE(s->statements.size() == 5);
  CHECK(s->statements[3]->source == "y.backward()");
  CHECK(s->statements[3]->pointer == "/program/3/try/0");
  CHECK(s->statements[4]->source == "print(x.grad.shape)");
  for (int i = 0; i < 5; ++i) CHECK(s->statements[i]->index == i);

  REQUIRE(s->expect.contains("walk"));
  CHECK(s->expect["walk"]["y"].size() == 7);
  CHECK(s->expect["walk"]["y"][3] == "MmBackward0");
}

TEST_CASE("defaults apply when optional fields are absent", "[scenario]") {
  auto s = load(R"({"name": "d", "program": [], "tensors": {"t": {"shape": []}}})");
  CHECK(s->format == 1);
  CHECK(s->device == "cpu");
  CHECK(s->dtype == DType::Float32);
  CHECK(s->seed == 0);
  CHECK(s->statement_count == 0);
  CHECK(s->statements.empty());
  CHECK(s->expect == nlohmann::json::object());
  REQUIRE(s->tensors.size() == 1);
  CHECK(s->tensors[0].shape.empty());
  CHECK_FALSE(s->tensors[0].requires_grad);
  CHECK(s->tensors[0].init.kind == InitSpec::Kind::Zeros);
  // The scenario dtype is the default of the leaves.
  auto s2 = load(R"({"name": "d", "dtype": "float64", "program": [],
                     "tensors": {"a": {"shape": [1]}, "b": {"shape": [1], "dtype": "bfloat16"}}})");
  CHECK(s2->tensors[0].dtype == DType::Float64);
  CHECK(s2->tensors[1].dtype == DType::BFloat16);
}

TEST_CASE("statements are numbered in order of appearance, blocks flattened", "[scenario]") {
  auto s = load(R"json({"name": "blocks", "program": [
    "a = x * 2",
    {"no_grad": ["b = a + 1", {"try": ["c = b", "d = c"]}]},
    {"repeat": 3, "body": ["e = a", {"saved_tensor_hooks": "count", "body": ["f = e"]}]},
    {"checkpoint": ["g = x.relu()", "h = g * 2"], "inputs": ["x"], "outputs": ["h"]},
    {"enable_grad": []},
    "print(h)"
  ]})json");
  REQUIRE(s->statement_count == 9);
  REQUIRE(s->statements.size() == 9);
  const std::vector<std::string> sources = {"a = x * 2", "b = a + 1", "c = b",         "d = c",   "e = a",
                                            "f = e",     "g = x.relu()", "h = g * 2", "print(h)"};
  const std::vector<std::string> pointers = {"/program/0",
                                             "/program/1/no_grad/0",
                                             "/program/1/no_grad/1/try/0",
                                             "/program/1/no_grad/1/try/1",
                                             "/program/2/body/0",
                                             "/program/2/body/1/body/0",
                                             "/program/3/checkpoint/0",
                                             "/program/3/checkpoint/1",
                                             "/program/5"};
  for (int i = 0; i < 9; ++i) {
    INFO("statement " << i);
    CHECK(s->statements[i]->kind == ProgramItem::Kind::Statement);
    CHECK(s->statements[i]->index == i);
    CHECK(s->statements[i]->source == sources[i]);
    CHECK(s->statements[i]->pointer == pointers[i]);
  }
  REQUIRE(s->program.size() == 6);
  CHECK(s->program[1].kind == ProgramItem::Kind::NoGrad);
  CHECK(s->program[1].body[1].kind == ProgramItem::Kind::Try);
  CHECK(s->program[2].kind == ProgramItem::Kind::Repeat);
  CHECK(s->program[2].repeat == 3);
  CHECK(s->program[2].body[1].kind == ProgramItem::Kind::SavedTensorHooks);
  CHECK(s->program[2].body[1].hooks_kind == "count");
  CHECK(s->program[3].kind == ProgramItem::Kind::Checkpoint);
  CHECK(s->program[3].inputs == std::vector<std::string>{"x"});
  CHECK(s->program[3].outputs == std::vector<std::string>{"h"});
  CHECK(s->program[4].kind == ProgramItem::Kind::EnableGrad);
  CHECK(s->program[4].body.empty());
  // The pointers point into the scenario's own tree.
  CHECK(s->statements[2] == &s->program[1].body[1].body[0]);
}

TEST_CASE("blocks may nest 64 deep, not 65", "[scenario]") {
  auto nested = [](int depth) {
    std::string p = "\"z = 1\"";
    for (int i = 0; i < depth; ++i) p = "{\"try\": [" + p + "]}";
    return "{\"name\": \"deep\", \"program\": [" + p + "]}";
  };
  auto s = load(nested(64));
  REQUIRE(s->statement_count == 1);
  std::string ptr = "/program/0";
  for (int i = 0; i < 64; ++i) ptr += "/try/0";
  CHECK(s->statements[0]->pointer == ptr);

  InputError e = error_of(nested(65));
  CHECK(e.kind == "limit");
  std::string deep = "/program/0";
  for (int i = 0; i < 64; ++i) deep += "/try/0";
  CHECK(e.json_pointer == deep);
}

TEST_CASE("each problem names its kind and the exact pointer", "[scenario][errors]") {
  struct Case {
    std::string label, text, kind, pointer, message;
  };
  const std::vector<Case> cases = {
      // --- top level ---
      {"top level is not an object", "[1, 2]", "schema", "", "expected an object"},
      {"unknown top-level field", mutated([](OJ& j) { j["descripton"] = "x"; }), "schema", "/descripton",
       "unknown field 'descripton'; did you mean 'description'?"},
      {"unknown top-level field, nothing close", mutated([](OJ& j) { j["zzzzzzzz"] = 1; }), "schema",
       "/zzzzzzzz", "known fields"},
      {"format 2", mutated([](OJ& j) { j["format"] = 2; }), "schema", "/format", "unsupported format version 2"},
      {"format as string", mutated([](OJ& j) { j["format"] = "1"; }), "schema", "/format", "expected an integer"},
      {"name missing", mutated([](OJ& j) { j.erase("name"); }), "schema", "", "missing required field 'name'"},
      {"name with a space", mutated([](OJ& j) { j["name"] = "seed walk"; }), "schema", "/name", ""},
      {"name empty", mutated([](OJ& j) { j["name"] = ""; }), "schema", "/name", ""},
      {"description not a string", mutated([](OJ& j) { j["description"] = 3; }), "schema", "/description",
       "expected a string"},
      {"unknown device", mutated([](OJ& j) { j["device"] = "gpu"; }), "schema", "/device", "cpu, cuda, meta"},
      {"unknown scenario dtype", mutated([](OJ& j) { j["dtype"] = "f32"; }), "schema", "/dtype",
       "float32, float64, float16, bfloat16, int64, bool"},
      {"negative seed", mutated([](OJ& j) { j["seed"] = -1; }), "schema", "/seed", "non-negative integer"},
      {"float seed", mutated([](OJ& j) { j["seed"] = 1.5; }), "schema", "/seed", "non-negative integer"},
      {"program missing", mutated([](OJ& j) { j.erase("program"); }), "schema", "",
       "missing required field 'program'"},
      {"program not a list", mutated([](OJ& j) { j["program"] = "y = x"; }), "schema", "/program", "list"},
      {"tensors not an object", mutated([](OJ& j) { j["tensors"] = OJ::array(); }), "schema", "/tensors",
       "expected an object"},
      // --- tensors ---
      {"unknown field in a tensor", mutated([](OJ& j) { j["tensors"]["x"]["requires_gard"] = true; }), "schema",
       "/tensors/x/requires_gard", "unknown field 'requires_gard'; did you mean 'requires_grad'?"},
      {"tensor spec not an object", mutated([](OJ& j) { j["tensors"]["W"] = OJ::array({3, 4}); }), "schema",
       "/tensors/W", "expected an object"},
      {"tensor name is a keyword", minimal(R"({"def": {"shape": [1]}})"), "schema", "/tensors/def", "keyword"},
      {"tensor name True", minimal(R"({"True": {"shape": [1]}})"), "schema", "/tensors/True", "keyword"},
      {"tensor name torch", minimal(R"({"torch": {"shape": [1]}})"), "schema", "/tensors/torch", "interpreter"},
      {"tensor name shares_storage", minimal(R"({"shares_storage": {"shape": [1]}})"), "schema",
       "/tensors/shares_storage", "interpreter"},
      {"tensor name not an identifier", minimal(R"({"1x": {"shape": [1]}})"), "schema", "/tensors/1x",
       "identifier"},
      {"tensor name with a slash", minimal(R"({"a/b": {"shape": [1]}})"), "schema", "/tensors/a~1b",
       "identifier"},
      {"missing shape", minimal(R"({"x": {"dtype": "float32"}})"), "schema", "/tensors/x",
       "missing required field 'shape'"},
      {"shape not a list", mutated([](OJ& j) { j["tensors"]["W"]["shape"] = 3; }), "schema", "/tensors/W/shape",
       "list"},
      {"negative dimension", mutated([](OJ& j) { j["tensors"]["W"]["shape"][1] = -4; }), "schema",
       "/tensors/W/shape/1", "non-negative"},
      {"fractional dimension", mutated([](OJ& j) { j["tensors"]["W"]["shape"][0] = 2.5; }), "schema",
       "/tensors/W/shape/0", "non-negative integer"},
      {"dimension above 2^40", minimal(R"({"x": {"shape": [2, 1099511627777]}})"), "schema",
       "/tensors/x/shape/1", "2^40"},
      {"element count overflows", minimal(R"({"x": {"shape": [1099511627776, 1, 1099511627776]}})"), "schema",
       "/tensors/x/shape/2", "overflows int64"},
      {"element count overflows at the third dim",
       minimal(R"({"x": {"shape": [2147483648, 2147483648, 2, 0]}})"), "schema", "/tensors/x/shape/2",
       "overflows int64"},
      {"unknown dtype", mutated([](OJ& j) { j["tensors"]["x"]["dtype"] = "float"; }), "schema",
       "/tensors/x/dtype", "valid: float32, float64, float16, bfloat16, int64, bool"},
      {"requires_grad on int64", minimal(R"({"x": {"shape": [2], "dtype": "int64", "requires_grad": true}})"),
       "schema", "/tensors/x/requires_grad", "only floating-point tensors can require grad"},
      {"requires_grad on bool by default dtype",
       minimal(R"({"x": {"shape": [2], "requires_grad": true}})", "[]", R"(, "dtype": "bool")"), "schema",
       "/tensors/x/requires_grad", "only floating-point tensors can require grad"},
      {"requires_grad not a boolean", mutated([](OJ& j) { j["tensors"]["x"]["requires_grad"] = 1; }), "schema",
       "/tensors/x/requires_grad", "boolean"},
      // --- init ---
      {"unknown init kind (object)", mutated([](OJ& j) { j["tensors"]["W"]["init"] = {{"unifrom", {0, 1}}}; }),
       "schema", "/tensors/W/init/unifrom", "did you mean 'uniform'?"},
      {"unknown init kind (string)", mutated([](OJ& j) { j["tensors"]["W"]["init"] = "zero"; }), "schema",
       "/tensors/W/init", "did you mean 'zeros'?"},
      {"init kind needing arguments as a string", mutated([](OJ& j) { j["tensors"]["W"]["init"] = "uniform"; }),
       "schema", "/tensors/W/init", "takes arguments"},
      {"init object with two keys",
       mutated([](OJ& j) { j["tensors"]["W"]["init"] = {{"uniform", {0, 1}}, {"normal", {0, 1}}}; }), "schema",
       "/tensors/W/init", "exactly one key"},
      {"init object empty", mutated([](OJ& j) { j["tensors"]["W"]["init"] = OJ::object(); }), "schema",
       "/tensors/W/init", "exactly one key"},
      {"init a number", mutated([](OJ& j) { j["tensors"]["W"]["init"] = 0; }), "schema", "/tensors/W/init",
       "initialiser"},
      {"uniform lo > hi", mutated([](OJ& j) { j["tensors"]["W"]["init"] = {{"uniform", {1, -1}}}; }), "schema",
       "/tensors/W/init/uniform", "lo <= hi"},
      {"uniform with three numbers", mutated([](OJ& j) { j["tensors"]["W"]["init"] = {{"uniform", {0, 1, 2}}}; }),
       "schema", "/tensors/W/init/uniform", "two numbers"},
      {"uniform bound a string", mutated([](OJ& j) { j["tensors"]["W"]["init"] = {{"uniform", {0, "1"}}}; }),
       "schema", "/tensors/W/init/uniform/1", "expected a number"},
      {"uniform on an int64 tensor", minimal(R"({"i": {"shape": [2], "dtype": "int64", "init": {"uniform": [0, 1]}}})"),
       "schema", "/tensors/i/init/uniform", "floating-point dtype"},
      {"normal std < 0", mutated([](OJ& j) { j["tensors"]["W"]["init"] = {{"normal", {0, -1}}}; }), "schema",
       "/tensors/W/init/normal/1", "std >= 0"},
      {"randint bound not integral", mutated([](OJ& j) { j["tensors"]["W"]["init"] = {{"randint", {0.5, 3}}}; }),
       "schema", "/tensors/W/init/randint/0", "integers"},
      {"randint lo == hi", mutated([](OJ& j) { j["tensors"]["W"]["init"] = {{"randint", {3, 3}}}; }), "schema",
       "/tensors/W/init/randint", "lo < hi"},
      {"full with a string", mutated([](OJ& j) { j["tensors"]["W"]["init"] = {{"full", "1"}}; }), "schema",
       "/tensors/W/init/full", "expected a number"},
      {"full bool on float tensor", mutated([](OJ& j) { j["tensors"]["W"]["init"] = {{"full", true}}; }),
       "schema", "/tensors/W/init/full", "only for bool tensors"},
      {"int64 full not integral", minimal(R"({"i": {"shape": [2], "dtype": "int64", "init": {"full": 1.5}}})"),
       "schema", "/tensors/i/init/full", "integral"},
      {"values: wrongly sized inner list", minimal(R"({"x": {"shape": [2, 3], "init": {"values": [[1, 2, 3], [4, 5]]}}})"),
       "schema", "/tensors/x/init/values/1", "expected 3 entries (dimension 1 of shape [2, 3]), found 2"},
      {"values: wrong outer length", minimal(R"({"x": {"shape": [2, 3], "init": {"values": [[1, 2, 3]]}}})"),
       "schema", "/tensors/x/init/values", "expected 2 entries (dimension 0 of shape [2, 3]), found 1"},
      {"values: flat with wrong count", minimal(R"({"x": {"shape": [2, 3], "init": {"values": [1, 2, 3, 4, 5]}}})"),
       "schema", "/tensors/x/init/values", "expected 6 values (flat, row-major) or lists nested in shape [2, 3], found 5"},
      {"values: 1-d wrong count", mutated([](OJ& j) { j["tensors"]["b"]["init"]["values"].erase(3); }), "schema",
       "/tensors/b/init/values", "expected 4 values (shape [4]), found 3"},
      {"values: a string inside", minimal(R"({"x": {"shape": [2, 3], "init": {"values": [[1, 2, "3"], [4, 5, 6]]}}})"),
       "schema", "/tensors/x/init/values/0/2", "expected a number"},
      {"values: a number where a list belongs", minimal(R"({"x": {"shape": [2, 3], "init": {"values": [[1, 2, 3], 4]}}})"),
       "schema", "/tensors/x/init/values/1", "expected a list of 3 entries"},
      {"values: a list where a number belongs (flat)", minimal(R"({"x": {"shape": [3], "init": {"values": [1, [2], 3]}}})"),
       "schema", "/tensors/x/init/values/1", "expected a number"},
      {"values: boolean in a float tensor", minimal(R"({"x": {"shape": [2], "init": {"values": [1, true]}}})"),
       "schema", "/tensors/x/init/values/1", "only for bool tensors"},
      {"values: fractional in int64", minimal(R"({"x": {"shape": [2], "dtype": "int64", "init": {"values": [1, 2.5]}}})"),
       "schema", "/tensors/x/init/values/1", "integral"},
      {"values: int64 out of range", minimal(R"({"x": {"shape": [1], "dtype": "int64", "init": {"values": [9223372036854775808]}}})"),
       "schema", "/tensors/x/init/values/0", "out of range"},
      {"values not a list", minimal(R"({"x": {"shape": [2], "init": {"values": 1}}})"), "schema",
       "/tensors/x/init/values", "list"},
      // --- program ---
      {"bad program entry type", mutated([](OJ& j) { j["program"][1] = 42; }), "schema", "/program/1",
       "statement string or a block object"},
      {"unknown block key", mutated([](OJ& j) { j["program"][3] = {{"no_gard", {"y = x"}}}; }), "schema",
       "/program/3/no_gard", "did you mean 'no_grad'?"},
      {"block with two kinds", mutated([](OJ& j) { j["program"][3] = {{"try", OJ::array()}, {"no_grad", OJ::array()}}; }),
       "schema", "/program/3/no_grad", "exactly one kind"},
      {"block with no kind", mutated([](OJ& j) { j["program"][3] = {{"body", OJ::array()}}; }), "schema",
       "/program/3", "needs one of"},
      {"body in a try block", mutated([](OJ& j) { j["program"][3]["body"] = OJ::array(); }), "schema",
       "/program/3/body", "does not belong in a try block"},
      {"try body not a list", mutated([](OJ& j) { j["program"][3]["try"] = "y.backward()"; }), "schema",
       "/program/3/try", "list of statements"},
      {"bad entry inside a block", mutated([](OJ& j) { j["program"][3]["try"][0] = nullptr; }), "schema",
       "/program/3/try/0", "statement string or a block object"},
      {"bad hooks kind", minimal("{}", R"([{"saved_tensor_hooks": "fp8", "body": []}])"), "schema",
       "/program/0/saved_tensor_hooks", "save_on_cpu, fp16, bf16, count"},
      {"hooks without body", minimal("{}", R"([{"saved_tensor_hooks": "count"}])"), "schema", "/program/0",
       "needs 'body'"},
      {"misspelt body", minimal("{}", R"([{"repeat": 2, "bdy": []}])"), "schema", "/program/0/bdy",
       "did you mean 'body'?"},
      {"repeat 0", minimal("{}", R"([{"repeat": 0, "body": ["a = 1"]}])"), "schema", "/program/0/repeat", "N >= 1"},
      {"repeat not an integer", minimal("{}", R"([{"repeat": 2.0, "body": ["a = 1"]}])"), "schema",
       "/program/0/repeat", "integer"},
      {"checkpoint without outputs", minimal("{}", R"([{"checkpoint": ["h = x * 2"], "inputs": ["x"]}])"), "schema",
       "/program/0", "needs 'outputs'"},
      {"checkpoint bad input name", minimal("{}", R"([{"checkpoint": ["h = x"], "inputs": ["x", "lambda"], "outputs": ["h"]}])"),
       "schema", "/program/0/inputs/1", "keyword"},
      {"checkpoint duplicate input", minimal("{}", R"([{"checkpoint": ["h = x"], "inputs": ["x", "x"], "outputs": ["h"]}])"),
       "schema", "/program/0/inputs/1", "duplicate name"},
      {"statement with a newline", minimal("{}", R"(["a = 1", {"no_grad": [{"try": ["b = 1\nc = 2"]}]}])"), "schema",
       "/program/1/no_grad/0/try/0", "one statement per string"},
      {"empty statement", minimal("{}", R"(["a = 1", "  "])"), "schema", "/program/1", "empty statement"},
      // --- expect ---
      {"unknown field in expect", mutated([](OJ& j) { j["expect"]["walks"] = OJ::object(); }), "schema",
       "/expect/walks", "did you mean 'walk'?"},
      {"expect not an object", mutated([](OJ& j) { j["expect"] = OJ::array(); }), "schema", "/expect",
       "expected an object"},
      {"walk not a list", mutated([](OJ& j) { j["expect"]["walk"]["y"] = "SumBackward0"; }), "schema",
       "/expect/walk/y", "list"},
      {"walk entry not a string", mutated([](OJ& j) { j["expect"]["walk"]["y"][2] = 3; }), "schema",
       "/expect/walk/y/2", "expected a string"},
      {"printed entry not a string", mutated([](OJ& j) { j["expect"]["printed"] = {"a", true}; }), "schema",
       "/expect/printed/1", "expected a string"},
      {"expected error without kind", mutated([](OJ& j) { j["expect"]["errors"] = {{{"statement", 3}}}; }),
       "schema", "/expect/errors/0", "missing required field 'kind'"},
      {"expected error unknown field",
       mutated([](OJ& j) { j["expect"]["errors"] = {{{"kind", "leaf_inplace"}, {"stmt", 3}}}; }), "schema",
       "/expect/errors/0/stmt", "unknown field 'stmt'"},
      {"expected error unknown kind",
       mutated([](OJ& j) { j["expect"]["errors"] = {{{"kind", "leaf_inplce"}}}; }), "schema",
       "/expect/errors/0/kind", "did you mean 'leaf_inplace'?"},
      {"expected error statement out of range",
       mutated([](OJ& j) { j["expect"]["errors"] = {{{"kind", "saved_tensors_freed"}, {"statement", 5}}}; }),
       "schema", "/expect/errors/0/statement", "no statement 5"},
      {"expected error bad phase",
       mutated([](OJ& j) { j["expect"]["errors"] = {{{"kind", "saved_tensors_freed"}, {"phase", "during"}}}; }),
       "schema", "/expect/errors/0/phase", "forward"},
      {"expected error negative version",
       mutated([](OJ& j) {
         j["expect"]["errors"] = {{{"kind", "saved_tensor_modified"}, {"expected_version", -1}}};
       }),
       "schema", "/expect/errors/0/expected_version", "non-negative"},
      {"memory unknown key", mutated([](OJ& j) { j["expect"]["memory"] = {{"peak", 3}}; }), "schema",
       "/expect/memory/peak", "unknown field 'peak'"},
      {"memory bound unknown key", mutated([](OJ& j) { j["expect"]["memory"] = {{"peak_bytes", {{"mx", 3}}}}; }),
       "schema", "/expect/memory/peak_bytes/mx", "did you mean 'max'?"},
      {"memory value a string", mutated([](OJ& j) { j["expect"]["memory"] = {{"saved_bytes", "104"}}; }), "schema",
       "/expect/memory/saved_bytes", "byte count"},
      {"memory min above max",
       mutated([](OJ& j) { j["expect"]["memory"] = {{"graph_only_bytes", {{"min", 9}, {"max", 3}}}}; }), "schema",
       "/expect/memory/graph_only_bytes", "min is larger than max"},
      {"memory max negative", mutated([](OJ& j) { j["expect"]["memory"] = {{"peak_bytes", {{"max", -1}}}}; }),
       "schema", "/expect/memory/peak_bytes/max", "non-negative"},
      // --- duplicates and malformed JSON ---
      {"duplicate tensor name", minimal(R"({"x": {"shape": [1]}, "y": {"shape": [1]}, "x": {"shape": [2]}})"), "schema",
       "/tensors/x", "duplicate tensor name 'x'"},
      {"duplicate key in a tensor", minimal(R"({"x": {"shape": [1], "shape": [2]}})"), "schema", "/tensors/x/shape",
       "duplicate key 'shape'"},
      {"duplicate key in a block", minimal("{}", R"(["a = 1", {"try": [], "try": ["b = 2"]}])"), "schema",
       "/program/1/try", "duplicate key 'try'"},
      {"duplicate top-level key", R"({"name": "a", "name": "b", "program": []})", "schema", "/name",
       "duplicate key 'name'"},
  };
  REQUIRE(cases.size() >= 25);
  for (const Case& c : cases) {
    INFO("case: " << c.label);
    INFO("text: " << c.text);
    InputError e("", "");
    try {
      load(c.text);
      FAIL_CHECK("no error");
      continue;
    } catch (const InputError& err) {
      e = err;
    }
    INFO("got: " << e.describe());
    CHECK(e.kind == c.kind);
    CHECK(e.json_pointer == c.pointer);
    CHECK(e.file == "case.json");
    CHECK(e.detail.find(c.message) != std::string::npos);
  }
}

TEST_CASE("malformed JSON reports line and column", "[scenario][errors]") {
  const std::string text = "{\n  \"name\": \"a\",\n  \"program\": [1, 2,, 3]\n}";
  InputError e = error_of(text);
  CHECK(e.kind == "json");
  CHECK(e.file == "case.json");
  CHECK(e.json_pointer.empty());
  INFO(e.detail);
  // The second comma of line 3 is in column 20.
  CHECK(e.detail.find("line 3, column 20") != std::string::npos);
  CHECK(e.describe().rfind("case.json: malformed JSON at line 3", 0) == 0);

  InputError eof = error_of("{\"name\": \"a\",\n\"program\": [");
  CHECK(eof.kind == "json");
  CHECK(eof.detail.find("line 2") != std::string::npos);

  InputError empty = error_of("");
  CHECK(empty.kind == "json");
  CHECK(empty.detail.find("line 1, column 1") != std::string::npos);

  InputError trailing = error_of("{\"name\": \"a\", \"program\": []} x");
  CHECK(trailing.kind == "json");

  InputError huge = error_of("{\"name\": \"a\", \"program\": [],\n \"seed\": 1e400}");
  CHECK(huge.kind == "json");
  CHECK(huge.detail.find("line 2") != std::string::npos);
  CHECK(huge.detail.find("number overflow") != std::string::npos);
  CHECK(huge.detail.find("json.exception") == std::string::npos);
}

TEST_CASE("JSON nesting is bounded", "[scenario][errors]") {
  // 600 levels of brackets in the description: refused while parsing, as a limit.
  std::string text = "{\"name\": \"a\", \"program\": [], \"description\": " + std::string(600, '[') +
                     std::string(600, ']') + "}";
  InputError e = error_of(text);
  CHECK(e.kind == "limit");
  CHECK(e.json_pointer.rfind("/description/0/0/0", 0) == 0);
  // A shape with more than 64 dimensions.
  std::string shape = "[1";
  for (int i = 0; i < 64; ++i) shape += ", 1";
  InputError r = error_of(minimal("{\"x\": {\"shape\": " + shape + "]}}"));
  CHECK(r.kind == "limit");
  CHECK(r.json_pointer == "/tensors/x/shape");
}

TEST_CASE("size limit, files and io errors", "[scenario][errors]") {
  std::string big = "{\"name\": \"big\", \"program\": [], \"description\": \"" +
                    std::string((16u << 20) + 10, 'a') + "\"}";
  InputError e = error_of(big);
  CHECK(e.kind == "limit");
  CHECK(e.file == "case.json");

  const std::string path = "/tmp/agtrace_test_scenario_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(path);
    out << kExample;
  }
  auto s = agtrace::load_scenario_file(path);
  CHECK(s->file == path);
  CHECK(s->name == "seed-walk");
  {
    std::ofstream out(path);
    out << big;
  }
  try {
    agtrace::load_scenario_file(path);
    FAIL("no error for a big file");
  } catch (const InputError& err) {
    CHECK(err.kind == "limit");
    CHECK(err.file == path);
  }
  {
    std::ofstream out(path);
    out << R"({"name": "x", "program": [], "sed": 1})";
  }
  try {
    agtrace::load_scenario_file(path);
    FAIL("no error for a bad field");
  } catch (const InputError& err) {
    CHECK(err.kind == "schema");
    CHECK(err.file == path);
    CHECK(err.json_pointer == "/sed");
    CHECK(err.describe() == path + ": /sed: unknown field 'sed'; did you mean 'seed'?");
  }
  std::remove(path.c_str());

  try {
    agtrace::load_scenario_file("/nonexistent/agtrace/none.json");
    FAIL("no error for a missing file");
  } catch (const InputError& err) {
    CHECK(err.kind == "io");
    CHECK(err.file == "/nonexistent/agtrace/none.json");
  }
  try {
    agtrace::load_scenario_file("/tmp");
    FAIL("no error for a directory");
  } catch (const InputError& err) {
    CHECK(err.kind == "io");
  }
}

TEST_CASE("accepted value forms", "[scenario]") {
  // Nested and flat forms give the same row-major values.
  auto nested = values_of(minimal(R"({"x": {"shape": [2, 2], "dtype": "float64", "init": {"values": [[1, 2], [3, 4]]}}})"), "x");
  auto flat = values_of(minimal(R"({"x": {"shape": [2, 2], "dtype": "float64", "init": {"values": [1, 2, 3, 4]}}})"), "x");
  CHECK(nested == std::vector<double>{1, 2, 3, 4});
  CHECK(flat == nested);
  // A 0-d tensor: a bare value or a list of one.
  CHECK(values_of(minimal(R"({"s": {"shape": [], "init": {"values": 2.5}}})"), "s") == std::vector<double>{2.5});
  CHECK(values_of(minimal(R"({"s": {"shape": [], "init": {"values": [2.5]}}})"), "s") == std::vector<double>{2.5});
  // Booleans for bool tensors; integral floats for int64.
  CHECK(values_of(minimal(R"({"m": {"shape": [3], "dtype": "bool", "init": {"values": [true, false, 2]}}})"), "m") ==
        std::vector<double>{1, 0, 1});
  CHECK(values_of(minimal(R"({"i": {"shape": [2], "dtype": "int64", "init": {"values": [3.0, -7]}}})"), "i") ==
        std::vector<double>{3, -7});
  // Zero-sized shapes.
  CHECK(values_of(minimal(R"({"z": {"shape": [2, 0], "init": {"values": [[], []]}}})"), "z").empty());
  CHECK(values_of(minimal(R"({"z": {"shape": [0, 3], "init": {"values": []}}})"), "z").empty());
  CHECK(values_of(minimal(R"({"z": {"shape": [0], "init": "ones"}})"), "z").empty());
  // A zero dimension does not excuse an overflowing prefix, but large shapes are accepted.
  auto s = load(minimal(R"({"h": {"shape": [1099511627776, 4096]}})", "[]", R"(, "device": "meta")"));
  CHECK(s->device == "meta");
  CHECK(s->tensors[0].shape == std::vector<int64_t>{1099511627776LL, 4096});
  // Memory bounds and expected errors in all their forms.
  auto e = load(mutated([](OJ& j) {
    j["expect"]["printed"] = {"True"};
    j["expect"]["errors"] = {{{"statement", 3},
                              {"phase", "backward"},
                              {"kind", "saved_tensors_freed"},
                              {"node", "ReluBackward0"}},
                             {{"kind", "saved_tensor_modified"}, {"expected_version", 0}, {"found_version", 1},
                              {"saved_at", 0}}};
    j["expect"]["memory"] = {{"peak_bytes", 416},
                             {"saved_bytes", {{"max", 200}}},
                             {"saved_unique_bytes", {{"min", 1}}},
                             {"graph_only_bytes", {{"min", 32}, {"max", 32}}}};
  }));
  CHECK(e->expect["memory"]["saved_bytes"]["max"] == 200);
  CHECK(e->expect["errors"][1]["found_version"] == 1);
  CHECK(e->expect["printed"][0] == "True");
  // A seed above int64's range is still a valid unsigned seed.
  CHECK(load(mutated([](OJ& j) { j["seed"] = 18446744073709551615ULL; }))->seed == 18446744073709551615ULL);
}

// ---------------------------------------------------------------------------------------
// Initialisers

TEST_CASE("deterministic initialisers", "[init]") {
  LeafSpec l;
  l.name = "t";
  l.dtype = DType::Float64;
  l.shape = {2, 2};

  l.init.kind = InitSpec::Kind::Zeros;
  CHECK(agtrace::initial_values(l, 0) == std::vector<double>{0, 0, 0, 0});
  l.init.kind = InitSpec::Kind::Ones;
  CHECK(agtrace::initial_values(l, 0) == std::vector<double>{1, 1, 1, 1});
  l.init.kind = InitSpec::Kind::Full;
  l.init.a = -2.5;
  CHECK(agtrace::initial_values(l, 0) == std::vector<double>{-2.5, -2.5, -2.5, -2.5});

  l.init.kind = InitSpec::Kind::Arange;
  l.init.a = 1;
  l.init.b = 0.5;
  CHECK(agtrace::initial_values(l, 0) == std::vector<double>{1, 1.5, 2, 2.5});

  l.init.kind = InitSpec::Kind::Linspace;
  l.shape = {5};
  l.init.a = 0;
  l.init.b = 1;
  CHECK(agtrace::initial_values(l, 0) == std::vector<double>{0, 0.25, 0.5, 0.75, 1});
  // n = 4: step 1/3; the second half counts back from hi, as PyTorch does, so element 2 is
  // 1 - 1/3 (0.6666666666666667), not 2 * (1/3) (0.6666666666666666).
  l.shape = {4};
  auto v = agtrace::initial_values(l, 0);
  REQUIRE(v.size() == 4);
  CHECK(v[0] == 0.0);
  CHECK(v[1] == 1.0 / 3.0);
  CHECK(v[2] == 1.0 - 1.0 / 3.0);
  CHECK(v[2] != 2.0 * (1.0 / 3.0));
  CHECK(v[3] == 1.0);
  l.shape = {3};
  l.init.a = -1;
  CHECK(agtrace::initial_values(l, 0) == std::vector<double>{-1, 0, 1});
  // numel == 1 gives lo.
  l.shape = {1, 1};
  l.init.a = 3;
  l.init.b = 7;
  CHECK(agtrace::initial_values(l, 0) == std::vector<double>{3});
  l.shape = {0};
  CHECK(agtrace::initial_values(l, 0).empty());

  // From a file: the spec example's x is arange(0, 0.1) rounded to float32.
  auto x = values_of(kExample, "x");
  REQUIRE(x.size() == 6);
  for (int i = 0; i < 6; ++i) CHECK(x[i] == f32(i * 0.1));
  CHECK(x[1] == static_cast<double>(0.1f));
  CHECK(x[1] != 0.1);  // the float32 rounding was applied
  auto b = values_of(kExample, "b");
  CHECK(b == std::vector<double>{f32(0.1), f32(-0.2), f32(0.3), 0.0});
}

TEST_CASE("dtype rounding of initial values", "[init]") {
  LeafSpec l;
  l.name = "t";
  l.shape = {3};
  l.init.kind = InitSpec::Kind::Values;
  l.init.values = {1.7, -1.7, 0.1};
  l.dtype = DType::Int64;
  CHECK(agtrace::initial_values(l, 0) == std::vector<double>{1, -1, 0});
  l.dtype = DType::Bool;
  CHECK(agtrace::initial_values(l, 0) == std::vector<double>{1, 1, 1});
  l.dtype = DType::Float16;
  CHECK(agtrace::initial_values(l, 0)[2] == 0.0999755859375);  // nearest half to 0.1
  l.dtype = DType::Float32;
  CHECK(agtrace::initial_values(l, 0)[2] == static_cast<double>(0.1f));
  // A hand-made LeafSpec with the wrong number of values is refused.
  l.init.values = {1, 2};
  CHECK_THROWS_AS(agtrace::initial_values(l, 0), std::invalid_argument);
}

TEST_CASE("the random generator is the documented SplitMix64 + FNV-1a", "[init]") {
  // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (published test vector), so this seed makes the
  // generator state 0, and SplitMix64 from state 0 first yields 0xe220a8397b1dcdaf, then
  // 0x6e789e6aa1b965f4 (published outputs).
  const uint64_t seed = 0xaf63dc4c8601ec8cULL;
  const uint64_t r0 = 0xe220a8397b1dcdafULL, r1 = 0x6e789e6aa1b965f4ULL;
  LeafSpec l;
  l.name = "a";
  l.dtype = DType::Float64;
  l.shape = {1};
  l.init.kind = InitSpec::Kind::Uniform;
  l.init.a = 0;
  l.init.b = 1;
  CHECK(agtrace::initial_values(l, seed)[0] == static_cast<double>(r0 >> 11) * 0x1.0p-53);
  l.init.a = -2;
  l.init.b = 6;
  CHECK(agtrace::initial_values(l, seed)[0] == -2 + 8 * (static_cast<double>(r0 >> 11) * 0x1.0p-53));

  l.init.kind = InitSpec::Kind::Randint;
  l.init.a = -3;
  l.init.b = 10;
  CHECK(agtrace::initial_values(l, seed)[0] == -3 + std::floor(static_cast<double>(r0 >> 11) * 0x1.0p-53 * 13));

  l.init.kind = InitSpec::Kind::Normal;
  l.init.a = 1;
  l.init.b = 2;
  const double u1 = static_cast<double>((r0 >> 11) + 1) * 0x1.0p-53;
  const double u2 = static_cast<double>(r1 >> 11) * 0x1.0p-53;
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos((2.0 * 3.141592653589793) * u2);
  CHECK(agtrace::initial_values(l, seed)[0] == 1 + 2 * z);
}

TEST_CASE("random initialisers are reproducible and per tensor", "[init]") {
  const std::string two = R"({"name": "r", "seed": 11, "program": [], "tensors": {
      "W": {"shape": [4, 5], "init": {"uniform": [-1, 1]}},
      "V": {"shape": [4, 5], "init": {"uniform": [-1, 1]}}}})";
  const std::string three = R"({"name": "r", "seed": 11, "program": [], "tensors": {
      "A": {"shape": [7], "init": {"normal": [0, 1]}},
      "W": {"shape": [4, 5], "init": {"uniform": [-1, 1]}},
      "V": {"shape": [4, 5], "init": {"uniform": [-1, 1]}}}})";
  auto w1 = values_of(two, "W");
  auto w2 = values_of(two, "W");
  CHECK(w1 == w2);                              // same seed and name: same values
  CHECK(w1 != values_of(two, "V"));             // another name: other values
  CHECK(w1 == values_of(three, "W"));           // adding a tensor changes nothing
  CHECK(values_of(two, "V") == values_of(three, "V"));
  std::string reseeded = two;
  reseeded.replace(reseeded.find("\"seed\": 11"), 10, "\"seed\": 12");
  CHECK(w1 != values_of(reseeded, "W"));        // another seed: other values
  std::set<double> distinct(w1.begin(), w1.end());
  CHECK(distinct.size() == w1.size());
  for (double v : w1) CHECK(v == f32(v));       // rounded to float32
}

TEST_CASE("uniform, normal and randint ranges", "[init]") {
  LeafSpec l;
  l.name = "u";
  l.dtype = DType::Float64;
  l.shape = {100, 50};
  l.init.kind = InitSpec::Kind::Uniform;
  l.init.a = -0.5;
  l.init.b = 2.0;
  auto u = agtrace::initial_values(l, 3);
  double sum = 0;
  bool inside = true;
  for (double v : u) {
    inside = inside && v >= -0.5 && v < 2.0;
    sum += v;
  }
  CHECK(inside);
  CHECK(std::fabs(sum / u.size() - 0.75) < 0.05);

  // Float32 values are the float64 ones rounded (same draws, rounded afterwards).
  LeafSpec l32 = l;
  l32.dtype = DType::Float32;
  auto u32 = agtrace::initial_values(l32, 3);
  REQUIRE(u32.size() == u.size());
  bool rounded = true;
  for (std::size_t i = 0; i < u.size(); ++i) rounded = rounded && u32[i] == f32(u[i]);
  CHECK(rounded);

  // uniform with lo == hi is constant.
  l.init.a = l.init.b = 4.0;
  for (double v : agtrace::initial_values(l, 3)) CHECK(v == 4.0);

  l.init.kind = InitSpec::Kind::Normal;
  l.init.a = 3.0;
  l.init.b = 2.0;
  auto n = agtrace::initial_values(l, 5);
  double mean = 0, var = 0;
  for (double v : n) mean += v;
  mean /= n.size();
  for (double v : n) var += (v - mean) * (v - mean);
  var /= n.size();
  CHECK(std::fabs(mean - 3.0) < 0.1);
  CHECK(std::fabs(std::sqrt(var) - 2.0) < 0.1);
  l.init.b = 0.0;
  for (double v : agtrace::initial_values(l, 5)) CHECK(v == 3.0);

  l.init.kind = InitSpec::Kind::Randint;
  l.init.a = -2;
  l.init.b = 3;
  for (DType d : {DType::Int64, DType::Float32, DType::Float64}) {
    l.dtype = d;
    auto r = agtrace::initial_values(l, 9);
    std::set<double> seen;
    bool ok = true;
    for (double v : r) {
      ok = ok && v == std::floor(v) && v >= -2 && v < 3;
      seen.insert(v);
    }
    CHECK(ok);
    CHECK(seen == std::set<double>{-2, -1, 0, 1, 2});
  }
}

TEST_CASE("random initialisers from a scenario file", "[init]") {
  auto s = load(R"({"name": "r", "seed": 5, "program": [], "tensors": {
      "idx": {"shape": [3, 4], "dtype": "int64", "init": {"randint": [0, 10]}},
      "n": {"shape": [8], "dtype": "bfloat16", "init": {"normal": [0, 1]}}}})");
  auto idx = agtrace::initial_values(s->tensors[0], s->seed);
  REQUIRE(idx.size() == 12);
  for (double v : idx) {
    CHECK(v == std::floor(v));
    CHECK(v >= 0);
    CHECK(v < 10);
  }
  auto n = agtrace::initial_values(s->tensors[1], s->seed);
  REQUIRE(n.size() == 8);
  for (double v : n) CHECK(v == agtrace::round_to_dtype(v, DType::BFloat16));
}

TEST_CASE("float32 linspace matches torch.linspace bit for bit", "[scenario][init]") {
  // Measured with PyTorch 1.13: torch.linspace(-0.5, 0.9, 12) and torch.linspace(-1, 1, 6).
  agtrace::LeafSpec leaf;
  leaf.name = "w";
  leaf.shape = {12};
  leaf.init.kind = agtrace::InitSpec::Kind::Linspace;
  leaf.init.a = -0.5;
  leaf.init.b = 0.9;
  const std::vector<double> torch12 = {-0.5, -0.37272727489471436, -0.2454545497894287, -0.11818182468414307,
                                       0.009090900421142578, 0.13636362552642822, 0.26363635063171387,
                                       0.3909090757369995, 0.5181818008422852, 0.6454545259475708,
                                       0.7727272510528564, 0.8999999761581421};
  CHECK(agtrace::initial_values(leaf, 0) == torch12);
  leaf.shape = {6};
  leaf.init.a = -1;
  leaf.init.b = 1;
  const std::vector<double> torch6 = {-1.0, -0.6000000238418579, -0.19999998807907104, 0.19999998807907104,
                                      0.6000000238418579, 1.0};
  CHECK(agtrace::initial_values(leaf, 0) == torch6);
}

TEST_CASE("float32 linspace gives torch.linspace's bits on ranges made in vectors", "[scenario][init]") {
  // Printed by tests/tools/linspace_reference.py (torch 1.13, one thread): ranges of 16
  // elements and more, whose leading sixteens torch makes as vectors of eight from a base.
  struct Range {
    double lo, hi;
    int64_t n;
    uint64_t hash;
  };
  const std::vector<Range> ranges = {
      {-1, 1, 8, 0xa01adb45a1978da5ull},
      {-1, 1, 16, 0xa6ce041c3dfdbcd2ull},
      {0.1, 0.7, 17, 0x9456731a2d779604ull},
      {-1, 1, 31, 0x4adb26e48be24cefull},
      {-1, 1, 37, 0x9e78a0f719a7bb02ull},
      {1, -1, 48, 0x424a09df1400e4fdull},
      {0, 1, 100, 0x13892e6d7323277aull},
      {-3.7, 2.9, 1000, 0xc83b0f2a12da5b5aull},
      {-5, 5, 2000, 0xaf2775c5a473a2afull},
      {-2.5, 7.25, 32768, 0x28a788f534f76d28ull},
  };
  agtrace::LeafSpec leaf;
  leaf.name = "w";
  leaf.init.kind = agtrace::InitSpec::Kind::Linspace;
  for (const Range& r : ranges) {
    INFO("linspace(" << r.lo << ", " << r.hi << ", " << r.n << ")");
    leaf.shape = {r.n};
    leaf.init.a = r.lo;
    leaf.init.b = r.hi;
    const Tensor t = agtrace::tensor_from_values({r.n}, DType::Float32, agtrace::initial_values(leaf, 0));
    CHECK(agtrace::test::fnv(t) == r.hash);
    // fill_initial_values_f32 (a float32 leaf's storage) writes the same values.
    std::vector<float> direct(static_cast<size_t>(r.n));
    agtrace::fill_initial_values_f32(leaf, 0, direct.data());
    CHECK(std::memcmp(direct.data(), t->storage->f32(), direct.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("the fast normal initialiser's log and cos stay within 1e-15 of libm", "[init]") {
  // fill_initial_values_f32 keeps a polynomial normal value only when a 1e-13 margin around
  // it rounds to one float32; that is sound only while these stay far inside the margin.
  double worst_log = 0.0, worst_cos = 0.0;
  for (int e = -53; e <= 0; ++e)
    for (int j = 0; j < 4096; ++j) {
      const double u = std::ldexp(1.0 + j / 4096.0 * (j == 4095 ? 0.99999 : 1.0), e);
      if (u > 1.0) continue;
      const double ref = std::log(u), got = agtrace::normal_math::log_unit_interval(u);
      worst_log = std::max(worst_log, std::fabs(got - ref) / std::max(std::fabs(ref), 1e-300));
    }
  CHECK(agtrace::normal_math::log_unit_interval(1.0) == 0.0);
  // Near 1, where ln u is small: relative accuracy holds there too.
  for (int j = 1; j < 100000; ++j) {
    const double u = 1.0 - j * 0x1.0p-53;
    worst_log = std::max(worst_log, std::fabs(agtrace::normal_math::log_unit_interval(u) - std::log(u)) / -std::log(u));
  }
  const double two_pi = 2.0 * 3.141592653589793;
  for (int j = 0; j <= 2000000; ++j) {
    const double x = two_pi * (j / 2000000.0);
    worst_cos = std::max(worst_cos, std::fabs(agtrace::normal_math::cos_zero_to_two_pi(x) - std::cos(x)));
  }
  INFO("worst relative log error " << worst_log << ", worst absolute cos error " << worst_cos);
  CHECK(worst_log < 1e-15);
  CHECK(worst_cos < 1e-15);
}

TEST_CASE("float32 normal leaves take the definition's bits at any size, seed and thread count", "[init]") {
  LeafSpec l;
  l.name = "conv_weight";
  l.dtype = DType::Float32;
  l.init.kind = InitSpec::Kind::Normal;
  l.shape = {1000, 1000};
  const int threads_before = agtrace::kernels::threads();
  // The last pair puts every value within 1e-13 of the float32 rounding midpoint between 1
  // and 1 + 2^-23, so that each element is decided by the definition (libm), not the fast path.
  for (const auto& [mean, stddev] : std::vector<std::pair<double, double>>{
           {0.0, 0.02}, {-7e-05, 0.0254}, {3.0, 1e-4}, {0.0, 1.0}, {1.0 + 0x1.0p-24, 1e-14}}) {
    l.init.a = mean;
    l.init.b = stddev;
    const std::vector<double> expected = agtrace::initial_values(l, 11);
    for (int threads : {1, 2}) {
      agtrace::kernels::set_threads(threads);
      std::vector<float> got(expected.size(), -999.0f);
      agtrace::fill_initial_values_f32(l, 11, got.data());
      size_t same = 0;
      for (size_t i = 0; i < expected.size(); ++i) same += static_cast<double>(got[i]) == expected[i] ? 1 : 0;
      INFO("mean " << mean << " std " << stddev << " threads " << threads);
      CHECK(same == expected.size());
    }
  }
  agtrace::kernels::set_threads(threads_before);
}

TEST_CASE("every build of the fast normal loop this CPU runs gives the definition's bits", "[init]") {
  // fill_normal_f32_block takes the fastest build; each one must give the same floats, so the
  // ones a faster CPU skips are run here directly (an AVX-512 host checks all three).
  using agtrace::normal_math::NormalBuild;
  const uint64_t state0 = 0x243f6a8885a308d3ULL;
  const int64_t n = 300000;
  int builds = 0;
  for (NormalBuild build : {NormalBuild::Baseline, NormalBuild::Avx2, NormalBuild::Avx512}) {
    if (!agtrace::normal_math::normal_build_available(build)) continue;
    ++builds;
    for (const auto& [mean, stddev] : std::vector<std::pair<double, double>>{{0.0, 0.02}, {1.0 + 0x1.0p-24, 1e-14}}) {
      INFO("build " << static_cast<int>(build) << " mean " << mean << " std " << stddev);
      std::vector<float> got(static_cast<size_t>(n), -999.0f);
      // An odd start and end: the loop's blocks of 256 and its vector tails.
      agtrace::normal_math::fill_normal_f32_block_with(build, state0, mean, stddev, got.data() - 3, 3, n - 1);
      size_t same = 0;
      for (int64_t i = 3; i < n - 1; ++i)
        same += got[static_cast<size_t>(i - 3)] ==
                        agtrace::normal_math::normal_element_by_definition(state0, i, mean, stddev)
                    ? 1
                    : 0;
      CHECK(same == static_cast<size_t>(n - 4));
    }
  }
  CHECK(builds >= 1);
}

TEST_CASE("float32 leaves generated into their storage get initial_values's values", "[init]") {
  // The interpreter fills float32 leaves with fill_initial_values_f32 (no vector of doubles);
  // every kind must give the floats of initial_values, element for element.
  LeafSpec l;
  l.name = "w";
  l.dtype = DType::Float32;
  l.shape = {7, 9};
  const std::vector<std::pair<InitSpec::Kind, std::pair<double, double>>> kinds = {
      {InitSpec::Kind::Uniform, {-0.3, 0.7}}, {InitSpec::Kind::Normal, {0.5, 2.0}},
      {InitSpec::Kind::Linspace, {-1.0, 3.0}}, {InitSpec::Kind::Arange, {2.0, 0.1}},
      {InitSpec::Kind::Full, {1.1, 0.0}},       {InitSpec::Kind::Randint, {-3.0, 9.0}}};
  for (const auto& [kind, ab] : kinds) {
    l.init.kind = kind;
    l.init.a = ab.first;
    l.init.b = ab.second;
    const std::vector<double> expected = agtrace::initial_values(l, 42);
    std::vector<float> got(expected.size(), -999.0f);
    agtrace::fill_initial_values_f32(l, 42, got.data());
    for (size_t i = 0; i < expected.size(); ++i) CHECK(static_cast<double>(got[i]) == expected[i]);
  }
  // Large uniform leaves take a split path (draw i computed from i alone): the same bits
  // at every thread count, across chunk boundaries.
  l.init.kind = InitSpec::Kind::Uniform;
  l.init.a = -0.05;
  l.init.b = 0.05;
  l.shape = {3, 40000};
  const std::vector<double> expected = agtrace::initial_values(l, 7);
  const int threads_before = agtrace::kernels::threads();
  for (int threads : {1, 2, 3}) {
    agtrace::kernels::set_threads(threads);
    std::vector<float> big(expected.size(), -999.0f);
    agtrace::fill_initial_values_f32(l, 7, big.data());
    size_t same = 0;
    for (size_t i = 0; i < expected.size(); ++i) same += static_cast<double>(big[i]) == expected[i] ? 1 : 0;
    CHECK(same == expected.size());
  }
  agtrace::kernels::set_threads(threads_before);
  l.init.kind = InitSpec::Kind::Values;
  l.shape = {3};
  l.init.values = {0.1, -2.0, 1e-3};
  std::vector<float> got(3);
  agtrace::fill_initial_values_f32(l, 0, got.data());
  CHECK(got == std::vector<float>{0.1f, -2.0f, 1e-3f});
}
