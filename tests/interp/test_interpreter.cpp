// The interpreter: statements, blocks, Python values, errors at the right statement.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "errors.hpp"
#include "interp/run_helpers.hpp"
#include "interp/value.hpp"
#include "ops/table.hpp"
#include "tensor/dtype.hpp"

using agtrace::test::run_text;
using Catch::Matchers::Contains;

namespace {
const char* kX = R"JSON("x": {"shape": [2, 3], "requires_grad": true, "init": {"linspace": [-1, 1]}})JSON";
std::string scenario(const std::string& program, const std::string& tensors = kX) {
  return std::string(R"JSON({"name": "t", "tensors": {)JSON") + tensors + R"JSON(}, "program": )JSON" + program + "}";
}
}  // namespace

TEST_CASE("print uses Python's printed forms", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    "print(1, 2.5, True, None, 'hi')",
    "print((1,), (1, 2), [3, 4], x.shape, x.dtype, torch.int64)",
    "print(0.1 + 0.2, 1e-05, 1 / 3, 2 ** 10, 7 // 2, -7 % 3, 10 / 4)",
    "print(x.size(1), x.size(), len(x.shape), x.shape[-1])",
    "print(x.shape == (2, 3), x.shape == [2, 3], x.dtype == torch.float32)"
  ])JSON"));
  REQUIRE(r.printed.size() == 5);
  CHECK(r.printed[0] == "1 2.5 True None hi");
  CHECK(r.printed[1] == "(1,) (1, 2) [3, 4] torch.Size([2, 3]) torch.float32 torch.int64");
  CHECK(r.printed[2] == "0.30000000000000004 1e-05 0.3333333333333333 1024 3 2 2.5");
  CHECK(r.printed[3] == "3 torch.Size([2, 3]) 2 3");
  CHECK(r.printed[4] == "True False True");
}

TEST_CASE("tensors print their values, grad_fn and requires_grad", "[interp]") {
  // x is float32 linspace(-1, 1, 6): -0.2 is stored as -0.19999998807907104, printed as the
  // shortest decimal that reads back as that float32.
  auto r = run_text(scenario(R"JSON(["print(x)", "print(x * 2)", "print(x.detach()[0])", "print(x > 0)"])JSON"));
  REQUIRE(r.printed.size() == 4);
  CHECK(r.printed[0] == "tensor([[-1.0, -0.6, -0.19999999], [0.19999999, 0.6, 1.0]], requires_grad=True)");
  CHECK(r.printed[1] == "tensor([[-2.0, -1.2, -0.39999998], [0.39999998, 1.2, 2.0]], grad_fn=<MulBackward0>)");
  CHECK(r.printed[2] == "tensor([-1.0, -0.6, -0.19999999])");
  CHECK(r.printed[3] == "tensor([[False, False, False], [True, True, True]])");
}

TEST_CASE("an error inside try ends the block - the program goes on", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    {"try": ["a = 1", "x.add_(1)", "b = 2"]},
    "print(a)",
    {"try": ["print(b)"]}
  ])JSON"));
  REQUIRE(r.statements.size() == 5);
  CHECK(r.statements[0].status == "ok");
  CHECK(r.statements[1].status == "error");
  CHECK(r.statements[2].status == "not_run");
  CHECK(r.statements[3].status == "ok");
  CHECK(r.statements[4].status == "error");
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].kind == "leaf_inplace");
  CHECK(r.errors[0].caught);
  CHECK(r.errors[1].kind == "name_error");
  CHECK_FALSE(r.raised);
}

TEST_CASE("an error outside try ends the program", "[interp]") {
  auto r = run_text(scenario(R"JSON(["y = x @ x", "print('after')"])JSON"));
  CHECK(r.raised);
  CHECK(r.statements[0].status == "error");
  CHECK(r.statements[1].status == "not_run");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].kind == "shape_mismatch");
  CHECK_THAT(r.errors[0].message, Contains("mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)"));
  CHECK(r.printed.empty());
}

TEST_CASE("no_grad and enable_grad blocks switch grad mode", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    {"no_grad": ["a = x * 2", "print(torch.is_grad_enabled(), a.requires_grad)",
                 {"enable_grad": ["b = x * 2", "print(torch.is_grad_enabled(), b.requires_grad)"]}]},
    "print(torch.is_grad_enabled())"
  ])JSON"));
  REQUIRE(r.printed.size() == 3);
  CHECK(r.printed[0] == "False False");
  CHECK(r.printed[1] == "True True");
  CHECK(r.printed[2] == "True");
}

TEST_CASE("repeat runs its body again - statements are numbered once", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    "n = 0",
    {"repeat": 3, "body": ["n = n + 1", "loss = (x * x).sum()", "loss.backward()"]},
    "print(n, x.grad[0, 0].item())"
  ])JSON"));
  REQUIRE(r.statements.size() == 5);
  CHECK(r.statements[1].runs == 3);
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "3 -6.0");  // d/dx sum(x*x) = 2x = -2, accumulated three times
}

TEST_CASE("names: tuple unpacking, del, rebinding, is", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    "a, b = 1, 2",
    "(c,) = (3,)",
    "print(a, b, c)",
    "y = x",
    "print(y is x, x * 1 is x, None is None, a is not b)",
    "del y",
    {"try": ["print(y)"]},
    {"try": ["p, q = 1, 2, 3"]}
  ])JSON"));
  CHECK(r.printed[0] == "1 2 3");
  CHECK(r.printed[1] == "True False True True");
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].kind == "name_error");
  CHECK(r.errors[1].kind == "type_error");
  CHECK_THAT(r.errors[1].message, Contains("too many values to unpack"));
}

TEST_CASE("x.grad = None drops the gradient - grads accumulate otherwise", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    "(x * 3.0).sum().backward()",
    "(x * 3.0).sum().backward()",
    "print(x.grad[0, 0].item())",
    "x.grad = None",
    "print(x.grad)",
    "(x * 3.0).sum().backward()",
    "print(x.grad[1, 2].item())"
  ])JSON"));
  CHECK(r.printed == std::vector<std::string>{"6.0", "None", "3.0"});
}

TEST_CASE("torch.autograd.grad returns gradients without touching .grad", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    "y = (x ** 3).sum()",
    "(g,) = torch.autograd.grad(y, [x])",
    "print(g[0, 0].item(), x.grad)",
    {"try": ["torch.autograd.grad(y, [x])"]},
    "z = (x * 2).sum()",
    {"try": ["torch.autograd.grad(z, [x, torch.ones(2)])"]}
  ])JSON"));
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "3.0 None");
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].kind == "saved_tensors_freed");
  CHECK(r.errors[0].phase == "backward");
}

TEST_CASE("walks are keyed by the root's name or by statement", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    "(x * 2).sum().backward()",
    "y = x.exp()",
    "y.sum().backward()",
    "z = y.sum()"
  ])JSON"));
  std::vector<std::string> keys;
  for (const auto& w : r.walks) keys.push_back(w.key);
  CHECK(keys == std::vector<std::string>{"statement 0", "statement 2", "y", "z"});
}

// The walk of a node on the leading single-edge chain of the previous walk is that walk's
// rest (issue #6 reuses it); a walk from past the chain (ExpBackward0, after AddBackward0's
// two edges) is walked afresh: the rest of the earlier walk holds SinBackward0, which
// ExpBackward0 does not reach. Walks at the end go in name order: a1, a2, a25, a3.
TEST_CASE("walks from inside an earlier walk list the same nodes as a fresh walk", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    "a3 = x * 2",
    "a25 = a3.exp()",
    "a2 = a25 + x.sin()",
    "a1 = a2.tanh()",
    "a1.sum().backward()"
  ])JSON"));
  std::map<std::string, std::vector<std::string>> walks;
  for (const auto& w : r.walks)
    for (int64_t id : w.nodes) walks[w.key].push_back(r.nodes.at(id).name);
  using V = std::vector<std::string>;
  CHECK(walks["statement 4"] == V{"SumBackward0", "TanhBackward0", "AddBackward0", "ExpBackward0", "MulBackward0",
                                  "AccumulateGrad", "SinBackward0"});
  CHECK(walks["a1"] == V{"TanhBackward0", "AddBackward0", "ExpBackward0", "MulBackward0", "AccumulateGrad",
                         "SinBackward0"});
  CHECK(walks["a2"] == V{"AddBackward0", "ExpBackward0", "MulBackward0", "AccumulateGrad", "SinBackward0"});
  CHECK(walks["a25"] == V{"ExpBackward0", "MulBackward0", "AccumulateGrad"});
  CHECK(walks["a3"] == V{"MulBackward0", "AccumulateGrad"});
}

// Node snapshots (issue #6 takes them while backward runs and keeps them at the end when
// nothing changed): what backward released shows, and a later name bound to a saved tensor
// shows too.
TEST_CASE("node snapshots show what backward released and names bound after it", "[interp]") {
  // h is a non-leaf: a declared leaf keeps its declared name when bound again.
  const std::string program = R"JSON([
    "h = x.exp()",
    "y = h * h",
    "y.sum().backward()"REBIND
  ])JSON";
  auto mul_of = [](const agtrace::RunResult& r) {
    for (const auto& [id, n] : r.nodes)
      if (n.name == "MulBackward0") return n;
    FAIL("no MulBackward0 snapshot");
    return agtrace::NodeSnapshot{};
  };
  auto run_with = [&](const std::string& rebind) {
    std::string p = program;
    p.replace(p.find("REBIND"), 6, rebind);
    return run_text(scenario(p));
  };
  const agtrace::NodeSnapshot kept = mul_of(run_with(""));
  CHECK(kept.released);
  CHECK(kept.released_at == 2);
  REQUIRE(kept.saved.size() == 2);
  for (const agtrace::SavedSnapshot& s : kept.saved) {
    CHECK(s.released);
    CHECK(s.released_at == 2);
    CHECK(s.same_object_as.str() == "h");
  }
  const agtrace::NodeSnapshot renamed = mul_of(run_with(", \"z = h\""));
  for (const agtrace::SavedSnapshot& s : renamed.saved) CHECK(s.same_object_as.str() == "z");
}

TEST_CASE("Python integers are exact in int64 and refused beyond it (never wrapped)", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    "print(2**62 + (2**62 - 1), 9007199254740993 + 0, -7 // 2, -7 % 2, 2 ** 10 ** 1)",
    {"try": ["a = 2**63"]},
    {"try": ["b = 9223372036854775807 + 1"]},
    {"try": ["c = -9223372036854775807 - 2"]},
    {"try": ["d = 3037000500 * 3037000500"]},
    {"try": ["e = 1 // 0"]}
  ])JSON"));
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "9223372036854775807 9007199254740993 -4 1 1024");
  REQUIRE(r.errors.size() == 5);
  for (int i = 0; i < 4; ++i) {
    CHECK(r.errors[static_cast<size_t>(i)].kind == "unsupported");
    CHECK(r.errors[static_cast<size_t>(i)].message.find("is beyond int64") != std::string::npos);
  }
  CHECK(r.errors[4].message == "ZeroDivisionError: integer division or modulo by zero");
}

TEST_CASE("errors carry the facts PyTorch's message holds", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    "h = x * 2",
    "s = (h * h).sum()",
    "h.mul_(3)",
    {"try": ["s.backward()"]}
  ])JSON"));
  REQUIRE(r.errors.size() == 1);
  const auto& e = r.errors[0];
  CHECK(e.kind == "saved_tensor_modified");
  CHECK(e.phase == "backward");
  CHECK(e.statement == 3);
  CHECK(e.facts["expected_version"] == 0);
  CHECK(e.facts["found_version"] == 1);
  CHECK(e.facts["saved_at"] == 1);
  CHECK(e.facts["modified_at"] == 2);
  CHECK(e.facts["node"] == "MulBackward0");
  // For a saved input PyTorch names the tensor's current grad_fn.
  CHECK_THAT(e.message, Contains("[torch.FloatTensor [2, 3]], which is output 0 of MulBackward0, is at version 1; "
                                 "expected version 0 instead"));
}

TEST_CASE("unknown names, methods and keywords are clear errors", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    {"try": ["x.sum(dims=1)"]},
    {"try": ["x.frobnicate()"]},
    {"try": ["F.grid_sample(x, x)"]},
    {"try": ["x.view(4, 2)"]},
    {"try": ["x.mm()"]}
  ])JSON"));
  REQUIRE(r.errors.size() == 5);
  CHECK(r.errors[0].kind == "type_error");
  CHECK_THAT(r.errors[0].message, Contains("unexpected keyword argument 'dims'"));
  CHECK_THAT(r.errors[0].message, Contains("did you mean 'dim'"));
  CHECK(r.errors[1].kind == "unsupported");
  CHECK(r.errors[2].kind == "unsupported");
  CHECK(r.errors[3].kind == "shape_mismatch");
  CHECK_THAT(r.errors[3].message, Contains("shape '[4, 2]' is invalid for input of size 6"));
  CHECK(r.errors[4].kind == "type_error");
  CHECK_THAT(r.errors[4].message, Contains("missing required argument: 'mat2'"));
}

TEST_CASE("an explicit dim=None is not an omitted dim where PyTorch tells them apart", "[interp]") {
  // Measured in PyTorch 1.13: x.max(dim=None), torch.max(x, None) and x.squeeze(None) raise
  // "Please look up dimensions by name"; x.max(), x.squeeze() and x.sum(dim=None) do not.
  auto r = run_text(scenario(R"JSON([
    {"try": ["x.max(dim=None)"]},
    {"try": ["torch.max(x, None)"]},
    {"try": ["x.squeeze(None)"]},
    "a = x.max()",
    "b = x.squeeze()",
    "c = x.sum(dim=None)"
  ])JSON"));
  REQUIRE(r.errors.size() == 3);
  for (const auto& e : r.errors) {
    CHECK(e.kind == "type_error");
    CHECK_THAT(e.message, Contains("Please look up dimensions by name, got: name = None."));
  }
}

TEST_CASE("a syntax error is bad input naming the statement and column", "[interp]") {
  try {
    run_text(scenario(R"JSON(["y = 1", "z = y +* 2"])JSON"));
    FAIL("expected an InputError");
  } catch (const agtrace::InputError& e) {
    CHECK(e.kind == "syntax");
    CHECK(e.statement == 1);
    CHECK(e.column == 8);
    CHECK(e.json_pointer == "/program/1");
  }
}

// Value's copies skip the members empty on both sides (issue #6); what they give is a
// member-for-member copy.
TEST_CASE("values copy member for member", "[interp]") {
  using agtrace::Value;
  Value size = Value::torch_size({2, 3});
  Value method = Value::method(Value::integer(7), "view");
  Value copy(method);
  CHECK(copy.kind == Value::Kind::Method);
  CHECK(copy.s == "view");
  REQUIRE(copy.items.size() == 1);
  CHECK(copy.items[0].i == 7);
  copy = size;  // the string and the items go, the size comes
  CHECK(copy.kind == Value::Kind::Size);
  CHECK(copy.s.empty());
  CHECK(copy.items.empty());
  CHECK(copy.size == agtrace::Shape{2, 3});
  copy = Value::str("abc");
  CHECK(copy.size.empty());
  CHECK(copy.s == "abc");
  const Value& same = copy;
  copy = same;
  CHECK(copy.s == "abc");
  Value real = Value::real(2.5);
  real.unsigned_int = true;
  Value real_copy(real);
  CHECK(real_copy.f == 2.5);
  CHECK(real_copy.unsigned_int);
}

TEST_CASE("a name read, deleted and bound again reads its latest value (names resolved once per program)", "[interp]") {
  // Each Name expression remembers where its name's value lives; `del` and rebinding must
  // make it look again, in straight-line code and across repeat iterations.
  auto r = run_text(scenario(R"JSON([
    "h = 1",
    {"repeat": 3, "body": ["print(h)", "del h", {"try": ["print(h)"]}, "h = 2", "print(h)", "g = h", "del g", "h = 3"]},
    "print(h)"
  ])JSON"));
  CHECK(r.printed == std::vector<std::string>{"1", "2", "3", "2", "3", "2", "3"});
  REQUIRE(r.errors.size() == 3);
  for (const auto& e : r.errors) CHECK(e.kind == "name_error");
}

TEST_CASE("every op's params fit the mask that marks which were written in a call", "[interp]") {
  size_t most = 0;
  for (const agtrace::ops::OpEntry& e : agtrace::ops::op_table()) most = std::max(most, e.params.size());
  CHECK(most > 0);
  CHECK(most <= agtrace::ops::Args::kMaxParams);
}

TEST_CASE("each statement reports the blocks around it, however often it runs", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    "a = 1",
    {"repeat": 3, "body": ["b = a", {"try": ["c = b"]}, {"no_grad": ["d = x * 2", {"repeat": 2, "body": ["e = d"]}]}, "f = 2"]},
    "g = 3"
  ])JSON"));
  std::vector<std::string> blocks;
  for (const auto& s : r.statements) blocks.push_back(s.block);
  CHECK(blocks == std::vector<std::string>{"", "repeat", "repeat/try", "repeat/no_grad", "repeat/no_grad/repeat",
                                           "repeat", ""});
  CHECK(r.statements[4].runs == 6);
}

// Snapshots intern a scalar saved value's repr once per distinct value (issue #6): 0.0 and
// -0.0 print differently, and an int alpha prints without a decimal point (measured on
// torch 1.13: `torch.add(x, y, alpha=a).grad_fn._saved_alpha` is 2, 0.0, -0.0, 2, 2.0).
TEST_CASE("saved scalars in snapshots keep each value's own repr", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    "a = torch.add(x, x, alpha=2)",
    "b = torch.add(x, x, alpha=0.0)",
    "c = torch.add(x, x, alpha=-0.0)",
    "d = torch.add(x, x, alpha=2)",
    "e = torch.add(x, x, alpha=2.0)",
    "(a + b + c + d + e).sum().backward()"
  ])JSON"));
  std::vector<std::string> alphas;
  for (const auto& [id, n] : r.nodes)
    if (n.name == "AddBackward0")
      for (const auto& s : n.saved)
        if (s.attr == "alpha") alphas.push_back(s.value.str());
  // Node ids follow creation order; the four `+` nodes come after the five adds.
  REQUIRE(alphas.size() >= 5);
  CHECK(std::vector<std::string>(alphas.begin(), alphas.begin() + 5) ==
        std::vector<std::string>{"2", "0.0", "-0.0", "2", "2.0"});
}

TEST_CASE("float(), int() and bool() convert as Python does, float('inf') included", "[interp]") {
  auto r = run_text(scenario(R"JSON([
    "print(float('inf'), float('-inf'), float('nan'), float(' -Infinity '), float('1.5'), float(2), float(True))",
    "print(int(2.7), int(-2.7), int('12'), int(x.sum() > 5), bool(0), bool('a'), bool(x[0, 0]))",
    "y = x.masked_fill(x > 0, float('-inf'))", "print(y.max().item())",
    {"try": ["float('abc')"]}, {"try": ["int(float('nan'))"]}, {"try": ["bool(x)"]}
  ])JSON"));
  REQUIRE(r.printed.size() == 3);
  CHECK(r.printed[0] == "inf -inf nan -inf 1.5 2.0 1.0");
  CHECK(r.printed[1] == "2 -2 12 0 False True True");
  CHECK(r.printed[2] == "-0.19999998807907104");
  REQUIRE(r.errors.size() == 3);
  for (const auto& e : r.errors) CHECK(e.kind == "type_error");
}

TEST_CASE("run with --values shows each element as the shortest decimal that reads back in its dtype", "[interp]") {
  // The definition display_value implements with a faster search for float32: the first
  // precision whose "%.*g" text, read as a double and rounded to the dtype, is the value.
  auto by_definition = [](double v, agtrace::DType d) {
    char buf[64];
    for (int prec = 1; prec <= 17; ++prec) {
      std::snprintf(buf, sizeof buf, "%.*g", prec, v);
      if (agtrace::round_to_dtype(std::strtod(buf, nullptr), d) == v) break;
    }
    return std::strtod(buf, nullptr);
  };
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  auto next_bits = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    // Random float32 bit patterns (every exponent), then the same values rounded to
    // bfloat16 and float16.
    const uint32_t bits = static_cast<uint32_t>(next_bits());
    float f;
    std::memcpy(&f, &bits, sizeof f);
    if (!std::isfinite(f)) continue;
    for (agtrace::DType d : {agtrace::DType::Float32, agtrace::DType::BFloat16, agtrace::DType::Float16}) {
      const double v = agtrace::round_to_dtype(static_cast<double>(f), d);
      if (!std::isfinite(v)) continue;
      ++checked;
      if (agtrace::display_value(v, d) != by_definition(v, d)) {
        INFO("value " << v << " dtype " << agtrace::dtype_name(d));
        CHECK(agtrace::display_value(v, d) == by_definition(v, d));
      }
    }
  }
  CHECK(checked > 500000);
  CHECK(agtrace::display_value(0.1f, agtrace::DType::Float32) == 0.1);
  CHECK(agtrace::display_value(100.0, agtrace::DType::Float32) == 100.0);
  CHECK(std::isnan(agtrace::display_value(std::nan(""), agtrace::DType::Float32)));
}

TEST_CASE("print summarises a tensor of more than 1000 elements as PyTorch's print options do", "[interp]") {
  // torch.set_printoptions defaults: threshold 1000, edgeitems 3 (measured in 1.13:
  // print(torch.arange(2000.)) shows 0., 1., 2., ..., 1997., 1998., 1999.; 1000 elements
  // print in full). Each printed line stays short however large the tensor or the loop.
  const auto r = run_text(R"JSON({"name": "t", "tensors": {
      "x": {"shape": [2000], "init": {"arange": [0, 1]}},
      "w": {"shape": [2, 3, 200], "init": {"arange": [0, 1]}},
      "z": {"shape": [10, 100], "init": {"arange": [0, 1]}},
      "big": {"shape": [100000]}},
    "program": ["print(x)", "print(w)", "print(z)", {"repeat": 2000, "body": ["print(big)"]}]})JSON");
  REQUIRE(r.printed.size() == 2003);
  CHECK(r.printed[0] == "tensor([0.0, 1.0, 2.0, ..., 1997.0, 1998.0, 1999.0])");
  CHECK(r.printed[1] ==
        "tensor([[[0.0, 1.0, 2.0, ..., 197.0, 198.0, 199.0], [200.0, 201.0, 202.0, ..., 397.0, 398.0, 399.0], "
        "[400.0, 401.0, 402.0, ..., 597.0, 598.0, 599.0]], [[600.0, 601.0, 602.0, ..., 797.0, 798.0, 799.0], "
        "[800.0, 801.0, 802.0, ..., 997.0, 998.0, 999.0], [1000.0, 1001.0, 1002.0, ..., 1197.0, 1198.0, 1199.0]]])");
  CHECK(r.printed[2].find("...") == std::string::npos);
  CHECK(r.printed[2].find(", 999.0]])") != std::string::npos);
  CHECK(r.printed[2002] == "tensor([0.0, 0.0, 0.0, ..., 0.0, 0.0, 0.0])");
}
