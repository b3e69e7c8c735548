// F.multi_head_attention_forward, what nn.MultiheadAttention calls: in PyTorch 1.13 a Python
// function (torch/nn/functional.py) whose body is public ops, so its graph is theirs. This
// runs the same calls in the same order (measured walks and saved values agree with 1.13 in
// tests/differential/corpus/measured_multi_head_attention_forward.json). The branches that
// concatenate learned or zero key/value rows (bias_k/bias_v, add_zero_attn, static_k/static_v)
// and a bool attn_mask combined with key_padding_mask (logical_or) are `unsupported`.
#include <cmath>
#include <limits>
#include <string>

#include "errors.hpp"
#include "interp/value.hpp"
#include "ops/activations.hpp"
#include "ops/binary_more.hpp"
#include "ops/model_ops.hpp"
#include "ops/more.hpp"
#include "ops/nn.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "tensor/kernels.hpp"

namespace agtrace::ops {

namespace {

// The function's `assert`s raise AssertionError with these messages.
void check(bool ok, const std::string& message) {
  if (!ok) throw ScenarioError("shape_mismatch", message);
}
[[noreturn]] void not_modelled(const std::string& what) {
  throw ScenarioError("unsupported", "F.multi_head_attention_forward with " + what + " is not supported");
}

std::string dims_text(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// _mha_shape_check: whether the call is batched (3-D query) or not (2-D).
bool batched_call(const MhaArgs& m) {
  const Tensor &q = m.query, &k = m.key, &v = m.value;
  const int64_t nd = q->dim();
  check(nd == 2 || nd == 3,
        "query should be unbatched 2D or batched 3D tensor but received " + std::to_string(nd) + "-D query tensor");
  const bool batched = nd == 3;
  const std::string which = std::string("For ") + (batched ? "batched (3-D)" : "unbatched (2-D)") + " `query`, expected ";
  check(k->dim() == nd && v->dim() == nd, which + "`key` and `value` to be " + std::to_string(nd) + "-D but found " +
                                              std::to_string(k->dim()) + "-D and " + std::to_string(v->dim()) +
                                              "-D tensors respectively");
  if (m.key_padding_mask)
    check(m.key_padding_mask->dim() == nd - 1, which + "`key_padding_mask` to be `None` or " + std::to_string(nd - 1) +
                                                   "-D but found " + std::to_string(m.key_padding_mask->dim()) +
                                                   "-D tensor instead");
  if (m.attn_mask) {
    check(m.attn_mask->dim() == 2 || m.attn_mask->dim() == 3,
          which + "`attn_mask` to be `None`, 2-D or 3-D but found " + std::to_string(m.attn_mask->dim()) +
              "-D tensor instead");
    if (!batched && m.attn_mask->dim() == 3) {
      const Shape expected{m.num_heads, q->sizes[0], k->sizes[0]};
      check(m.attn_mask->sizes.vec() == expected, "Expected `attn_mask` shape to be " + dims_text(expected) +
                                                      " but got torch.Size(" + shape_str(m.attn_mask->sizes) + ")");
    }
  }
  return batched;
}

// _in_projection_packed: one linear and chunk(3) for self-attention (q is k is v), a split
// weight for encoder-decoder attention (k is v), three linears otherwise.
std::vector<Tensor> in_projection_packed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& w,
                                         const Tensor& b) {
  const int64_t e = q->sizes.back();
  if (k == v) {
    if (q == k) return chunk(linear(q, w, b), 3, -1);
    std::vector<Tensor> w_parts = split_with_sizes(w, {e, e * 2}, 0);
    std::vector<Tensor> b_parts = b ? split_with_sizes(b, {e, e * 2}, 0) : std::vector<Tensor>{nullptr, nullptr};
    std::vector<Tensor> kv = chunk(linear(k, w_parts[1], b_parts[1]), 2, -1);
    return {linear(q, w_parts[0], b_parts[0]), kv[0], kv[1]};
  }
  std::vector<Tensor> ws = chunk(w, 3, 0);
  std::vector<Tensor> bs = b ? chunk(b, 3, 0) : std::vector<Tensor>{nullptr, nullptr, nullptr};
  return {linear(q, ws[0], bs[0]), linear(k, ws[1], bs[1]), linear(v, ws[2], bs[2])};
}

// x.contiguous().view(rows, bsz * num_heads, head_dim).transpose(0, 1)
Tensor heads_first(const Tensor& x, int64_t rows, int64_t batch_heads, int64_t head_dim) {
  return transpose(view(contiguous(x), {rows, batch_heads, head_dim}), 0, 1);
}

}  // namespace

std::pair<Tensor, Tensor> multi_head_attention_forward(const MhaArgs& m, SplitMix64& gen) {
  if (m.bias_k || m.bias_v) not_modelled("bias_k / bias_v");
  if (m.add_zero_attn) not_modelled("add_zero_attn=True");
  if (m.static_k || m.static_v) not_modelled("static_k / static_v");
  const bool batched = batched_call(m);
  Tensor query = m.query, key = m.key, value = m.value, key_padding_mask = m.key_padding_mask;
  if (!batched) {
    query = unsqueeze(query, 1);
    key = unsqueeze(key, 1);
    value = unsqueeze(value, 1);
    if (key_padding_mask) key_padding_mask = unsqueeze(key_padding_mask, 0);
  }
  const int64_t tgt_len = query->sizes[0], bsz = query->sizes[1], embed_dim = query->sizes[2];
  if (key_padding_mask)
    check(key_padding_mask->dtype() == DType::Bool || is_floating(key_padding_mask->dtype()),
          "only bool and floating types of key_padding_mask are supported");
  check(embed_dim == m.embed_dim_to_check, "was expecting embedding dimension of " +
                                               std::to_string(m.embed_dim_to_check) + ", but got " +
                                               std::to_string(embed_dim));
  const int64_t num_heads = m.num_heads;
  if (num_heads == 0) throw ScenarioError("zero_division", "integer division or modulo by zero");
  // Python's floor division.
  const int64_t head_dim = embed_dim / num_heads - ((embed_dim % num_heads != 0 && (embed_dim < 0) != (num_heads < 0)) ? 1 : 0);
  check(head_dim * num_heads == embed_dim,
        "embed_dim " + std::to_string(embed_dim) + " not divisible by num_heads " + std::to_string(num_heads));
  std::vector<Tensor> qkv;
  if (!m.use_separate_proj_weight) {
    check(key->sizes == value->sizes, "key shape torch.Size(" + shape_str(key->sizes) +
                                          ") does not match value shape torch.Size(" + shape_str(value->sizes) + ")");
    check(m.in_proj_weight != nullptr, "use_separate_proj_weight is False but in_proj_weight is None");
    qkv = in_projection_packed(query, key, value, m.in_proj_weight, m.in_proj_bias);
  } else {
    check(key->sizes[0] == value->sizes[0] && key->sizes[1] == value->sizes[1],
          "key's sequence and batch dims do not match value's");
    check(m.q_proj_weight != nullptr, "use_separate_proj_weight is True but q_proj_weight is None");
    check(m.k_proj_weight != nullptr, "use_separate_proj_weight is True but k_proj_weight is None");
    check(m.v_proj_weight != nullptr, "use_separate_proj_weight is True but v_proj_weight is None");
    std::vector<Tensor> b = m.in_proj_bias ? chunk(m.in_proj_bias, 3, 0) : std::vector<Tensor>{nullptr, nullptr, nullptr};
    // _in_projection's shape asserts, then three linears.
    qkv = {linear(query, m.q_proj_weight, b[0]), linear(key, m.k_proj_weight, b[1]), linear(value, m.v_proj_weight, b[2])};
  }
  Tensor q = qkv[0], k = qkv[1], v = qkv[2];
  const int64_t src_len0 = key->sizes[0];
  Tensor attn_mask = m.attn_mask;
  if (attn_mask) {
    check(is_floating(attn_mask->dtype()) || attn_mask->dtype() == DType::Bool,
          "Only float, byte, and bool types are supported for attn_mask, not torch." + dtype_name(attn_mask->dtype()));
    if (attn_mask->dim() == 2) {
      if (attn_mask->sizes.vec() != Shape{tgt_len, src_len0})
        throw ScenarioError("shape_mismatch", "The shape of the 2D attn_mask is torch.Size(" +
                                                  shape_str(attn_mask->sizes) + "), but should be " +
                                                  dims_text({tgt_len, src_len0}) + ".");
      attn_mask = unsqueeze(attn_mask, 0);
    } else if (attn_mask->dim() == 3) {
      if (attn_mask->sizes.vec() != Shape{bsz * num_heads, tgt_len, src_len0})
        throw ScenarioError("shape_mismatch", "The shape of the 3D attn_mask is torch.Size(" +
                                                  shape_str(attn_mask->sizes) + "), but should be " +
                                                  dims_text({bsz * num_heads, tgt_len, src_len0}) + ".");
    } else {
      throw ScenarioError("shape_mismatch", "attn_mask's dimension " + std::to_string(attn_mask->dim()) +
                                                " is not supported");
    }
  }
  q = heads_first(q, tgt_len, bsz * num_heads, head_dim);
  k = heads_first(k, k->sizes[0], bsz * num_heads, head_dim);
  v = heads_first(v, v->sizes[0], bsz * num_heads, head_dim);
  const int64_t src_len = k->sizes[1];
  const Value minus_inf = Value::real(-std::numeric_limits<double>::infinity());
  if (key_padding_mask) {
    check(key_padding_mask->sizes.vec() == Shape{bsz, src_len},
          "expecting key_padding_mask shape of " + dims_text({bsz, src_len}) + ", but got torch.Size(" +
              shape_str(key_padding_mask->sizes) + ")");
    key_padding_mask =
        reshape(expand(view(key_padding_mask, {bsz, 1, 1, src_len}), {-1, num_heads, -1, -1}), {bsz * num_heads, 1, src_len});
    if (!attn_mask) attn_mask = key_padding_mask;
    else if (attn_mask->dtype() == DType::Bool) not_modelled("a bool attn_mask and a key_padding_mask (logical_or)");
    else attn_mask = masked_fill(attn_mask, key_padding_mask, minus_inf);
  }
  if (attn_mask && attn_mask->dtype() == DType::Bool) {
    // torch.zeros_like(attn_mask, dtype=q.dtype).masked_fill_(attn_mask, float("-inf"))
    Tensor fresh = with_preserved_format(kernels::full(attn_mask->sizes, 0.0, q->dtype(), attn_mask->is_meta()), attn_mask);
    masked_fill_(fresh, attn_mask, minus_inf);
    attn_mask = fresh;
  }
  const double dropout_p = m.training ? m.dropout_p : 0.0;
  const int64_t e = q->sizes[2];
  Tensor q_scaled = div(q, wrap_number(Value::real(std::sqrt(static_cast<double>(e)))));
  Tensor weights = attn_mask ? baddbmm(attn_mask, q_scaled, transpose(k, -2, -1), Value::integer(1), Value::integer(1))
                             : bmm(q_scaled, transpose(k, -2, -1));
  weights = softmax(weights, -1);
  if (dropout_p > 0.0) weights = dropout(weights, dropout_p, true, false, gen);
  Tensor out = bmm(weights, v);
  out = view(contiguous(transpose(out, 0, 1)), {tgt_len * bsz, embed_dim});
  out = linear(out, m.out_proj_weight, m.out_proj_bias);
  out = view(out, {tgt_len, bsz, out->sizes[1]});
  if (!m.need_weights) {
    if (!batched) out = squeeze(out, 1);
    return {out, nullptr};
  }
  weights = view(weights, {bsz, num_heads, tgt_len, src_len});
  if (m.average_attn_weights) weights = div(sum(weights, std::vector<int64_t>{1}, false), wrap_number(Value::integer(num_heads)));
  if (!batched) {
    out = squeeze(out, 1);
    weights = squeeze(weights, 0);
  }
  return {out, weights};
}

}  // namespace agtrace::ops
