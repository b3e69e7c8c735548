// adaptive_avg_pool2d/1d, avg_pool2d/1d, group_norm, interpolate (nearest, bilinear) and
// type_as (lib/ops/model_ops.cpp): gradients by central differences in float64, and the
// nodes, saved values, index formulas and errors measured in PyTorch 1.13.
#include <catch2/catch.hpp>

#include <string>

#include "interp/run_helpers.hpp"
#include "ops/model_ops.hpp"
#include "support/gradcheck.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::RunResult;
using agtrace::Tensor;
using agtrace::test::Inputs;
using agtrace::test::check_gradients;
using agtrace::test::leaf64;
using agtrace::test::run_text;
namespace ops = agtrace::ops;

TEST_CASE("adaptive and fixed average pooling gradients match central differences", "[model-ops]") {
  check_gradients("adaptive_avg_pool2d 3x3 of 5x7", {leaf64({2, 2, 5, 7}, -1, 1)},
                  [](const Inputs& x) { return ops::adaptive_avg_pool2d(x[0], {3, 3}); });
  check_gradients("adaptive_avg_pool2d upsampling 4x9 of 3x5", {leaf64({2, 3, 5}, -1, 1)},
                  [](const Inputs& x) { return ops::adaptive_avg_pool2d(x[0], {4, 9}); });
  check_gradients("adaptive_avg_pool2d 1x1 (mean)", {leaf64({2, 3, 4, 4}, -1, 1)},
                  [](const Inputs& x) { return ops::adaptive_avg_pool2d(x[0], {1, 1}); });
  check_gradients("adaptive_max_pool2d 3x2 of 5x7", {leaf64({2, 2, 5, 7}, -1, 1)},
                  [](const Inputs& x) { return ops::adaptive_max_pool2d(x[0], {3, 2}).first; });
  check_gradients("adaptive_avg_pool1d", {leaf64({2, 3, 7}, -1, 1)},
                  [](const Inputs& x) { return ops::adaptive_avg_pool1d(x[0], {3}); });
  ops::AvgPool2dArgs plain;
  plain.kernel_size = {2, 2};
  check_gradients("avg_pool2d 2", {leaf64({1, 2, 5, 6}, -1, 1)}, [&](const Inputs& x) { return ops::avg_pool2d(x[0], plain); });
  ops::AvgPool2dArgs padded;
  padded.kernel_size = {3, 2};
  padded.stride = {2, 1};
  padded.padding = {1, 1};
  padded.ceil_mode = true;
  padded.count_include_pad = false;
  check_gradients("avg_pool2d padded ceil_mode, pad excluded", {leaf64({2, 2, 5, 6}, -1, 1)},
                  [&](const Inputs& x) { return ops::avg_pool2d(x[0], padded); });
  padded.divisor_override = 5;
  check_gradients("avg_pool2d divisor_override", {leaf64({2, 5, 6}, -1, 1)},
                  [&](const Inputs& x) { return ops::avg_pool2d(x[0], padded); });
  check_gradients("avg_pool1d", {leaf64({2, 7}, -1, 1)},
                  [](const Inputs& x) { return ops::avg_pool1d(x[0], {3}, {2}, {1}, false, true); });
}

TEST_CASE("group_norm gradients match central differences", "[model-ops]") {
  check_gradients("group_norm affine", {leaf64({2, 6, 3, 2}, -1, 1), leaf64({6}, 0.5, 1.5, true, 0.1), leaf64({6}, -1, 1, true, 0.7)},
                  [](const Inputs& x) { return ops::group_norm(x[0], 3, x[1], x[2], 1e-5); });
  check_gradients("group_norm one group, no affine", {leaf64({3, 4, 5}, -1, 1)},
                  [](const Inputs& x) { return ops::group_norm(x[0], 1, nullptr, nullptr, 1e-5); });
  check_gradients("group_norm 2-D input, weight only", {leaf64({4, 6}, -1, 1), leaf64({6}, 0.5, 1.5, true, 0.2)},
                  [](const Inputs& x) { return ops::group_norm(x[0], 6, x[1], nullptr, 1e-5); });
}

TEST_CASE("interpolate gradients match central differences", "[model-ops]") {
  check_gradients("bilinear size", {leaf64({1, 2, 3, 4}, -1, 1)},
                  [](const Inputs& x) { return ops::upsample_bilinear2d(x[0], std::vector<int64_t>{5, 7}, false, std::nullopt); });
  check_gradients("bilinear align_corners", {leaf64({1, 2, 3, 4}, -1, 1)},
                  [](const Inputs& x) { return ops::upsample_bilinear2d(x[0], std::vector<int64_t>{5, 3}, true, std::nullopt); });
  check_gradients("bilinear scale", {leaf64({1, 1, 4, 5}, -1, 1)}, [](const Inputs& x) {
    return ops::upsample_bilinear2d(x[0], std::nullopt, false, std::vector<double>{1.5, 0.7});
  });
  check_gradients("nearest 2d", {leaf64({1, 2, 3, 4}, -1, 1)},
                  [](const Inputs& x) { return ops::upsample_nearest(x[0], std::nullopt, std::vector<double>{2.0, 1.5}); });
  check_gradients("nearest 1d", {leaf64({2, 2, 7}, -1, 1)},
                  [](const Inputs& x) { return ops::upsample_nearest(x[0], std::vector<int64_t>{4}, std::nullopt); });
}

TEST_CASE("interpolate nearest reads floor(dst * scale) with the scale as a float", "[model-ops]") {
  // Measured: scale_factor=1.3 on 3 elements reads 0, 0, 1 (no identity shortcut); 0.7 on 7
  // reads 0, 1, 2, 4; size=4 on 7 reads 0, 1, 3, 5.
  const RunResult r = run_text(R"JSON({"name": "t", "tensors": {"a": {"shape": [1, 1, 3], "init": {"arange": [0, 1]}},
      "b": {"shape": [1, 1, 7], "init": {"arange": [0, 1]}}},
      "program": ["print(F.interpolate(a, scale_factor=1.3).tolist(), F.interpolate(b, scale_factor=0.7).tolist(), F.interpolate(b, size=4).tolist())",
                  "print(F.interpolate(a, scale_factor=2.0).tolist())"]})JSON");
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 2);
  CHECK(r.printed[0] == "[[[0.0, 0.0, 1.0]]] [[[0.0, 1.0, 2.0, 4.0]]] [[[0.0, 1.0, 3.0, 5.0]]]");
  CHECK(r.printed[1] == "[[[0.0, 0.0, 1.0, 1.0, 2.0, 2.0]]]");
}

TEST_CASE("model ops record PyTorch's nodes and saved values", "[model-ops]") {
  const RunResult r = run_text(R"JSON({"name": "t", "tensors": {"x": {"shape": [2, 3, 5, 7], "requires_grad": true},
      "d": {"shape": [2], "dtype": "float64"}},
      "program": ["a = F.adaptive_avg_pool2d(x, 1)", "b = F.adaptive_avg_pool2d(x, (2, None))",
                  "print(a.grad_fn.name(), a.grad_fn._saved_dim, a.grad_fn._saved_keepdim, b.grad_fn.name(), b.shape, b.grad_fn._saved_self is x)",
                  "p = F.avg_pool2d(x, 2)",
                  "print(p.grad_fn._saved_kernel_size, p.grad_fn._saved_stride, p.grad_fn._saved_padding, p.grad_fn._saved_divisor_override, p.grad_fn._saved_count_include_pad)",
                  "q = F.avg_pool1d(x[0], 3)",
                  "print(q.grad_fn.name(), q.grad_fn.next_functions[0][0]._saved_kernel_size, q.grad_fn.next_functions[0][0]._saved_stride)",
                  "g = F.group_norm(x, 3)",
                  "print(g.grad_fn._saved_N, g.grad_fn._saved_C, g.grad_fn._saved_HxW, g.grad_fn._saved_group, g.grad_fn._saved_weight, g.grad_fn._saved_input is x, g.grad_fn._saved_result1.shape)",
                  "u = F.interpolate(x, scale_factor=2)", "v = F.interpolate(x, size=(4, 9), mode='bilinear', align_corners=True)",
                  "print(u.grad_fn.name(), u.grad_fn._saved_scale_factors, u.grad_fn._saved_output_size, v.grad_fn.name(), v.grad_fn._saved_output_size, v.grad_fn._saved_align_corners)",
                  "t = x.type_as(d)", "print(t.grad_fn.name(), t.dtype, x.type_as(x) is x)"]})JSON");
  REQUIRE(r.errors.empty());
  REQUIRE(r.printed.size() == 6);
  CHECK(r.printed[0] == "MeanBackward1 (18446744073709551615, 18446744073709551614) True AdaptiveAvgPool2DBackward0 "
                        "torch.Size([2, 3, 2, 7]) True");
  CHECK(r.printed[1] == "(2, 2) () (0, 0) None True");
  CHECK(r.printed[2] == "SqueezeBackward1 (1, 3) (1, 3)");
  CHECK(r.printed[3] == "2 3 35 3 None True torch.Size([2, 3])");
  CHECK(r.printed[4] == "UpsampleNearest2DBackward1 (2.0, 2.0) None UpsampleBilinear2DBackward1 (4, 9) True");
  CHECK(r.printed[5] == "ToCopyBackward0 torch.float64 True");
}

TEST_CASE("model ops raise PyTorch's errors", "[model-ops]") {
  const RunResult r = run_text(R"JSON({"name": "t", "tensors": {"x": {"shape": [2, 3, 5, 7], "requires_grad": true}},
      "program": [{"try": ["F.adaptive_avg_pool2d(x, (1, 2, 3))"]}, {"try": ["F.adaptive_avg_pool2d(x[0, 0], 2)"]},
                  {"try": ["F.avg_pool2d(x, 2, padding=2)"]}, {"try": ["F.avg_pool2d(x, 8)"]},
                  {"try": ["F.group_norm(x, 2)"]}, {"try": ["F.group_norm(x, 0)"]},
                  {"try": ["F.interpolate(x)"]}, {"try": ["F.interpolate(x, size=0)"]},
                  {"try": ["F.interpolate(x, size=3, mode='bicubic')"]}, {"try": ["F.interpolate(x.half(), size=3)"]}]})JSON");
  REQUIRE(r.errors.size() == 10);
  const char* kinds[] = {"shape_mismatch", "shape_mismatch", "type_error", "shape_mismatch", "shape_mismatch",
                         "type_error",     "type_error",     "shape_mismatch", "unsupported", "dtype_mismatch"};
  for (size_t i = 0; i < 10; ++i) {
    INFO(r.errors[i].message);
    CHECK(r.errors[i].kind == kinds[i]);
  }
  CHECK(r.errors[0].message == "adaptive_avg_pool2d: output_size must be 2");
  CHECK(r.errors[4].message ==
        "Expected number of channels in input to be divisible by num_groups, but got input of shape [2, 3, 5, 7] and "
        "num_groups=2");
  CHECK(r.errors[7].message ==
        "Input and output sizes should be greater than 0, but got input (H: 5, W: 7) output (H: 0, W: 0)");
}

TEST_CASE("model ops on meta make shapes and nodes only", "[model-ops]") {
  // Measured: PyTorch 1.13 has no meta kernel for _adaptive_avg_pool2d_backward, so the 3x3
  // pool's backward raises there; the 1x1 pool is a mean and runs.
  const RunResult r = run_text(R"JSON({"name": "t", "device": "meta", "tensors": {"x": {"shape": [8, 6, 32, 32], "requires_grad": true},
      "w": {"shape": [6], "requires_grad": true}},
      "program": ["y = F.interpolate(F.avg_pool2d(F.group_norm(x, 2, w, w), 2), scale_factor=2, mode='bilinear')",
                  "z = F.adaptive_avg_pool2d(y, 3)", "m = F.adaptive_avg_pool2d(y, 1)",
                  "print(z.shape, z.grad_fn.name(), m.grad_fn.name())", {"try": ["z.sum().backward()"]},
                  "m.sum().backward()", "print(x.grad.shape, w.grad.shape)"]})JSON");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].kind == "unsupported");
  REQUIRE(r.printed.size() == 2);
  CHECK(r.printed[0] == "torch.Size([8, 6, 3, 3]) AdaptiveAvgPool2DBackward0 MeanBackward1");
  CHECK(r.printed[1] == "torch.Size([8, 6, 32, 32]) torch.Size([6])");
}

TEST_CASE("multi_head_attention_forward refuses the branches it does not model and checks shapes", "[model-ops]") {
  const RunResult r = run_text(R"JSON({"name": "t", "tensors": {"x": {"shape": [3, 2, 4], "requires_grad": true},
      "w": {"shape": [12, 4], "requires_grad": true}, "o": {"shape": [4, 4], "requires_grad": true},
      "bk": {"shape": [1, 1, 4]}},
      "program": [
        {"try": ["F.multi_head_attention_forward(x, x, x, 4, 2, w, None, bk, bk, False, 0.0, o, None)"]},
        {"try": ["F.multi_head_attention_forward(x, x, x, 4, 2, w, None, None, None, True, 0.0, o, None)"]},
        {"try": ["F.multi_head_attention_forward(x, x, x, 4, 2, w, None, None, None, False, 0.0, o, None, attn_mask=torch.zeros(3, 3) > 1, key_padding_mask=torch.zeros(2, 3) > 1)"]},
        {"try": ["F.multi_head_attention_forward(x, x, x, 4, 3, w, None, None, None, False, 0.0, o, None)"]},
        {"try": ["F.multi_head_attention_forward(x, x, x, 5, 2, w, None, None, None, False, 0.0, o, None)"]},
        {"try": ["F.multi_head_attention_forward(x[0], x, x, 4, 2, w, None, None, None, False, 0.0, o, None)"]},
        "out, weights = F.multi_head_attention_forward(x, x, x, 4, 2, w, None, None, None, False, 0.0, o, None)",
        "print(out.shape, weights.shape, out.grad_fn.name())"]})JSON");
  REQUIRE(r.errors.size() == 6);
  CHECK(r.errors[0].kind == "unsupported");
  CHECK(r.errors[0].message.find("bias_k") != std::string::npos);
  CHECK(r.errors[1].kind == "unsupported");
  CHECK(r.errors[1].message.find("add_zero_attn") != std::string::npos);
  CHECK(r.errors[2].kind == "unsupported");
  CHECK(r.errors[2].message.find("logical_or") != std::string::npos);
  CHECK(r.errors[3].message == "embed_dim 4 not divisible by num_heads 3");
  CHECK(r.errors[4].message == "was expecting embedding dimension of 5, but got 4");
  CHECK(r.errors[5].message ==
        "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found 3-D and 3-D tensors respectively");
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "torch.Size([3, 2, 4]) torch.Size([2, 3, 3]) ViewBackward0");
}
