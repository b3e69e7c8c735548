// Saved-tensor hooks blocks (issue #4): what each kind keeps, what unpack gives, and the
// version check PyTorch skips under hooks. Expected figures are derived from shapes and
// from PyTorch's rounding here, never copied from a run.
#include <catch2/catch.hpp>

#include <cmath>

#include "interp/run_helpers.hpp"
#include "tensor/dtype.hpp"

using agtrace::test::run_text;

namespace {
const char* kTensors =
    R"JSON("x": {"shape": [2, 3], "requires_grad": true, "init": {"linspace": [-1, 1]}},
           "W": {"shape": [3, 4], "requires_grad": true, "init": {"linspace": [-0.5, 0.9]}})JSON";
std::string scenario(const std::string& program) {
  return std::string(R"JSON({"name": "t", "tensors": {)JSON") + kTensors + R"JSON(}, "program": )JSON" + program + "}";
}
std::string hooks_block(const std::string& kind, const std::string& body) {
  return R"JSON({"saved_tensor_hooks": ")JSON" + kind + R"JSON(", "body": [")JSON" + body + R"JSON("]})JSON";
}
// x @ W saves x (2x3) and W (3x4), tanh saves its 2x4 result: float32 bytes.
constexpr int64_t kSaved = (6 + 12 + 8) * 4;

std::vector<double> linspace(double a, double b, int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(static_cast<double>(static_cast<float>(a + (b - a) * i / (n - 1))));
  return v;
}
const agtrace::GradRecord* grad_of(const agtrace::RunResult& r, const std::string& name) {
  for (const auto& g : r.grads)
    if (g.name == name) return &g;
  return nullptr;
}
}  // namespace

TEST_CASE("each hooks kind keeps what PyTorch's pack function returns", "[hooks]") {
  const std::string body = "y = (x @ W).tanh().sum()";
  SECTION("fp16 and bf16 keep half-size copies") {
    for (const char* kind : {"fp16", "bf16"}) {
      auto r = run_text(scenario("[" + hooks_block(kind, body) + "]"));
      INFO(kind);
      CHECK(r.errors.empty());
      CHECK(r.memory.saved_bytes == kSaved);  // what the pack function is handed
      CHECK(r.memory.hooks_saved_bytes == kSaved);
      CHECK(r.memory.hooks_packed_bytes == kSaved / 2);
      CHECK(r.memory.host_bytes == 0);
      int packs = 0;
      for (const auto& e : r.events)
        if (e.kind == "alloc" && e.op == std::string(kind) + " pack") ++packs;
      CHECK(packs == 3);
    }
  }
  SECTION("count and save_on_cpu on the CPU keep the saved tensor itself, no copy") {
    for (const char* kind : {"count", "save_on_cpu"}) {
      auto r = run_text(scenario("[" + hooks_block(kind, body) + "]"));
      INFO(kind);
      CHECK(r.memory.hooks_packed_bytes == kSaved);
      CHECK(r.memory.host_bytes == (std::string(kind) == "save_on_cpu" ? kSaved : 0));
      for (const auto& e : r.events) CHECK(e.op.find(" pack") == std::string::npos);
    }
  }
  SECTION("save_on_cpu on the meta device raises, as tensor.cpu() does") {
    std::string sc = scenario("[" + hooks_block("save_on_cpu", body) + "]");
    sc.insert(sc.find("\"tensors\""), R"JSON("device": "meta", )JSON");
    auto r = run_text(sc);
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].kind == "unsupported");
  }
}

TEST_CASE("fp16 packing: integer tensors are kept, float ones rounded to float16", "[hooks]") {
  auto r = run_text(scenario("[" + hooks_block("fp16", "m = x.max(dim=1)") +
                             R"JSON(, "v = m[0].grad_fn._saved_indices", "print(v.dtype)", "y = x * 1",)JSON" +
                             hooks_block("fp16", "s = y.sin().sum()") +
                             R"JSON(, "u = s.grad_fn.next_functions[0][0]._saved_self", "print(u.dtype, u is y)"])JSON"));
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 2);
  CHECK(r.printed[0] == "torch.int64");
  CHECK(r.printed[1] == "torch.float32 False");
  bool saw_indices = false;
  for (const auto& e : r.events)
    if (e.kind == "pack" && e.what == "MaxBackward0._saved_indices") {
      saw_indices = true;
      CHECK(e.packed_bytes == e.bytes);  // 2 int64 indices, not cast
    }
  CHECK(saw_indices);
}

TEST_CASE("fp16 hooks: backward computes from the rounded copy", "[hooks]") {
  // d/dx sum(sin(x)) = cos(x), with x as the float16 copy read back as float32.
  auto r = run_text(scenario("[" + hooks_block("fp16", "s = x.sin().sum()") + R"JSON(, "s.backward()"])JSON"), true);
  const auto* g = grad_of(r, "x");
  REQUIRE(g);
  const auto xs = linspace(-1, 1, 6);
  REQUIRE(g->values.size() == xs.size());
  bool differs_from_plain = false;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double rounded = agtrace::round_to_dtype(xs[i], agtrace::DType::Float16);
    CHECK(g->values[i] == Approx(std::cos(rounded)).epsilon(1e-6));
    if (std::fabs(std::cos(rounded) - std::cos(xs[i])) > 1e-6) differs_from_plain = true;
  }
  CHECK(differs_from_plain);  // the test would not notice a missing rounding otherwise
}

TEST_CASE("under hooks an in-place edit is not checked, and the report warns", "[hooks]") {
  auto run = [](const std::string& kind) {
    return run_text(scenario(R"JSON(["h = x * 1",)JSON" + hooks_block(kind, "s = h.sin().sum()") +
                             R"JSON(, "h.add_(1)", "s.backward()"])JSON"),
                    true);
  };
  const auto xs = linspace(-1, 1, 6);
  SECTION("count: backward sees the edited values") {
    auto r = run("count");
    CHECK(r.errors.empty());
    REQUIRE(r.hook_warnings.size() == 1);
    CHECK(r.hook_warnings[0].what == "SinBackward0._saved_self");
    CHECK(r.hook_warnings[0].expected_version == 0);
    CHECK(r.hook_warnings[0].found_version == 1);
    CHECK(r.hook_warnings[0].statement == 3);
    const auto* g = grad_of(r, "x");
    REQUIRE(g);
    for (size_t i = 0; i < xs.size(); ++i)
      CHECK(g->values[i] == Approx(std::cos(static_cast<float>(xs[i] + 1))).epsilon(1e-6));
  }
  SECTION("fp16: backward uses the copy packed before the edit") {
    auto r = run("fp16");
    CHECK(r.errors.empty());
    REQUIRE(r.hook_warnings.size() == 1);
    const auto* g = grad_of(r, "x");
    REQUIRE(g);
    for (size_t i = 0; i < xs.size(); ++i)
      CHECK(g->values[i] ==
            Approx(std::cos(agtrace::round_to_dtype(xs[i], agtrace::DType::Float16))).epsilon(1e-6));
  }
  SECTION("without hooks the same program raises the version error and nothing warns") {
    auto r = run_text(scenario(R"JSON(["h = x * 1", "s = h.sin().sum()", "h.add_(1)", "s.backward()"])JSON"));
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].kind == "saved_tensor_modified");
    CHECK(r.hook_warnings.empty());
  }
}

TEST_CASE("hooks: the innermost block wins, and saved values are still freed by backward", "[hooks]") {
  auto r = run_text(scenario(R"JSON([{"saved_tensor_hooks": "fp16", "body": [
      {"saved_tensor_hooks": "count", "body": ["y = (x @ W).sum()"]}]},
      "y.backward()", {"try": ["y.backward()"]}])JSON"));
  CHECK(r.memory.hooks_packed_bytes == r.memory.hooks_saved_bytes);  // count, not fp16
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].kind == "saved_tensors_freed");
  int releases = 0;
  for (const auto& e : r.events)
    if (e.kind == "release") {
      ++releases;
      CHECK(e.statement == 1);
    }
  CHECK(releases == 2);
}
