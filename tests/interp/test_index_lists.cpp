// Python lists and tuples used as indices (lib/interp/indexing.cpp), as PyTorch 1.13's
// treatSequenceAsTuple and sequenceToVariable read them (measured with /usr/bin/python3):
// a list holding a sequence, tensor, slice, None or `...` is a tuple of indices (fewer than
// 32 items), a nested list inside the tuple is one multi-dim index tensor, and `x[a,]` is the
// one-item tuple.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "interp/run_helpers.hpp"

using agtrace::RunResult;
using agtrace::test::run_text;

namespace {
std::vector<std::string> printed(const std::string& program) {
  const RunResult r = run_text(std::string(R"JSON({"name": "t", "tensors": {
    "x": {"shape": [4, 4], "requires_grad": true, "init": {"arange": [0, 1]}}}, "program": )JSON") +
                               program + "}");
  REQUIRE(r.errors.empty());
  return r.printed;
}
}  // namespace

TEST_CASE("a list of lists is a tuple of indices, and x[a,] keeps a lone list one index", "[interp][index-lists]") {
  CHECK(printed(R"P(["print(x[[[0, 1], [1, 2]]].tolist())", "print(x[[[0, 1], [1, 2]],].shape)"])P") ==
        std::vector<std::string>{"[1.0, 6.0]", "torch.Size([2, 2, 4])"});
  // Measured: x[[0, None]] is x[0, None]; x[(0, 1),] indexes dim 0 with [0, 1].
  CHECK(printed(R"P(["print(x[[0, None]].shape, x[(0, 1),].shape, x[(0, 1)].shape)"])P") ==
        std::vector<std::string>{"torch.Size([1, 4]) torch.Size([2, 4]) torch.Size([])"});
}

TEST_CASE("32 or more items: the list is one index, nested lists a multi-dim tensor", "[interp][index-lists]") {
  std::string pairs;
  for (int i = 0; i < 32; ++i) pairs += std::string(i ? ", " : "") + "[0, 3]";
  CHECK(printed("[\"print(x[[" + pairs + "]].shape)\"]") == std::vector<std::string>{"torch.Size([32, 2, 4])"});
}

TEST_CASE("setitem through a list of lists writes index_put_ at the paired positions", "[interp][index-lists]") {
  CHECK(printed(R"P(["h = x * 1", "h[[[0, 3], [1, 2]]] = -1.0", "print(h[0, 1].item(), h[3, 2].item(), h._version)",
                    "print(h.grad_fn.name())"])P") ==
        std::vector<std::string>{"-1.0 -1.0 1", "IndexPutBackward0"});
}
