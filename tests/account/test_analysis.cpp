// The accountant's analysis: allocator model, peak location, new bytes per node, why each
// value is saved (from the op table's rules, checked against what the ops really save) and
// the what-if table.
#include <catch2/catch.hpp>

#include <regex>

#include "account/accountant.hpp"
#include "account/analysis.hpp"
#include "account/save_rules.hpp"
#include "ops/table.hpp"
#include "interp/run_helpers.hpp"

using namespace agtrace;

namespace {

std::string scenario(const std::string& tensors, const std::string& program) {
  return R"js({"name": "t", "tensors": {)js" + tensors + R"js(}, "program": [)js" + program + "]}";
}

const SavedExplained* find_saved(const MemoryAnalysis& a, const std::string& what) {
  for (const auto& s : a.saved)
    if (s.what == what) return &s;
  return nullptr;
}

}  // namespace

TEST_CASE("the peak inside a backward names the node running", "[account]") {
  // The gradient of a big matrix is allocated while MmBackward0 runs; nothing in the forward
  // is that large, so the peak is in the backward.
  RunResult r = test::run_text(scenario(R"js("a": {"shape": [1, 64], "requires_grad": true},
                                          "W": {"shape": [64, 64], "requires_grad": true})js",
                                        R"js("y = (a @ W).sum()", "y.backward()")js"));
  REQUIRE(r.errors.empty());
  CHECK(r.account.peak.statement == 1);
  CHECK(r.account.peak.in_backward);
  CHECK(r.account.peak.op.find("Backward") != std::string::npos);
}

TEST_CASE("new bytes: not a leaf, not held by a name", "[account]") {
  const std::string tensors = R"js("x": {"shape": [4], "requires_grad": true, "init": "ones"})js";
  // h is named at the end: sin's saved h is not new; exp's saved result is h too.
  RunResult kept = test::run_text(scenario(tensors, R"js("h = x.exp()", "y = h.sin()")js"));
  MemoryAnalysis a = analyse_memory(kept);
  REQUIRE(find_saved(a, "SinBackward0._saved_self"));
  CHECK(find_saved(a, "SinBackward0._saved_self")->category == "named");
  CHECK_FALSE(find_saved(a, "SinBackward0._saved_self")->is_new);
  CHECK(a.new_bytes == 0);
  // del h: only the graph holds it now: both saved values (16 B each) are new.
  RunResult dropped = test::run_text(scenario(tensors, R"js("h = x.exp()", "y = h.sin()", "del h")js"));
  a = analyse_memory(dropped);
  CHECK(find_saved(a, "SinBackward0._saved_self")->category == "graph_only");
  CHECK(a.new_bytes == 32);
  // A leaf saved by a node is never new.
  RunResult leaf = test::run_text(scenario(tensors, R"js("y = x.sin()")js"));
  a = analyse_memory(leaf);
  CHECK(find_saved(a, "SinBackward0._saved_self")->category == "leaf_param");
  CHECK(a.new_bytes == 0);
  REQUIRE(a.nodes.size() == 1);
  CHECK(a.nodes[0].saved_bytes == 16);
  CHECK(a.nodes[0].new_bytes == 0);
}

TEST_CASE("categories split leaves into parameters and inputs", "[account]") {
  RunResult r = test::run_text(scenario(R"js("x": {"shape": [3]}, "w": {"shape": [3], "requires_grad": true})js",
                                        R"js("h = x * w", "y = h.sum()", "y.backward()")js"));
  const auto& c = r.memory.categories_at_end;
  CHECK(c.at("leaf_input") == 12);
  CHECK(c.at("leaf_param") == 12);
  CHECK(c.at("grad") == 12);
  CHECK(c.at("named") == 12 + 4);  // h and y
}

// The op table's columns are scanned by hand (account/save_rules.cpp, issue #6: compiling and
// running std::regex cost ~1.5 ms of every start); the scanners must find what the regular
// expressions find, on every table entry and on texts made to trip them.
TEST_CASE("save rules: the hand scanners find what the regular expressions find", "[account]") {
  const std::regex node_re("[A-Z][A-Za-z0-9]*Backward[0-9]+");
  const std::regex rule_re("([A-Za-z_][A-Za-z0-9_]*) if ([A-Za-z_][A-Za-z0-9_]*) requires grad");
  auto nodes_by_regex = [&](const std::string& text) {
    std::vector<std::string> out;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), node_re); it != std::sregex_iterator(); ++it)
      out.push_back(it->str());
    return out;
  };
  auto rules_by_regex = [&](const std::string& text) {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), rule_re); it != std::sregex_iterator(); ++it)
      out.emplace_back((*it)[1].str(), (*it)[2].str());
    return out;
  };
  std::vector<std::string> texts = {
      "", "Backward0", "MulBackward", "MulBackward0", "xMulBackward12y", "MulBackward0 over ReciprocalBackward0",
      "ABackward1Backward2", "ABackward1Backwardx", "Mul_Backward0", "ZBackward0Backward", "aBackward9",
      "self if other requires grad", "mat2 if self requires grad; self if mat2 requires grad",
      "2self if x requires grad", "a1 if b2 requires grad!", "x if y requires gradient", "x if  y requires grad",
      "_s if _t requires grad", "x if y requires grad if z requires grad", "self, other if self requires"};
  size_t entries = 0;
  for (const agtrace::ops::OpEntry& e : agtrace::ops::op_table()) {
    texts.push_back(e.node);
    texts.push_back(e.saves);
    ++entries;
  }
  CHECK(entries > 100);
  for (const std::string& t : texts) {
    INFO("text: " << t);
    CHECK(backward_nodes_named(t) == nodes_by_regex(t));
    CHECK(save_rules_in(t) == rules_by_regex(t));
  }
}

TEST_CASE("save rules come from the op table and match what the ops save", "[account]") {
  const auto& rules = conditional_save_rules();
  // Measured in PyTorch 1.13 (torch.mm(a, b) with b.requires_grad=False: _saved_self is None).
  CHECK(rules.at("MmBackward0").at("self") == "mat2");
  CHECK(rules.at("MmBackward0").at("mat2") == "self");
  CHECK(rules.at("AddmmBackward0").at("mat1") == "mat2");
  CHECK(rules.at("BmmBackward0").at("self") == "mat2");
  CHECK(rules.at("MulBackward0").at("other") == "self");
  // For every rule of these nodes: with the named input not requiring grad, the op really
  // does not save the value (reads as None), and with it, it does.
  struct Case {
    std::string node, program, tensors_a, tensors_b;
  };
  const std::vector<Case> cases = {
      {"MmBackward0", "y = torch.mm(a, b)", R"js("shape": [2, 3])js", R"js("shape": [3, 4])js"},
      {"BmmBackward0", "y = torch.bmm(a, b)", R"js("shape": [1, 2, 3])js", R"js("shape": [1, 3, 4])js"},
      {"MulBackward0", "y = a * b", R"js("shape": [2, 3])js", R"js("shape": [2, 3])js"},
      {"DotBackward0", "y = torch.dot(a, b)", R"js("shape": [3])js", R"js("shape": [3])js"},
      {"MvBackward0", "y = torch.mv(a, b)", R"js("shape": [2, 3])js", R"js("shape": [3])js"},
  };
  for (const Case& c : cases) {
    const auto& node_rules = rules.at(c.node);
    for (const auto& [attr, cond] : node_rules) {
      for (bool cond_rg : {true, false}) {
        // The other input always requires grad, so the node exists either way.
        const bool a_rg = cond == "self" ? cond_rg : true;
        const bool b_rg = cond == "self" ? true : cond_rg;
        const std::string tensors = R"js("a": {)js" + c.tensors_a + R"js(, "requires_grad": )js" + (a_rg ? "true" : "false") +
                                    R"js(}, "b": {)js" + c.tensors_b + R"js(, "requires_grad": )js" + (b_rg ? "true" : "false") + "}";
        RunResult r = test::run_text(scenario(tensors, "\"" + c.program + "\""));
        REQUIRE(r.errors.empty());
        bool saved = false;
        for (const auto& [id, n] : r.nodes)
          for (const auto& s : n.saved)
            if (n.name == c.node && s.attr == attr && s.is_tensor && s.defined) saved = true;
        INFO(c.node << "._saved_" << attr << " with " << cond << ".requires_grad=" << cond_rg);
        CHECK(saved == cond_rg);
      }
    }
  }
}

TEST_CASE("why saved says what would change without that input's requires_grad", "[account]") {
  WhySaved w = why_saved("MmBackward0", "self", 24, 2, 56);
  CHECK(w.needed_for == "mat2");
  CHECK(w.bytes_less == 24);
  w = why_saved("ExpBackward0", "result", 16, 1, 16);
  CHECK(w.bytes_less == 16);  // single input: the whole node goes
  w = why_saved("NativeLayerNormBackward0", "input", 48, 3, 100);
  CHECK(w.needed_for.empty());
  CHECK(w.bytes_less == 0);  // saved whatever input requires grad
}

TEST_CASE("what-if rows are computed from the run", "[account]") {
  const std::string tensors = R"js("x": {"shape": [4], "requires_grad": true, "init": "ones"})js";
  RunResult r = test::run_text(scenario(tensors, R"js("h = x.exp()", "y = h.sin()", "del h", "z = x * 2.0")js"));
  MemoryAnalysis a = analyse_memory(r);
  auto row = [&](const std::string& change) -> const WhatIfRow* {
    for (const auto& w : a.what_if)
      if (w.change == change) return &w;
    return nullptr;
  };
  // save_on_cpu on a CPU run: tensor.cpu() is the tensor itself, nothing moves.
  REQUIRE(row("save_on_cpu"));
  CHECK(row("save_on_cpu")->device_bytes == 0);
  CHECK(row("save_on_cpu")->host_bytes == 0);
  // The same program on meta (a model of a GPU run): graph-only storages leave the device,
  // every saved tensor is copied to the host.
  RunResult m = test::run_text(scenario(tensors, R"js("h = x.exp()", "y = h.sin()", "del h", "z = x * 2.0")js"),
                               false, "meta");
  MemoryAnalysis am = analyse_memory(m);
  const WhatIfRow* moved = nullptr;
  for (const auto& w : am.what_if)
    if (w.change == "save_on_cpu") moved = &w;
  REQUIRE(moved);
  CHECK(moved->device_bytes == -m.memory.graph_only_bytes);
  CHECK(m.memory.graph_only_bytes > 0);
  CHECK(moved->host_bytes == m.memory.saved_bytes);
  // fp16: exp's result and sin's self (one 16-byte graph-only storage) become two 8-byte
  // copies; x * 2.0 saves 2.0 as a 0-d float64 (8 B, graph-only): 2 bytes packed.
  REQUIRE(row("fp16 packing"));
  CHECK(row("fp16 packing")->device_bytes == (8 + 8 + 2) - (16 + 8));
  // del z frees z; del x frees nothing (the graph keeps the leaf).
  REQUIRE(row("del z"));
  CHECK(row("del z")->device_bytes == -16);
  REQUIRE(row("del x"));
  CHECK(row("del x")->device_bytes == 0);
}

TEST_CASE("float16 and bfloat16 storages are 2 bytes - mixed operands keep their own dtype when saved",
          "[account][dtype]") {
  // Measured in PyTorch 1.13 with pack hooks: a(f16) * b(f32) saves 8 + 16 bytes and gives
  // float32; c(bf16) * d(f64) saves 8 + 32 and gives float64; a * 2.5 saves a 0-d float64.
  RunResult r = test::run_text(scenario(
      R"js("a": {"shape": [4], "dtype": "float16", "requires_grad": true},
           "b": {"shape": [4], "requires_grad": true},
           "c": {"shape": [4], "dtype": "bfloat16", "requires_grad": true},
           "d": {"shape": [4], "dtype": "float64", "requires_grad": true})js",
      R"js("y1 = a * b", "y2 = c * d", "y3 = a * 2.5", "print(y1.dtype, y2.dtype, y3.dtype)")js"));
  REQUIRE(r.errors.empty());
  CHECK(r.leaves[0].bytes == 8);
  CHECK(r.leaves[2].bytes == 8);
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "torch.float32 torch.float64 torch.float16");
  std::vector<int64_t> bytes;
  for (const auto& s : r.saved) bytes.push_back(s.bytes);
  // MulBackward0 saves other then self (derivatives.yaml order).
  CHECK(bytes == std::vector<int64_t>{16, 8, 32, 8, 8});
  CHECK(r.memory.saved_bytes == 72);
  // The storages of the results: float32, float64, float16 (4 elements each).
  int64_t results = 0;
  for (const auto& st : r.storages)
    if (st.allocated_by == "mul" && st.allocated_at >= 0) results += st.bytes;
  CHECK(results == 16 + 32 + 8);
}
