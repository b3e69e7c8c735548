// Checkpoint blocks (non-reentrant torch.utils.checkpoint, issue #4): nothing the body
// saves is kept, the body runs again at the first unpack, gradients equal the plain run,
// and the names the body binds stay local.
#include <catch2/catch.hpp>

#include "interp/run_helpers.hpp"

using agtrace::test::run_text;

namespace {
const char* kScenario = R"JSON({"name": "t", "tensors": {
    "x": {"shape": [4, 3], "requires_grad": true, "init": {"linspace": [-1, 1]}},
    "W1": {"shape": [5, 3], "requires_grad": true, "init": {"linspace": [-0.6, 0.7]}},
    "W2": {"shape": [2, 5], "requires_grad": true, "init": {"linspace": [-0.8, 0.5]}}},
  "program": PROGRAM})JSON";
std::string scenario(const std::string& program) {
  std::string s = kScenario;
  s.replace(s.find("PROGRAM"), 7, program);
  return s;
}
const std::string kBody = R"JSON(["print('body')", "h = torch.tanh(x @ W1.t())", "out = h @ W2.t()"])JSON";
std::string checkpointed(const std::string& after) {
  return R"JSON([{"checkpoint": )JSON" + kBody + R"JSON(, "inputs": ["x"], "outputs": ["out"]}, "loss = out.sum()")JSON" +
         after + "]";
}
std::map<std::string, std::vector<double>> grads(const agtrace::RunResult& r) {
  std::map<std::string, std::vector<double>> m;
  for (const auto& g : r.grads) m[g.name] = g.values;
  return m;
}
}  // namespace

TEST_CASE("checkpoint: nothing saved is kept, backward recomputes once, grads equal the plain run", "[checkpoint]") {
  auto cp = run_text(scenario(checkpointed(R"JSON(, "loss.backward()")JSON")), true);
  auto plain = run_text(scenario(R"JSON(["print('body')", "h = torch.tanh(x @ W1.t())", "out = h @ W2.t()",
                                         "loss = out.sum()", "loss.backward()"])JSON"),
                        true);
  REQUIRE(cp.errors.empty());
  CHECK(cp.printed == std::vector<std::string>{"body", "body"});  // the body ran again in backward
  CHECK(grads(cp) == grads(plain));                                // bitwise, as measured in PyTorch
  CHECK(cp.memory.saved_bytes == 0);                               // outer hooks see 0 packs
  CHECK(cp.memory.checkpoint_avoided_bytes == plain.memory.saved_bytes);
  REQUIRE(cp.checkpoints.size() == 1);
  CHECK(cp.checkpoints[0].recomputations == 1);
  CHECK(cp.checkpoints[0].recomputed_at == std::vector<int>{4});
  CHECK(cp.statements[1].runs == 2);
  CHECK(cp.statements[3].runs == 1);
  int begins = 0;
  for (const auto& e : cp.events)
    if (e.kind == "recompute" && e.what.rfind("begin", 0) == 0) {
      ++begins;
      CHECK(e.statement == 4);
      CHECK(e.in_backward);
    }
  CHECK(begins == 1);
  REQUIRE(cp.checkpoint_comparison.present);
  CHECK(cp.checkpoint_comparison.saved_bytes_with == 0);
  CHECK(cp.checkpoint_comparison.saved_bytes_without == plain.memory.saved_bytes);
}

TEST_CASE("checkpoint: a _saved_ read before backward recomputes, and backward does not again", "[checkpoint]") {
  auto r = run_text(scenario(checkpointed(R"JSON(, "m = loss.grad_fn.next_functions[0][0]._saved_self",
      "print(m.grad_fn.name(), m.requires_grad)", "loss.backward()")JSON")));
  REQUIRE(r.errors.empty());
  CHECK(r.printed == std::vector<std::string>{"body", "body", "TanhBackward0 True"});
  REQUIRE(r.checkpoints.size() == 1);
  CHECK(r.checkpoints[0].recomputed_at == std::vector<int>{4});
}

TEST_CASE("checkpoint: names bound in the body are local - a second backward fails", "[checkpoint]") {
  auto r = run_text(scenario(checkpointed(R"JSON(, {"try": ["h"]}, "loss.backward()", {"try": ["loss.backward()"]})JSON")));
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].kind == "name_error");
  CHECK(r.errors[1].kind == "saved_tensors_freed");
}

TEST_CASE("checkpoint: retain_graph keeps the recomputed values, so a second backward does not recompute",
          "[checkpoint]") {
  auto r = run_text(scenario(checkpointed(R"JSON(, "loss.backward(retain_graph=True)", "loss.backward()")JSON")));
  REQUIRE(r.errors.empty());
  CHECK(r.printed.size() == 2);
  REQUIRE(r.checkpoints.size() == 1);
  CHECK(r.checkpoints[0].recomputations == 1);
}

TEST_CASE("checkpoint: an in-place edit of an input between forward and backward is not checked", "[checkpoint]") {
  auto r = run_text(scenario(R"JSON(["a = x * 1", {"checkpoint": ["out = torch.tanh(a @ W1.t())"], "inputs": ["a"],
      "outputs": ["out"]}, "a.mul_(2)", "out.sum().backward()"])JSON"));
  CHECK(r.errors.empty());
  CHECK_FALSE(r.hook_warnings.empty());
}
