// torch.einsum (lib/ops/einsum.cpp): gradients by central differences in double, the node
// sequence at::einsum records in PyTorch 1.13 (measured walks), meta runs and shape errors.
#include <catch2/catch.hpp>

#include <string>

#include "interp/run_helpers.hpp"
#include "ops/shapes_extra.hpp"
#include "support/gradcheck.hpp"

using agtrace::RunResult;
using agtrace::Tensor;
using agtrace::test::Inputs;
using agtrace::test::check_gradients;
using agtrace::test::leaf64;
using agtrace::test::run_text;
namespace ops = agtrace::ops;

TEST_CASE("einsum gradients match central differences", "[einsum]") {
  struct Case {
    const char* eq;
    std::vector<agtrace::Shape> shapes;
  };
  const Case cases[] = {{"ij,jk->ik", {{2, 3}, {3, 4}}},        {"bij,bjk->bik", {{2, 2, 3}, {2, 3, 4}}},
                        {"i,i->", {{3}, {3}}},                   {"ij->ji", {{2, 3}}},
                        {"bhqd,bhkd->bhqk", {{1, 2, 3, 2}, {1, 2, 4, 2}}},
                        {"ii->i", {{3, 3}}},                     {"i,j->ij", {{2}, {3}}},
                        {"...ij,...jk->...ik", {{2, 2, 3}, {2, 3, 2}}},
                        {"ij,jk->k", {{2, 3}, {3, 4}}},          {"ij,ij->ij", {{2, 3}, {1, 3}}},
                        {"ii", {{3, 3}}},                        {"iij->j", {{2, 2, 3}}},
                        {"Ab,bA->", {{2, 3}, {3, 2}}},           {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
                        {"i,ij,j->", {{2}, {2, 3}, {3}}}};
  for (const Case& c : cases) {
    Inputs in;
    double phase = 0.2;
    for (const auto& s : c.shapes) in.push_back(leaf64(s, -1, 1, true, phase += 0.17));
    check_gradients(c.eq, in, [&](const Inputs& x) { return ops::einsum(c.eq, x); });
  }
}

TEST_CASE("einsum records at::einsum's decomposition", "[einsum]") {
  // Measured in torch 1.13: 'ij,jk->ik' walks ViewBackward0, PermuteBackward0, ViewBackward0,
  // BmmBackward0, then ReshapeAliasBackward0 > PermuteBackward0 > PermuteBackward0 >
  // UnsqueezeBackward0 for each operand; bmm saves (1, 2, 3) and (1, 3, 4).
  const RunResult r = run_text(R"JSON({"name": "t", "tensors": {"a": {"shape": [2, 3], "requires_grad": true},
      "b": {"shape": [3, 4], "requires_grad": true}}, "program": ["y = torch.einsum('ij,jk->ik', a, b)",
      "m = y.grad_fn.next_functions[0][0].next_functions[0][0].next_functions[0][0]",
      "print(y.grad_fn.name(), m.name(), m._saved_self.shape, m._saved_mat2.shape)",
      "print(m.next_functions[0][0].name(), m.next_functions[0][0]._saved_self_sym_sizes)",
      "print(torch.einsum('i,j->ij', a[0], b[0]).grad_fn.name(), torch.einsum('ij->j', a).grad_fn._saved_dim)"]})JSON");
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 3);
  CHECK(r.printed[0] == "ViewBackward0 BmmBackward0 torch.Size([1, 2, 3]) torch.Size([1, 3, 4])");
  CHECK(r.printed[1] == "ReshapeAliasBackward0 (2, 3, 1)");
  CHECK(r.printed[2] == "MulBackward0 (1,)");
}

TEST_CASE("einsum runs on meta tensors, three operands left to right", "[einsum]") {
  const RunResult meta = run_text(R"JSON({"name": "t", "device": "meta", "tensors": {"q": {"shape": [2, 8, 16, 64],
      "requires_grad": true}, "k": {"shape": [2, 8, 32, 64], "requires_grad": true}},
      "program": ["s = torch.einsum('bhqd,bhkd->bhqk', q, k)", "print(s.shape)", "s.sum().backward()",
                  "t = torch.einsum('ij,jk,kl->il', q[0, 0], k[0, 0].t(), k[0, 0])", "print(t.shape)",
                  {"try": ["torch.einsum('i,i->', q[0, 0, 0], k[0, 0, 0, :3])"]}]})JSON");
  REQUIRE(meta.printed.size() == 2);
  CHECK(meta.printed[0] == "torch.Size([2, 8, 16, 32])");
  CHECK(meta.printed[1] == "torch.Size([16, 64])");
  REQUIRE(meta.errors.size() == 1);
  CHECK(meta.errors[0].kind == "shape_mismatch");
  REQUIRE(meta.grads.size() == 2);
}
