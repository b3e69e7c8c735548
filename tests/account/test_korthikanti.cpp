// Reconciliation of a transformer layer's saved bytes with Korthikanti et al. 2022
// (sbh(34 + 5as/h), 2-byte activations, 1-byte masks): the formula is computed here from
// s, b, h, a; the run's bytes per role come from agtrace; every difference must be one of
// the explained ones, each recomputed here from the shapes and dtypes.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "account/korthikanti.hpp"
#include "interp/interpreter.hpp"
#include "scenario/scenario.hpp"

using namespace agtrace;

namespace {

RunResult run_file(const std::string& name, const std::string& device = "") {
  auto sc = load_scenario_file(std::string(AGTRACE_SOURCE_DIR) + "/scenarios/" + name);
  RunOptions o;
  o.device = device;
  return run_scenario(*sc, o);
}

const ReconcileRole& role(const KorthikantiReport& k, const std::string& name) {
  for (const auto& r : k.roles)
    if (r.role == name) return r;
  FAIL("no role " << name);
  throw;
}

int64_t explained(const ReconcileRole& r) {
  int64_t e = 0;
  for (const auto& d : r.explained) e += d.bytes;
  return e;
}

// act_size / mask_size: bytes per element of the run's activations and dropout masks.
void check_layer(const RunResult& r, const KorthikantiShape& k, int64_t act_size, int64_t mask_size) {
  REQUIRE(r.errors.empty());
  const KorthikantiReport rep = reconcile_korthikanti(r, k);
  const int64_t sbh = k.s * k.b * k.h, as2b = k.a * k.s * k.s * k.b;
  // The paper's total, computed from the formula as printed: sbh(34 + 5as/h).
  REQUIRE(rep.formula_bytes * k.h == sbh * (34 * k.h + 5 * k.a * k.s));
  // Per role: the run's bytes are the paper's element counts at the run's element sizes.
  CHECK(role(rep, "layernorm_input").run_bytes == 2 * sbh * act_size);
  CHECK(role(rep, "linear_input").run_bytes == 7 * sbh * act_size);
  CHECK(role(rep, "attention_bmm_operand").run_bytes == (3 * sbh + as2b) * act_size);
  CHECK(role(rep, "softmax_output").run_bytes == as2b * act_size);
  CHECK(role(rep, "gelu_input").run_bytes == 4 * sbh * act_size);
  CHECK(role(rep, "dropout_mask").run_bytes == (as2b + 2 * sbh) * mask_size);
  // Explained differences: element size beyond the paper's, LayerNorm's float32 mean and
  // rstd ([s, b, 1] twice per LayerNorm), the 0-d float64 attention scale.
  CHECK(explained(role(rep, "dropout_mask")) == (as2b + 2 * sbh) * (mask_size - 1));
  CHECK(explained(role(rep, "gelu_input")) == 4 * sbh * (act_size - 2));
  CHECK(role(rep, "layernorm_stats").run_bytes == 2 * 2 * k.s * k.b * 4);
  CHECK(explained(role(rep, "layernorm_stats")) == 2 * 2 * k.s * k.b * 4);
  CHECK(role(rep, "scalar").run_bytes == 8);
  CHECK(role(rep, "other").run_bytes == 0);
  CHECK(rep.unexplained_bytes == 0);
  CHECK(rep.activation_bytes == rep.formula_bytes + rep.explained_bytes);
  // Activations plus parameters are everything PyTorch's pack hooks see.
  CHECK(rep.activation_bytes + rep.parameter_bytes == r.memory.saved_bytes);
}

}  // namespace

TEST_CASE("GPT-3 layer on meta reconciles with Korthikanti et al. 2022", "[account][korthikanti]") {
  const RunResult r = run_file("gpt3_layer_meta.json");
  CHECK(r.device == "meta");
  // GPT-3 175B (Brown et al. 2020, table 2.1): h = 12288, 96 heads, context 2048.
  check_layer(r, {2048, 1, 12288, 96}, 2, 2);
  KorthikantiShape ks;
  REQUIRE(korthikanti_requested(r, ks));
  CHECK(ks.h == 12288);
}

TEST_CASE("the toy transformer block reconciles at float32", "[account][korthikanti]") {
  check_layer(run_file("transformer_block_toy.json"), {8, 2, 16, 4}, 4, 4);
}

TEST_CASE("the toy programs on meta keep the same per-element accounting", "[account][korthikanti]") {
  for (const char* name : {"transformer_block_toy.json", "mlp_toy.json"}) {
    const RunResult cpu = run_file(name), meta = run_file(name, "meta");
    CHECK(meta.device == "meta");
    REQUIRE(cpu.saved.size() == meta.saved.size());
    for (size_t i = 0; i < cpu.saved.size(); ++i) {
      CHECK(cpu.saved[i].what == meta.saved[i].what);
      CHECK(cpu.saved[i].bytes == meta.saved[i].bytes);
    }
    CHECK(cpu.memory.saved_bytes == meta.memory.saved_bytes);
    CHECK(cpu.memory.saved_unique_bytes == meta.memory.saved_unique_bytes);
    CHECK(cpu.memory.graph_only_bytes == meta.memory.graph_only_bytes);
  }
}

TEST_CASE("an unexplained byte fails the reconciliation", "[account][korthikanti]") {
  // The same layer with one more saved tensor the paper does not count (exp saves its result).
  RunResult r = run_file("transformer_block_toy.json");
  const KorthikantiReport before = reconcile_korthikanti(r, {8, 2, 16, 4});
  REQUIRE(before.unexplained_bytes == 0);
  SavedLifetime extra = r.saved.back();
  extra.id = 100000;
  extra.what = "ExpBackward0._saved_result";
  extra.bytes = 64;
  r.saved.push_back(extra);
  const KorthikantiReport after = reconcile_korthikanti(r, {8, 2, 16, 4});
  CHECK(after.unexplained_bytes == 64);
  CHECK(role(after, "other").run_bytes == 64);
}

TEST_CASE("the toy MLP at full size on meta keeps the per-element accounting of the CPU run",
          "[account][korthikanti]") {
  // The "same scenarios on meta at full size": mlp_toy is the 784-512-512-10 family
  // scaled down (49-32-32-10, batch 4). Scaled back up (batch 128) on meta, every node must
  // save the same values, each with the toy's dims mapped to full size, at the same dtype,
  // and bytes = elements x element size.
  const std::string path = std::string(AGTRACE_SOURCE_DIR) + "/scenarios/mlp_toy.json";
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(path));
  const std::map<int64_t, int64_t> full = {{4, 128}, {49, 784}, {32, 512}, {10, 10}};
  for (auto& [name, spec] : doc["tensors"].items()) {
    for (auto& d : spec["shape"]) d = full.at(d.get<int64_t>());
    spec.erase("init");  // meta holds no element data
  }
  doc.erase("expect");
  doc["device"] = "meta";
  const RunResult toy = run_file("mlp_toy.json");
  const RunResult big = run_scenario(*load_scenario_text(doc.dump(), "<mlp full size>"), RunOptions{});
  REQUIRE(big.device == "meta");
  REQUIRE(big.errors.empty());
  REQUIRE(toy.nodes.size() == big.nodes.size());
  int64_t big_total = 0;
  for (auto ti = toy.nodes.begin(), bi = big.nodes.begin(); ti != toy.nodes.end(); ++ti, ++bi) {
    const NodeSnapshot &t = ti->second, &b = bi->second;
    CHECK(t.name == b.name);
    REQUIRE(t.saved.size() == b.saved.size());
    for (size_t j = 0; j < t.saved.size(); ++j) {
      const SavedSnapshot &ts = t.saved[j], &bs = b.saved[j];
      INFO(t.name << "._saved_" << ts.attr);
      CHECK(ts.attr == bs.attr);
      CHECK(ts.defined == bs.defined);
      if (!ts.is_tensor || !ts.defined) continue;
      Shape mapped;
      for (int64_t d : ts.shape) mapped.push_back(full.count(d) ? full.at(d) : d);
      CHECK(bs.shape == mapped);
      CHECK(bs.dtype == ts.dtype);
      CHECK(bs.bytes == shape_numel(bs.shape) * dtype_size(bs.dtype));
      big_total += bs.bytes;
    }
  }
  CHECK(big.memory.saved_bytes == big_total);
  CHECK(big.memory.saved_bytes > 100 * toy.memory.saved_bytes);
}
