// torch.einsum as PyTorch 1.13's at::einsum (aten/src/ATen/native/Linear.cpp) decomposes it,
// so the graph holds the same nodes in the same order with the same saved values:
//   1. every operand: diagonal + movedim (a permute) for a repeated label, unsqueeze(dim) at
//      the end for each label it lacks, then one permute into the order (output labels,
//      then the contracted ones: ellipsis dims, then labels A-Z, a-z);
//   2. each pair, left to right: dims only one of them has that are contracted are summed first
//      (sum(dims, keepdim=True)), then sumproduct_pair: permute + reshape to (batch, m, k)
//      and (batch, k, n), bmm, view, permute back (keepdim), or mul when nothing is
//      contracted;
//   3. the contracted dims (now size 1) are dropped with a view; one operand: sum(dims).
// Measured (walks and _saved_* of 'ij,jk->ik', 'bij,bjk->bik', 'i,i->', 'ij->ji',
// 'bhqd,bhkd->bhqk', 'ii->i', 'i,j->ij', '...ij,...jk->...ik', 'ij->j', 'ii'): e.g. 'ij,jk->ik'
// is ViewBackward0 > PermuteBackward0 > ViewBackward0 > BmmBackward0 > (ReshapeAliasBackward0 >
// PermuteBackward0 > PermuteBackward0 > UnsqueezeBackward0) for each operand. Three or more
// operands are contracted left to right, as torch.einsum does without opt_einsum (the
// measured install: torch.backends.opt_einsum.is_available() is False); with opt_einsum
// PyTorch would pick another order.
#include <string>
#include <vector>

#include "errors.hpp"
#include "ops/common.hpp"
#include "ops/ops.hpp"
#include "ops/shapes.hpp"
#include "ops/shapes_extra.hpp"

namespace agtrace::ops {

using detail::OpScope;

namespace {

constexpr int kLetters = 52;          // A-Z then a-z (at::einsum's label_to_subscript order)
constexpr int kEllipsis = kLetters;  // an operand's "..." in its label list

[[noreturn]] void einsum_error(const std::string& msg) { throw ScenarioError("type_error", "einsum(): " + msg); }

int subscript(char c) { return std::isupper(static_cast<unsigned char>(c)) ? c - 'A' : c - 'a' + 26; }
char letter(int s) { return static_cast<char>(s < 26 ? 'A' + s : 'a' + (s - 26)); }

// The labels of each operand, left of "->", with kEllipsis for "...".
std::vector<std::vector<int>> parse_operands(const std::string& lhs, size_t num_ops) {
  std::vector<std::vector<int>> labels(num_ops);
  size_t op = 0;
  bool ellipsis = false;
  for (size_t i = 0; i < lhs.size(); ++i) {
    const char c = lhs[i];
    if (c == ' ') continue;
    if (c == ',') {
      if (++op >= num_ops) einsum_error("fewer operands were provided than specified in the equation");
      ellipsis = false;
    } else if (c == '.') {
      if (ellipsis)
        einsum_error("found '.' for operand " + std::to_string(op) + " for which an ellipsis was already found");
      if (!(i + 2 < lhs.size() && lhs[i + 1] == '.' && lhs[i + 2] == '.'))
        einsum_error("found '.' for operand " + std::to_string(op) + " that is not part of any ellipsis");
      i += 2;
      labels[op].push_back(kEllipsis);
      ellipsis = true;
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      labels[op].push_back(subscript(c));
    } else {
      einsum_error("invalid subscript given at index " + std::to_string(i) +
                   " in the equation string, subscripts must be in [a-zA-Z]");
    }
  }
  if (op != num_ops - 1) einsum_error("more operands were provided than specified in the equation");
  return labels;
}

std::vector<int64_t> sizes_of(const Tensor& t) { return {t->sizes.begin(), t->sizes.end()}; }

// movedim(-1, to) as the permute it records.
Tensor move_last_dim(const Tensor& t, int64_t to) {
  std::vector<int64_t> perm;
  const int64_t n = t->dim();
  for (int64_t k = 0, from = 0; k < n; ++k) perm.push_back(k == to ? n - 1 : from++);
  return permute(t, perm);
}

void check_pair_size(const Tensor& left, const Tensor& right, int64_t i) {
  if (left->sizes[static_cast<size_t>(i)] != right->sizes[static_cast<size_t>(i)])
    throw ScenarioError("shape_mismatch", "non-broadcast dimensions must match");
}

// at::native::sumproduct_pair(left, right, sum_dims, keepdim): both operands have the same
// number of dims; the sizes of `sum_dims` are contracted by one bmm.
Tensor sumproduct_pair(Tensor left, Tensor right, const std::vector<int64_t>& sum_dims, bool keepdim) {
  if (sum_dims.empty()) return mul(left, right);
  const int64_t dim = left->dim();
  std::vector<bool> summed(static_cast<size_t>(dim), false);
  for (int64_t d : sum_dims) summed[static_cast<size_t>(d)] = true;
  std::vector<int64_t> lro, lo, ro;
  int64_t lro_size = 1, lo_size = 1, ro_size = 1, sum_size = 1;
  for (int64_t i = 0; i < dim; ++i) {
    const int64_t ls = left->sizes[static_cast<size_t>(i)], rs = right->sizes[static_cast<size_t>(i)];
    const bool sl = ls != 1, sr = rs != 1;
    if (summed[static_cast<size_t>(i)]) {
      if (sl && sr) {
        check_pair_size(left, right, i);
        sum_size *= ls;
      } else if (sl) {
        left = sum(left, std::vector<int64_t>{i}, true);
      } else if (sr) {
        right = sum(right, std::vector<int64_t>{i}, true);
      }
    } else if (sl && sr) {
      check_pair_size(left, right, i);
      lro.push_back(i);
      lro_size *= ls;
    } else if (sl) {
      lo.push_back(i);
      lo_size *= ls;
    } else {
      ro.push_back(i);
      ro_size *= rs;
    }
  }
  std::vector<int64_t> out_size;
  for (int64_t d : lro) out_size.push_back(left->sizes[static_cast<size_t>(d)]);
  for (int64_t d : lo) out_size.push_back(left->sizes[static_cast<size_t>(d)]);
  for (size_t k = 0; k < sum_dims.size(); ++k) out_size.push_back(1);
  for (int64_t d : ro) out_size.push_back(right->sizes[static_cast<size_t>(d)]);

  auto joined = [](std::initializer_list<const std::vector<int64_t>*> parts) {
    std::vector<int64_t> out;
    for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
    return out;
  };
  const std::vector<int64_t> lperm = joined({&lro, &lo, &sum_dims, &ro});
  const std::vector<int64_t> rperm = joined({&lro, &sum_dims, &ro, &lo});
  std::vector<int64_t> operm(static_cast<size_t>(dim), -1);
  int64_t at = 0;
  for (const std::vector<int64_t>* part : std::initializer_list<const std::vector<int64_t>*>{&lro, &lo, &sum_dims, &ro})
    for (int64_t d : *part) operm[static_cast<size_t>(d)] = at++;

  left = reshape(permute(left, lperm), {lro_size, lo_size, sum_size});
  right = reshape(permute(right, rperm), {lro_size, sum_size, ro_size});
  Tensor result = permute(view(bmm(left, right), out_size), operm);
  if (!keepdim) {
    std::vector<int64_t> sizes = sizes_of(result);
    for (int64_t i = dim - 1; i >= 0; --i)
      if (summed[static_cast<size_t>(i)]) sizes.erase(sizes.begin() + i);
    result = view(result, sizes);
  }
  return result;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  OpScope scope("einsum");
  if (operands.empty()) einsum_error("must provide at least one operand");
  for (const Tensor& t : operands)
    if (t->numel() == 0) throw ScenarioError("unsupported", "einsum of an operand with no elements is not supported");
  const size_t num_ops = operands.size();
  const size_t arrow = equation.find("->");
  const std::vector<std::vector<int>> op_labels = parse_operands(equation.substr(0, arrow), num_ops);

  std::vector<int64_t> label_count(kLetters, 0);
  int64_t ell_num_dim = 0;  // the most dims any ellipsis covers
  for (size_t i = 0; i < num_ops; ++i) {
    const int64_t ndims = operands[i]->dim();
    auto nlabels = static_cast<int64_t>(op_labels[i].size());
    bool has_ellipsis = false;
    for (int label : op_labels[i]) {
      if (label == kEllipsis) {
        --nlabels;
        has_ellipsis = true;
        ell_num_dim = std::max(ell_num_dim, ndims - nlabels);
      } else {
        ++label_count[static_cast<size_t>(label)];
      }
    }
    if (has_ellipsis ? nlabels > ndims : nlabels != ndims)
      throw ScenarioError("shape_mismatch",
                          "einsum(): the number of subscripts in the equation (" + std::to_string(nlabels) +
                              (has_ellipsis ? ") is more than the number of dimensions ("
                                            : ") does not match the number of dimensions (") +
                              std::to_string(ndims) + ") for operand " + std::to_string(i) +
                              (has_ellipsis ? "" : " and no ellipsis was given"));
  }

  // Where each label goes in the aligned operands: output labels first.
  std::vector<int64_t> label_perm_index(kLetters, -1);
  int64_t perm_index = 0, ell_index = 0;
  bool ell_in_output = false;
  if (arrow == std::string::npos) {
    // Implicit output: the ellipsis dims, then the labels seen once, in label order.
    perm_index = ell_num_dim;
    ell_in_output = true;
    for (int label = 0; label < kLetters; ++label)
      if (label_count[static_cast<size_t>(label)] == 1) label_perm_index[static_cast<size_t>(label)] = perm_index++;
  } else {
    const std::string rhs = equation.substr(arrow + 2);
    for (size_t i = 0; i < rhs.size(); ++i) {
      const char c = rhs[i];
      if (c == ' ') continue;
      if (c == '.') {
        if (ell_in_output) einsum_error("found '.' for output but an ellipsis (...) was already found");
        if (!(i + 2 < rhs.size() && rhs[i + 1] == '.' && rhs[i + 2] == '.'))
          einsum_error("found '.' for output that is not part of any ellipsis (...)");
        i += 2;
        ell_index = perm_index;
        perm_index += ell_num_dim;
        ell_in_output = true;
        continue;
      }
      if (!std::isalpha(static_cast<unsigned char>(c)))
        einsum_error("invalid subscript given at index " + std::to_string(arrow + 2 + i) +
                     " in the equation string, subscripts must be in [a-zA-Z]");
      const auto label = static_cast<size_t>(subscript(c));
      if (label_count[label] == 0 || label_perm_index[label] != -1)
        einsum_error(std::string("output subscript ") + c +
                     (label_perm_index[label] > -1 ? " appears more than once in the output"
                                                   : " does not appear in the equation for any input operand"));
      label_perm_index[label] = perm_index++;
    }
  }
  const int64_t out_num_dim = perm_index;
  if (!ell_in_output) {
    ell_index = perm_index;
    perm_index += ell_num_dim;
  }
  for (size_t label = 0; label < kLetters; ++label)
    if (label_count[label] > 0 && label_perm_index[label] == -1) label_perm_index[label] = perm_index++;

  // Align every operand to (output dims, contracted dims); count, per aligned dim, the
  // operands whose size there is not 1.
  std::vector<int64_t> label_size(kLetters, 1), ell_sizes(static_cast<size_t>(ell_num_dim), 1);
  std::vector<int64_t> dim_counts(static_cast<size_t>(perm_index), 0);
  std::vector<Tensor> ops;
  for (size_t i = 0; i < num_ops; ++i) {
    Tensor op = operands[i];
    std::vector<int64_t> permutation(static_cast<size_t>(perm_index), -1);
    int64_t dim = 0;
    for (int s : op_labels[i]) {
      if (s == kEllipsis) {
        const int64_t ndim = operands[i]->dim() - (static_cast<int64_t>(op_labels[i].size()) - 1);
        for (int64_t j = ell_num_dim - ndim; j < ell_num_dim; ++j) {
          const int64_t size = op->sizes[static_cast<size_t>(dim)];
          if (size != 1) {
            int64_t& seen = ell_sizes[static_cast<size_t>(j)];
            if (seen != 1 && seen != size)
              throw ScenarioError("shape_mismatch", "einsum(): dimension " + std::to_string(dim) +
                                                        " covered by ellipsis in operand " + std::to_string(i) +
                                                        "has size " + std::to_string(size) +
                                                        " which does not broadcast with previously seen ellipsis "
                                                        "with size " +
                                                        std::to_string(seen) + " for the respective dimension");
            seen = size;
            ++dim_counts[static_cast<size_t>(ell_index + j)];
          }
          permutation[static_cast<size_t>(ell_index + j)] = dim++;
        }
        continue;
      }
      const auto label = static_cast<size_t>(s);
      int64_t& slot = permutation[static_cast<size_t>(label_perm_index[label])];
      if (slot == -1) {
        const int64_t size = op->sizes[static_cast<size_t>(dim)];
        if (size != 1) {
          if (label_size[label] != 1 && label_size[label] != size)
            throw ScenarioError("shape_mismatch", std::string("einsum(): subscript ") + letter(s) + " has size " +
                                                      std::to_string(size) + " for operand " + std::to_string(i) +
                                                      " which does not broadcast with previously seen size " +
                                                      std::to_string(label_size[label]));
          label_size[label] = size;
          ++dim_counts[static_cast<size_t>(label_perm_index[label])];
        }
        slot = dim++;
      } else {
        // A repeated label: its diagonal, moved to where the label first was.
        const int64_t prev = slot;
        const int64_t a = op->sizes[static_cast<size_t>(dim)], b = op->sizes[static_cast<size_t>(prev)];
        if (a != b)
          throw ScenarioError("shape_mismatch", std::string("einsum(): subscript ") + letter(s) +
                                                    " is repeated for operand " + std::to_string(i) +
                                                    " but the sizes don't match, " + std::to_string(a) +
                                                    " != " + std::to_string(b));
        op = move_last_dim(diagonal(op, 0, prev, dim), prev);
      }
    }
    for (int64_t& val : permutation)
      if (val == -1) {
        op = unsqueeze(op, dim);
        val = dim++;
      }
    ops.push_back(permute(op, permutation));
  }

  // Contract left to right: each pair's result becomes the first operand (torch.einsum
  // passes no contraction path when opt_einsum is not installed, as in the measured 1.13).
  while (ops.size() > 1) {
    Tensor a = ops[0], b = ops[1];
    ops.erase(ops.begin(), ops.begin() + 2);
    std::vector<int64_t> sum_dims, a_dims_to_sum, b_dims_to_sum;
    for (int64_t d = out_num_dim; d < perm_index; ++d) {
      const bool sa = a->sizes[static_cast<size_t>(d)] != 1, sb = b->sizes[static_cast<size_t>(d)] != 1;
      int64_t& count = dim_counts[static_cast<size_t>(d)];
      if (sa && sb) {
        if (--count == 1) {
          sum_dims.push_back(d);
          count = 0;
        }
      } else if (count == 1) {
        if (sa) a_dims_to_sum.push_back(d);
        else if (sb) b_dims_to_sum.push_back(d);
        if (sa || sb) count = 0;
      }
    }
    if (!a_dims_to_sum.empty()) a = sum(a, a_dims_to_sum, true);
    if (!b_dims_to_sum.empty()) b = sum(b, b_dims_to_sum, true);
    ops.insert(ops.begin(), sumproduct_pair(a, b, sum_dims, true));
  }
  Tensor result = ops[0];

  if (perm_index - out_num_dim > 0) {
    if (num_ops > 1) {
      // Every contracted dim is 1 by now: a view drops them.
      std::vector<int64_t> sizes = sizes_of(result);
      sizes.resize(static_cast<size_t>(out_num_dim));
      return view(result, sizes);
    }
    std::vector<int64_t> sum_dims;
    for (int64_t d = out_num_dim; d < perm_index; ++d) sum_dims.push_back(d);
    return sum(result, sum_dims, false);
  }
  return result;
}

}  // namespace agtrace::ops
