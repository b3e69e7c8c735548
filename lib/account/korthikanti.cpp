#include "account/korthikanti.hpp"

#include <algorithm>
#include <map>
#include <string_view>

#include "account/analysis.hpp"

namespace agtrace {

namespace {

struct SavedInfo {
  int64_t numel = 0;
  DType dtype = DType::Float32;
  bool known = false;
  bool from_python_number = false;
};

SavedInfo info_of(const RunResult& r, const SavedLifetime& s) {
  SavedInfo i;
  auto n = r.nodes.find(s.node_id);
  if (n == r.nodes.end()) return i;
  const std::string attr = s.what.substr(s.what.find("._saved_") + 8);
  for (const auto& v : n->second.saved) {
    if (v.attr != attr || !v.is_tensor || !v.defined) continue;
    i.numel = shape_numel(v.shape);
    i.dtype = v.dtype;
    i.known = true;
    i.from_python_number = v.from_python_number;
  }
  return i;
}

std::string allocated_by(const RunResult& r, int64_t storage_id) {
  for (const auto& st : r.storages)
    if (st.id == storage_id) return st.allocated_by;
  return "";
}

}  // namespace

std::string saved_role(const RunResult& r, const SavedLifetime& s) {
  const char* c = r.account.saved_category.find(s.id);
  if (c && std::string_view(c) == "leaf_param") return "parameter";
  // Autocast's cached low-precision copy of a weight (AddmmBackward0 saves it as mat2): a
  // parameter in another dtype, which the paper's activations do not include either.
  if (std::binary_search(r.autocast_leaf_casts.begin(), r.autocast_leaf_casts.end(), s.storage_id))
    return "parameter_cast";
  const std::string& w = s.what;
  if (w == "NativeLayerNormBackward0._saved_input") return "layernorm_input";
  if (w == "NativeLayerNormBackward0._saved_result1" || w == "NativeLayerNormBackward0._saved_result2")
    return "layernorm_stats";
  if (w == "AddmmBackward0._saved_mat1" || w == "MmBackward0._saved_self") return "linear_input";
  if (w == "BmmBackward0._saved_self" || w == "BmmBackward0._saved_mat2") return "attention_bmm_operand";
  if (w == "SoftmaxBackward0._saved_result") return "softmax_output";
  if (w == "GeluBackward0._saved_self") return "gelu_input";
  if (w == "MulBackward0._saved_other") {
    if (info_of(r, s).from_python_number) return "scalar";
    // F.dropout on CPU/meta (at::native::_dropout_impl) is input * mask: the mask is the
    // storage the dropout op allocated.
    const std::string by = allocated_by(r, s.storage_id);
    if (by == "dropout" || by == "dropout_") return "dropout_mask";
  }
  return "other";
}

bool korthikanti_requested(const RunResult& r, KorthikantiShape& shape) {
  if (!r.expect.is_object() || !r.expect.contains("korthikanti")) return false;
  const auto& k = r.expect["korthikanti"];
  shape = {k.value("s", int64_t{0}), k.value("b", int64_t{0}), k.value("h", int64_t{0}), k.value("a", int64_t{0})};
  return shape.s > 0 && shape.b > 0 && shape.h > 0 && shape.a > 0;
}

KorthikantiReport reconcile_korthikanti(const RunResult& r, const KorthikantiShape& k) {
  KorthikantiReport out;
  out.shape = k;
  const int64_t sbh = k.s * k.b * k.h, as2b = k.a * k.s * k.s * k.b;
  // Section 4.1 term by term (bytes): 2-byte activations, 1-byte masks.
  auto role = [](std::string name, std::vector<std::string> terms, int64_t bytes) {
    ReconcileRole r;
    r.role = std::move(name);
    r.terms = std::move(terms);
    r.formula_bytes = bytes;
    return r;
  };
  std::vector<ReconcileRole> roles = {
      role("layernorm_input", {"LayerNorm 1 input 2sbh", "LayerNorm 2 input 2sbh"}, 4 * sbh),
      role("linear_input",
           {"QKV projection input 2sbh", "attention output projection input 2sbh", "MLP first linear input 2sbh",
            "MLP second linear input 8sbh"},
           14 * sbh),
      role("attention_bmm_operand",
           {"QK^T: Q and K 4sbh", "attention over V: V 2sbh", "attention over V: dropout output 2as^2b"},
           6 * sbh + 2 * as2b),
      role("softmax_output", {"softmax output 2as^2b"}, 2 * as2b),
      role("dropout_mask", {"attention dropout mask as^2b", "attention output dropout mask sbh", "MLP dropout mask sbh"},
           as2b + 2 * sbh),
      role("gelu_input", {"GELU input 8sbh"}, 8 * sbh),
      role("layernorm_stats", {}, 0),
      role("scalar", {}, 0),
      role("other", {}, 0),
  };
  out.formula_bytes = 34 * sbh + 5 * as2b;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < roles.size(); ++i) index[roles[i].role] = i;
  struct Extra {
    int64_t dtype_bytes = 0;   // bytes beyond the paper's element size
    std::map<std::string, int64_t> dtypes;
  };
  std::map<std::string, Extra> extra;
  for (const auto& s : r.saved) {
    const std::string role = saved_role(r, s);
    if (role == "parameter") {
      out.parameter_bytes += s.bytes;
      continue;
    }
    if (role == "parameter_cast") {
      out.parameter_cast_bytes += s.bytes;
      continue;
    }
    out.activation_bytes += s.bytes;
    ReconcileRole& rr = roles[index.at(role)];
    rr.run_bytes += s.bytes;
    ++rr.saved_count;
    const SavedInfo i = info_of(r, s);
    rr.values.push_back({s.what, s.bytes, i.known ? dtype_name(i.dtype) : "", s.saved_at});
    const int64_t paper_size = role == "dropout_mask" ? 1 : 2;
    if (i.known) {
      extra[role].dtype_bytes += i.numel * (dtype_size(i.dtype) - paper_size);
      extra[role].dtypes[dtype_name(i.dtype)] += 1;
    }
  }
  for (auto& rr : roles) {
    const Extra& x = extra[rr.role];
    std::string dts;
    for (const auto& [d, n] : x.dtypes) dts += (dts.empty() ? "" : ", ") + d;
    if (rr.role == "layernorm_stats") {
      if (rr.run_bytes)
        rr.explained.push_back({"LayerNorm also saves mean and rstd (result1, result2), [s, b, 1] each in float32 "
                                "(also for float16 input); the paper does not count them",
                                rr.run_bytes});
    } else if (rr.role == "scalar") {
      if (rr.run_bytes)
        rr.explained.push_back({"a Python number operand (the attention scale 1/sqrt(h/a)) is saved by MulBackward0 "
                                "as a 0-d float64 tensor; the paper folds the scale into the matmul",
                                rr.run_bytes});
    } else if (rr.role == "dropout_mask") {
      if (x.dtype_bytes)
        rr.explained.push_back({"PyTorch 1.13 eager dropout on CPU and meta is input * (bernoulli mask / (1 - p)): "
                                "MulBackward0 keeps the mask as _saved_other in the input's dtype (" + dts +
                                "), the paper counts 1 byte per element (CUDA's fused native_dropout keeps a bool "
                                "mask, 1 byte)",
                                x.dtype_bytes});
    } else if (rr.role != "other" && x.dtype_bytes) {
      rr.explained.push_back({"saved in " + dts + "; the paper counts 2 bytes per element", x.dtype_bytes});
    }
    int64_t explained = 0;
    for (const auto& d : rr.explained) explained += d.bytes;
    rr.unexplained = rr.run_bytes - rr.formula_bytes - explained;
    out.explained_bytes += explained;
    out.unexplained_bytes += rr.unexplained < 0 ? -rr.unexplained : rr.unexplained;  // no cancelling
    out.roles.push_back(rr);
  }
  return out;
}

}  // namespace agtrace
