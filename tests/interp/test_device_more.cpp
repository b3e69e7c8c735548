// The ops of lib/ops/more.hpp without a cuda kernel (cumsum, prod, logsumexp, the
// pointwise functions and activations of pointwise_more.cpp, tril, triu, flip, roll, std, repeat,
// gather, masked_select, F.pad, sort, argsort, topk, masked_fill_, clamp_, clamp_min(_) and the losses of losses_more.cpp but l1_loss) raise `unsupported` naming the
// op on cuda, as the device parity test expects ("<op> has no cuda kernel"), never compute
// on the host behind the user's back; the same program runs on the CPU.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "interp/run_helpers.hpp"
#include "support/sim_device.hpp"

using namespace agtrace;

TEST_CASE("more ops without a cuda kernel raise unsupported naming the op", "[more][device]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"x.cumsum(1)", "cumsum"},          {"x.prod(1)", "prod"},           {"x.prod()", "prod"},
      {"x.logsumexp(1)", "logsumexp"},    {"x.log1p()", "log1p"},          {"x.expm1()", "expm1"},
      {"F.softplus(x)", "softplus"},      {"F.elu(x)", "elu"},             {"F.selu(x)", "elu"},
      {"F.hardtanh(x)", "hardtanh"},      {"F.relu6(x)", "hardtanh"},      {"F.threshold(x, 0.1, 0.0)", "threshold"},
      {"F.logsigmoid(x)", "log_sigmoid"},        {"x.tril()", "tril"},            {"x.triu(1)", "triu"},
      {"x.flip(0)", "flip"},                     {"x.roll(1, 0)", "roll"},
      {"F.smooth_l1_loss(x, x.detach())", "smooth_l1_loss"},
      {"F.binary_cross_entropy(x.sigmoid(), x.detach().sigmoid())", "binary_cross_entropy"},
      {"F.binary_cross_entropy_with_logits(x, x.detach())", "binary_cross_entropy_with_logits"},
      {"F.one_hot(x.argmax(1))", "one_hot"},       {"x.std(1)", "std"},             {"x.repeat(2, 1)", "repeat"},
      {"x.gather(1, x.argmax(1, keepdim=True))", "gather"},  {"x.masked_select(x > 0)", "masked_select"},
      {"F.pad(x, (1, 1))", "constant_pad_nd"},   {"F.kl_div(x, x.detach().exp())", "xlogy"},
      {"(x * 1).masked_fill_(x > 0, 0.5)", "masked_fill_"},  {"(x * 1).clamp_(-0.5, 0.5)", "clamp_"},
      {"x.clamp_min(0.1)", "clamp_min"},        {"F.normalize(x)", "clamp_min"},        {"(x * 1).clamp_min_(0.1)", "clamp_min_"},
      {"x.sort(1)", "sort"},                     {"x.argsort(0)", "sort"},        {"x.topk(1)", "topk"},
  };
  std::string program;
  for (const auto& [statement, op] : cases) program += R"({"try": [")" + statement + R"("]}, )";
  const std::string json = R"({"name": "more_on_cuda", "tensors": {"x": {"shape": [2, 3], "requires_grad": true,
      "init": {"linspace": [-1, 1]}}}, "program": [)" + program + R"J("print(x.shape)"]})J";
  testing::SimulatedDevice dev;
  const RunResult gpu = test::run_text_on(json, "cuda", &dev);
  REQUIRE(gpu.errors.size() == cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    INFO(cases[k].first);
    CHECK(gpu.errors[k].kind == "unsupported");
    CHECK(gpu.errors[k].message.rfind(cases[k].second + " has no cuda kernel", 0) == 0);
  }
  const RunResult cpu = test::run_text_on(json, "cpu", nullptr);
  CHECK(cpu.errors.empty());
}
