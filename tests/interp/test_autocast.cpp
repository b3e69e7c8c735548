// torch.autocast blocks: the scenario block, PyTorch 1.13's per-op cast policies (the CUDA
// float16 lists checked op by op), the casts and their cache, and a meta GPT-3 layer.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "account/korthikanti.hpp"
#include "errors.hpp"
#include "interp/run_helpers.hpp"
#include "ops/autocast_policy.hpp"
#include "ops/table.hpp"

using agtrace::test::run_text;
using agtrace::ops::autocast_policy;
using agtrace::ops::CastPolicy;

namespace {
std::string scenario(const std::string& program, const std::string& device = "cpu") {
  return R"JSON({"name": "t", "device": ")JSON" + device + R"JSON(", "seed": 1, "tensors": {
    "x": {"shape": [4, 3], "init": {"normal": [0, 1]}},
    "xg": {"shape": [4, 3], "requires_grad": true, "init": {"normal": [0, 1]}},
    "W": {"shape": [5, 3], "requires_grad": true, "init": {"normal": [0, 1]}},
    "b": {"shape": [5], "requires_grad": true, "init": {"normal": [0, 1]}},
    "c": {"shape": [5, 3], "init": {"normal": [0, 1]}}},
  "program": )JSON" + program + "}";
}
std::string input_error_pointer(const std::string& json) {
  try {
    agtrace::load_scenario_text(json, "<test>");
  } catch (const agtrace::InputError& e) {
    return e.json_pointer;
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("autocast block: an unknown dtype or device type is an input error at its pointer", "[autocast]") {
  CHECK(input_error_pointer(scenario(R"JS([{"autocast": "float32", "body": ["y = x * 2"]}])JS")) == "/program/0/autocast");
  CHECK(input_error_pointer(scenario(R"JS([{"autocast": "bfloat16", "device_type": "xla", "body": ["y = x"]}])JS")) ==
        "/program/0/device_type");
  CHECK(input_error_pointer(scenario(R"JS([{"autocast": "bfloat16"}])JS")) == "/program/0");
  CHECK(input_error_pointer(scenario(R"JS([{"autocast": "bfloat16", "body": ["y = x"]}])JS")) == "(no error)");
}

TEST_CASE("autocast policy: CUDA float16 lists of 1.13 op by op", "[autocast]") {
  const std::vector<std::string> lower = {"addbmm", "addmm", "addmv", "addr",   "baddbmm", "bmm",
                                          "conv2d", "einsum", "linear", "matmul", "mm",      "mv"};
  const std::vector<std::string> fp32 = {"acos",    "asin",   "cosh",  "erfinv",   "exp",        "expm1",
                                         "log",     "log10",  "log2",  "log1p",    "reciprocal", "rsqrt",
                                         "sinh",    "tan",    "pow",   "softplus", "layer_norm", "kl_div",
                                         "l1_loss", "mse_loss", "nll_loss", "smooth_l1_loss",
                                         "binary_cross_entropy_with_logits", "dist", "logsumexp"};
  const std::vector<std::string> set_opt = {"prod", "softmax", "log_softmax", "cumprod", "cumsum", "sum"};
  const std::vector<std::string> promote = {"addcdiv", "addcmul", "atan2", "dot", "scatter_add"};
  for (const auto& op : lower) CHECK(autocast_policy(op, "cuda") == CastPolicy::LowerPrecision);
  for (const auto& op : fp32) CHECK(autocast_policy(op, "cuda") == CastPolicy::Fp32);
  for (const auto& op : set_opt) CHECK(autocast_policy(op, "cuda") == CastPolicy::Fp32SetOptDtype);
  for (const auto& op : promote) CHECK(autocast_policy(op, "cuda") == CastPolicy::Promote);
  CHECK(autocast_policy("binary_cross_entropy", "cuda") == CastPolicy::Banned);
  // Not listed on CUDA, native or views: run as written.
  for (const char* op : {"relu", "gelu", "add", "mul", "batch_norm", "dropout", "view", "transpose", "cat", "stack"})
    CHECK(autocast_policy(op, "cuda") == CastPolicy::None);
  // Every name the lists hold is an entry of the op table (a misspelt name would never apply).
  std::vector<std::string> all = lower;
  for (const auto* group : {&fp32, &set_opt, &promote}) all.insert(all.end(), group->begin(), group->end());
  for (const auto& op : all) {
    bool found = false;
    for (const auto& e : agtrace::ops::op_table()) found = found || e.name == op;
    CHECK(found);
  }
}

TEST_CASE("autocast policy: CPU bfloat16 lists of 1.13", "[autocast]") {
  for (const char* op : {"addbmm", "addmm", "baddbmm", "bmm", "conv2d", "linear", "matmul", "mm"})
    CHECK(autocast_policy(op, "cpu") == CastPolicy::LowerPrecision);
  for (const char* op : {"cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy", "prod"})
    CHECK(autocast_policy(op, "cpu") == CastPolicy::Fp32);
  CHECK(autocast_policy("stack", "cpu") == CastPolicy::Promote);
  CHECK(autocast_policy("index_copy", "cpu") == CastPolicy::Promote);
  // On no CPU list (measured: softmax, layer_norm, gelu keep a bf16 input's dtype).
  for (const char* op : {"softmax", "layer_norm", "gelu", "mv", "exp", "sum", "cat"})
    CHECK(autocast_policy(op, "cpu") == CastPolicy::None);
  CHECK(autocast_policy("einsum", "cpu") == CastPolicy::Unknown);
  CHECK(autocast_policy("no_such_op", "cpu") == CastPolicy::Unknown);
  CHECK(agtrace::ops::autocast_policy_text("linear") == "cpu lower, cuda lower");
}

TEST_CASE("autocast casts: dtypes, the cache of float32 leaves, cleared at the outermost exit", "[autocast]") {
  auto r = run_text(scenario(R"JS([{"autocast": "bfloat16", "body": [
      "h1 = F.linear(x, W, b)", "h2 = F.linear(x, W, b)",
      "print(h1.dtype, h1.grad_fn.next_functions[1][0] is None, h1.grad_fn.next_functions[0][0].name())",
      "print(h1.grad_fn.next_functions[2][0].next_functions[0][0] is h2.grad_fn.next_functions[2][0].next_functions[0][0])",
      "m1 = xg @ W.t()", "m2 = xg @ W.t()",
      "print(m1.grad_fn.next_functions[1][0] is m2.grad_fn.next_functions[1][0])",
      "k = F.linear(x, c)", "print(k.dtype, k.requires_grad)",
      {"autocast": "bfloat16", "body": ["h3 = F.linear(x, W, b)"]},
      "print(h3.grad_fn.next_functions[0][0] is h1.grad_fn.next_functions[0][0])"]},
    {"autocast": "bfloat16", "body": ["h4 = F.linear(x, W, b)",
      "print(h4.grad_fn.next_functions[0][0] is h1.grad_fn.next_functions[0][0])"]},
    "loss = F.cross_entropy(h1, torch.tensor([0, 1, 2, 3]))", "print(loss.dtype)",
    "loss.backward()", "print(W.grad.dtype)"])JS"));
  REQUIRE(r.errors.empty());
  CHECK(r.printed == std::vector<std::string>{"torch.bfloat16 True ToCopyBackward0", "True", "False",
                                              "torch.bfloat16 False", "True", "False", "torch.bfloat16",
                                              "torch.float32"});
}

TEST_CASE("autocast errors: unknown policies, CPU float16, banned ops", "[autocast]") {
  auto einsum = run_text(scenario(R"JS([{"autocast": "bfloat16", "body": ["y = torch.einsum('ij,kj->ik', xg, W)"]}])JS"));
  REQUIRE(einsum.errors.size() == 1);
  CHECK(einsum.errors[0].kind == "unsupported");
  CHECK(einsum.errors[0].message.find("'einsum'") != std::string::npos);
  auto f16 = run_text(scenario(R"JS([{"autocast": "float16", "body": ["y = F.linear(x, W)"]}])JS"));
  REQUIRE(f16.errors.size() == 1);
  CHECK(f16.errors[0].message == "Currently, AutocastCPU only support Bfloat16 as the autocast_cpu_dtype");
  auto bce = run_text(scenario(R"JS([{"autocast": "float16", "body": [
      "p = torch.sigmoid(F.linear(x, W))", "y = F.binary_cross_entropy(p, torch.ones(4, 5))"]}])JS", "meta"));
  REQUIRE(bce.errors.size() == 1);
  CHECK(bce.errors[0].statement == 1);
  CHECK(bce.errors[0].message.rfind("torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe", 0) == 0);
}

TEST_CASE("autocast on meta: the CUDA float16 policy (lower, fp32, fp32_set_opt_dtype)", "[autocast]") {
  auto r = run_text(scenario(R"JS([{"autocast": "float16", "body": [
      "h = F.linear(x, W, b)", "n = F.layer_norm(h, (5,), b, b)", "s = torch.softmax(h, dim=-1)",
      "e = h.exp()", "g = F.gelu(h)",
      "print(h.dtype, n.dtype, s.dtype, e.dtype, g.dtype)",
      "print(n.grad_fn.next_functions[0][0].name(), s.grad_fn.next_functions[0][0].name())"]}])JS",
                             "meta"));
  REQUIRE(r.errors.empty());
  CHECK(r.printed == std::vector<std::string>{
                         "torch.float16 torch.float32 torch.float32 torch.float32 torch.float16",
                         "ToCopyBackward0 ToCopyBackward0"});
}

TEST_CASE("autocast on meta: the GPT-3 175B layer under float16 autocast is accounted in under a second",
          "[autocast]") {
  std::ifstream in(std::string(AGTRACE_TEST_DIR) + "/../scenarios/gpt3_layer_meta.json");
  REQUIRE(in);
  nlohmann::json sc = nlohmann::json::parse(in);
  sc.erase("dtype");  // float32 weights and residual stream, as mixed-precision training keeps them
  sc["expect"] = {{"korthikanti", sc["expect"]["korthikanti"]}};
  const std::string float32_layer = sc.dump();
  nlohmann::json prog = sc["program"];
  nlohmann::json body = nlohmann::json::array();
  for (size_t i = 0; i + 1 < prog.size(); ++i) body.push_back(prog[i]);
  sc["program"] = nlohmann::json::array({{{"autocast", "float16"}, {"body", body}}, prog.back()});
  const auto start = std::chrono::steady_clock::now();
  auto r = run_text(sc.dump());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(r.errors.empty());
  CHECK(seconds < 1.0);
  // The pure-float16 layer saves 6,945,898,504 B; under autocast the float16 copies of the
  // weights are saved too (mat2 of each addmm: 2·12·h² B), and layer_norm and softmax save
  // float32 values (the softmax output: 4·a·s² B instead of 2·a·s²).
  CHECK(r.memory.saved_bytes == 8657272840);
  // Reconciled again: the float32 LayerNorm inputs and softmax output, and the dropout masks
  // in their inputs' dtypes, are explained by dtype; the four float16 weight copies
  // (2·12·h² B) are parameters, not activations.
  agtrace::KorthikantiShape ks;
  REQUIRE(agtrace::korthikanti_requested(r, ks));
  const agtrace::KorthikantiReport k = agtrace::reconcile_korthikanti(r, ks);
  CHECK(k.unexplained_bytes == 0);
  CHECK(k.parameter_cast_bytes == 2 * 12 * ks.h * ks.h);
  CHECK(k.activation_bytes + k.parameter_bytes + k.parameter_cast_bytes == r.memory.saved_bytes);
  // Without autocast: the float32 layer's own figures.
  auto plain = run_text(float32_layer);
  REQUIRE(r.autocast_comparison.present);
  CHECK(r.autocast_comparison.saved_bytes_without == plain.memory.saved_bytes);
  CHECK(r.autocast_comparison.peak_bytes_without == plain.memory.peak_bytes);
}

TEST_CASE("autocast accounting: the cast copies and the saved bytes that are casts", "[autocast]") {
  auto r = run_text(scenario(R"JS([{"autocast": "bfloat16", "body": [
      "h1 = F.linear(x, W, b)", "h2 = F.linear(x, W, b)"]}])JS"));
  REQUIRE(r.errors.empty());
  // x (no grad: cast at each use) twice, 4x3 bf16 = 24 B each; W (5x3, 30 B) and b (10 B)
  // once from the cache. AddmmBackward0 saves mat1 (the cast of x) since W requires grad.
  CHECK(r.memory.autocast_copies == 4);
  CHECK(r.memory.autocast_copy_bytes == 24 + 24 + 30 + 10);
  CHECK(r.memory.autocast_saved_bytes == 48);
  CHECK(r.memory.saved_bytes == 48);
  // Bytes by dtype per category: the float32 leaves and the bfloat16 outputs and casts.
  const auto& by_dtype = r.memory.categories_at_end_by_dtype;
  for (const auto& [category, bytes] : r.memory.categories_at_end) {
    INFO(category);
    int64_t sum = 0;
    if (by_dtype.count(category))
      for (const auto& [dtype, b] : by_dtype.at(category)) sum += b;
    CHECK(sum == bytes);
  }
  CHECK(by_dtype.at("leaf_param").at("float32") == 48 + 60 + 20);  // xg, W and b
  // The cached casts of W and b are freed when the block exits, after its last statement.
  CHECK(r.memory.categories_at_end.count("other") == 0);
  CHECK(by_dtype.at("named").at("bfloat16") == 2 * 40);     // h1 and h2, 4x5 bf16 each
  CHECK(by_dtype.at("named").count("float32") == 0);
}

TEST_CASE("without autocast: the same program with the blocks' bodies as plain statements", "[autocast]") {
  const std::string with_block = scenario(R"JS([{"autocast": "bfloat16", "body": [
      "h = F.linear(xg, W, b)", "loss = h.float().pow(2).sum()"]}, "loss.backward()"])JS");
  const std::string plain = scenario(R"JS(["h = F.linear(xg, W, b)", "loss = h.float().pow(2).sum()",
      "loss.backward()"])JS");
  auto r = run_text(with_block);
  auto p = run_text(plain);
  REQUIRE(r.errors.empty());
  REQUIRE(p.errors.empty());
  const agtrace::AutocastComparison& c = r.autocast_comparison;
  REQUIRE(c.present);
  CHECK(c.raised_at == -1);
  CHECK(c.saved_bytes_with == r.memory.saved_bytes);
  CHECK(c.saved_bytes_without == p.memory.saved_bytes);
  CHECK(c.peak_bytes_without == p.memory.peak_bytes);
  CHECK(c.graph_only_bytes_without == p.memory.graph_only_bytes);
  // Under autocast AddmmBackward0 saves the bfloat16 casts of xg and W (24 + 30 B); without
  // it the float32 leaves themselves (48 + 60 B).
  CHECK(c.saved_bytes_with != c.saved_bytes_without);
  CHECK_FALSE(p.autocast_comparison.present);  // no block, no comparison
  // A program that needs autocast to run: without it the bfloat16 activation meets a
  // float32 weight.
  auto needs = run_text(scenario(R"JS([{"autocast": "bfloat16", "body": [
      "h = F.linear(xg, W, b)", "k = F.linear(h, c.t())"]}])JS"));
  REQUIRE(needs.errors.empty());
  REQUIRE(needs.autocast_comparison.present);
  CHECK(needs.autocast_comparison.raised_at == -1);  // all float32 without the block: runs
  auto mixed = run_text(scenario(R"JS(["hb = xg.bfloat16()", {"autocast": "bfloat16", "body": [
      "k = F.linear(hb, W)"]}])JS"));
  REQUIRE(mixed.errors.empty());
  REQUIRE(mixed.autocast_comparison.present);
  CHECK(mixed.autocast_comparison.raised_at == 1);
  CHECK(mixed.autocast_comparison.raised_kind == "dtype_mismatch");
}

TEST_CASE("autocast queries: torch.is_autocast_enabled and friends read the innermost region", "[autocast]") {
  // A cuda region (the default on meta) sets the CUDA flag and dtype, as on a machine with
  // CUDA; a CPU region only the CPU flag (measured in 1.13 for the CPU).
  auto meta = run_text(scenario(R"JS([
      "print(torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype())",
      {"autocast": "float16", "body": [
        "print(torch.is_autocast_enabled(), torch.is_autocast_cpu_enabled(), torch.get_autocast_gpu_dtype())",
        {"autocast": "bfloat16", "body": ["print(torch.get_autocast_gpu_dtype())"]},
        "print(torch.get_autocast_gpu_dtype())"]},
      "print(torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype())"])JS",
                                "meta"));
  REQUIRE(meta.errors.empty());
  CHECK(meta.printed == std::vector<std::string>{"False torch.float16", "True False torch.float16", "torch.bfloat16",
                                                 "torch.float16", "False torch.float16"});
  // A program that ends with an error inside a region leaves no region behind for the next
  // run in the same process.
  auto aborted = run_text(scenario(R"JS([{"autocast": "bfloat16", "body": ["y = x.nosuchop()"]}])JS"));
  REQUIRE(aborted.errors.size() == 1);
  auto after = run_text(scenario(R"JS(["print(torch.is_autocast_cpu_enabled())"])JS"));
  CHECK(after.printed == std::vector<std::string>{"False"});
}
