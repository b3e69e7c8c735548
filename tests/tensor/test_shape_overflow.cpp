// Size products past int64 raise as PyTorch raises them (numel, storage bytes) instead of
// wrapping, and a slice whose length PyTorch 1.13 computes with a wrap is refused.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "errors.hpp"
#include "support/command.hpp"
#include "tensor/tensor.hpp"

using namespace agtrace;
using namespace agtrace::test;

TEST_CASE("shape_numel detects a product past int64", "[tensor][robust]") {
  CHECK(shape_numel({int64_t{1} << 31, int64_t{1} << 31, 1}) == int64_t{1} << 62);
  CHECK(shape_numel({0, int64_t{1} << 40}) == 0);
  CHECK_THROWS_WITH(shape_numel({int64_t{1} << 32, int64_t{1} << 32, 3}), "numel: integer multiplication overflow");
  CHECK_THROWS_WITH(shape_numel({int64_t{1} << 62, 2}), "numel: integer multiplication overflow");
  CHECK_THROWS_WITH(empty_tensor(Shape{int64_t{1} << 62, 2}, DType::Float32, true),
                    "Storage size calculation overflowed with sizes=[4611686018427387904, 2]");
}

TEST_CASE("a slice step whose length PyTorch wraps is unsupported", "[tensor][robust]") {
  const std::string dir = temp_dir();
  spit(dir + "/s.json", R"JSON({"name": "s", "tensors": {"v": {"shape": [10]}},
    "program": [{"try": ["z = v[1::9223372036854775807]"]}, "z = v[1::2**62]", "print(z.shape)"]})JSON");
  auto r = run_agtrace("run " + dir + "/s.json --format json");
  INFO(r.out << r.err);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["errors"].size() == 1);
  CHECK(j["errors"][0]["kind"] == "unsupported");
  CHECK(j["errors"][0]["message"].get<std::string>().find("slice step 9223372036854775807") != std::string::npos);
  CHECK(j["printed"] == nlohmann::json::array({"torch.Size([1])"}));
}
