// Storage, tensor objects, strides and dtype rounding (lib/tensor/tensor.cpp,
// dtype.cpp, events.cpp). Rounding and stride values were measured with torch 1.13.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tensor/dtype.hpp"
#include "tensor/events.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::Event;
using agtrace::Shape;
using agtrace::Tensor;

namespace {

// Records events while alive, then restores the previous sink.
struct RecordingSink : agtrace::EventSink {
  std::vector<Event> events;
  agtrace::EventSink* previous;
  RecordingSink() : previous(agtrace::event_sink()) { agtrace::set_event_sink(this); }
  ~RecordingSink() override { agtrace::set_event_sink(previous); }
  void on_event(const Event& e) override { events.push_back(e); }
  std::vector<Event> of(Event::Kind k) const {
    std::vector<Event> out;
    for (const auto& e : events)
      if (e.kind == k) out.push_back(e);
    return out;
  }
};

Tensor iota(const Shape& shape, DType dtype = DType::Float32) {
  std::vector<double> v;
  for (int64_t i = 0; i < agtrace::shape_numel(shape); ++i) v.push_back(static_cast<double>(i));
  return agtrace::tensor_from_values(shape, dtype, v);
}

std::vector<std::pair<int64_t, int64_t>> visits(const Shape& sizes, const Shape& strides, int64_t offset) {
  std::vector<std::pair<int64_t, int64_t>> out;
  agtrace::for_each_offset(sizes, strides, offset, [&](int64_t i, int64_t off) { out.push_back({i, off}); });
  return out;
}

}  // namespace

// ---------------------------------------------------------------- shapes and strides

TEST_CASE("tensor: contiguous strides match torch.empty(...).stride()", "[tensor][strides]") {
  CHECK(agtrace::contiguous_strides({2, 3, 4}) == (Shape{12, 4, 1}));
  CHECK(agtrace::contiguous_strides({5}) == (Shape{1}));
  CHECK(agtrace::contiguous_strides({}) == Shape{});
  // torch.empty(3, 0, 2).stride() == (2, 2, 1): a zero size counts as 1.
  CHECK(agtrace::contiguous_strides({3, 0, 2}) == (Shape{2, 2, 1}));
  CHECK(agtrace::contiguous_strides({2, 1, 3}) == (Shape{3, 3, 1}));
}

TEST_CASE("tensor: shape helpers", "[tensor][strides]") {
  CHECK(agtrace::shape_numel({2, 3, 4}) == 24);
  CHECK(agtrace::shape_numel({}) == 1);
  CHECK(agtrace::shape_numel({3, 0}) == 0);
  CHECK(agtrace::shape_str({2, 3}) == "[2, 3]");
  CHECK(agtrace::shape_str({}) == "[]");
  CHECK(agtrace::shape_str({7}) == "[7]");
}

TEST_CASE("tensor: is_contiguous", "[tensor][strides]") {
  Tensor x = iota({2, 3});
  CHECK(x->is_contiguous());
  CHECK_FALSE(agtrace::make_alias(x, {3, 2}, {1, 3}, 0)->is_contiguous());  // x.t()
  // Size-1 dims may have any stride.
  CHECK(agtrace::make_alias(x, {1, 3}, {99, 1}, 3)->is_contiguous());
  CHECK_FALSE(agtrace::make_alias(x, {2, 2}, {3, 1}, 1)->is_contiguous());  // x[:, 1:]
}

TEST_CASE("tensor: for_each_offset walks a view in row-major order", "[tensor][strides]") {
  SECTION("contiguous") {
    auto v = visits({2, 3}, {3, 1}, 0);
    REQUIRE(v.size() == 6);
    for (int64_t i = 0; i < 6; ++i) CHECK(v[i] == std::make_pair(i, i));
  }
  SECTION("transposed [2,3] -> sizes [3,2], strides [1,3]") {
    auto v = visits({3, 2}, {1, 3}, 0);
    std::vector<int64_t> offs;
    for (auto& p : v) offs.push_back(p.second);
    CHECK(offs == std::vector<int64_t>{0, 3, 1, 4, 2, 5});
    CHECK(v[5].first == 5);
  }
  SECTION("x[:, 1::2] of a [2,4]: offset 1, strides [4, 2]") {
    std::vector<int64_t> offs;
    for (auto& p : visits({2, 2}, {4, 2}, 1)) offs.push_back(p.second);
    CHECK(offs == std::vector<int64_t>{1, 3, 5, 7});
  }
  SECTION("a stride-0 (expanded) dim repeats offsets") {
    std::vector<int64_t> offs;
    for (auto& p : visits({2, 3}, {0, 1}, 2)) offs.push_back(p.second);
    CHECK(offs == std::vector<int64_t>{2, 3, 4, 2, 3, 4});
  }
  SECTION("transposed 3-D [2,3,4] -> transpose(0, 2)") {
    std::vector<int64_t> offs;
    for (auto& p : visits({4, 3, 2}, {1, 4, 12}, 0)) offs.push_back(p.second);
    REQUIRE(offs.size() == 24);
    CHECK(std::vector<int64_t>(offs.begin(), offs.begin() + 6) == std::vector<int64_t>{0, 12, 4, 16, 8, 20});
    CHECK(offs[6] == 1);
    CHECK(offs.back() == 23);
  }
  SECTION("a 0-d tensor visits its one element at the offset") {
    auto v = visits({}, {}, 4);
    REQUIRE(v.size() == 1);
    CHECK(v[0] == std::make_pair(int64_t{0}, int64_t{4}));
  }
  SECTION("an empty tensor visits nothing") { CHECK(visits({2, 0}, {0, 1}, 0).empty()); }
}

TEST_CASE("tensor: to_values and write_values go through strides", "[tensor][strides]") {
  Tensor x = iota({2, 3});
  Tensor xt = agtrace::make_alias(x, {3, 2}, {1, 3}, 0);
  CHECK(agtrace::to_values(xt) == std::vector<double>{0, 3, 1, 4, 2, 5});
  // write through x[:, 1] (sizes [2], stride 3, offset 1), rounding to float32
  Tensor col = agtrace::make_alias(x, {2}, {3}, 1);
  agtrace::write_values(col, {0.1, -7});
  CHECK(x->storage->get(1) == static_cast<double>(0.1f));
  CHECK(x->storage->get(4) == -7);
  CHECK(x->storage->get(0) == 0);
  CHECK(agtrace::item(col) == static_cast<double>(0.1f));
  CHECK(agtrace::item(agtrace::make_alias(x, {}, {}, 5)) == 5);
}

// ---------------------------------------------------------------- tensors and storages

TEST_CASE("tensor: empty_tensor and tensor_from_values", "[tensor]") {
  Tensor t = agtrace::empty_tensor({2, 3}, DType::Float32, false);
  CHECK(t->sizes == (Shape{2, 3}));
  CHECK(t->strides == (Shape{3, 1}));
  CHECK(t->offset == 0);
  REQUIRE(t->storage->holds_float());
  CHECK(std::vector<float>(t->storage->f32(), t->storage->f32() + 6) == std::vector<float>(6, 0.0f));
  CHECK(t->storage->held_bytes() == 24);  // float32 holds float
  CHECK(agtrace::empty_tensor({2, 3}, DType::Int64, false)->storage->held_bytes() == 48);
  CHECK(t->version->version == 0);
  CHECK(t->nbytes() == 24);
  CHECK(t->is_leaf());
  CHECK_FALSE(t->requires_grad());
  CHECK_FALSE(t->is_view());
  CHECK(agtrace::empty_tensor({2, 3}, DType::Float64, false)->nbytes() == 48);
  CHECK(agtrace::empty_tensor({2, 3}, DType::BFloat16, false)->nbytes() == 12);
  CHECK(agtrace::empty_tensor({2, 3}, DType::Bool, false)->nbytes() == 6);
  CHECK(agtrace::empty_tensor({}, DType::Int64, false)->nbytes() == 8);

  Tensor m = agtrace::empty_tensor({4, 4}, DType::Float32, true);
  CHECK(m->is_meta());
  CHECK(m->storage->held_elements() == 0);
  CHECK(m->storage->f32() == nullptr);
  CHECK(m->nbytes() == 64);
  CHECK(agtrace::to_values(m).empty());

  Tensor v = agtrace::tensor_from_values({3}, DType::Float32, {0.1, 1.0 / 3, 1e39});
  CHECK(v->storage->get(0) == 0.10000000149011612);
  CHECK(v->storage->get(1) == 0.3333333432674408);
  CHECK(std::isinf(v->storage->get(2)));
  Tensor s = agtrace::scalar_tensor(2.5, DType::Int64);
  CHECK(s->dim() == 0);
  CHECK(agtrace::item(s) == 2.0);
}

TEST_CASE("tensor: small storages keep their elements inside, larger ones on the heap", "[tensor]") {
  // 64 bytes: 16 float32 or 8 float64 elements inside the storage object, one more outside.
  for (auto [dtype, inside] : {std::pair{DType::Float32, int64_t{16}}, std::pair{DType::Float64, int64_t{8}}}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, inside, inside + 1, int64_t{1000}}) {
      INFO("dtype " << static_cast<int>(dtype) << ", " << n << " elements");
      Tensor zeros = agtrace::empty_tensor({n}, dtype, false);
      for (double v : agtrace::to_values(zeros)) CHECK(v == 0.0);  // zero-filled, inside or not
      std::vector<double> values(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = 0.5 * static_cast<double>(i) - 3.0;
      Tensor t = agtrace::tensor_from_values({n}, dtype, values);
      CHECK(agtrace::to_values(t) == values);
      const agtrace::Storage& s = *t->storage;
      const char* data = dtype == DType::Float32 ? reinterpret_cast<const char*>(s.f32())
                                                 : reinterpret_cast<const char*>(s.f64());
      const char* object = reinterpret_cast<const char*>(&s);
      const bool in_object = data >= object && data < object + sizeof(agtrace::Storage);
      CHECK(in_object == (n <= inside));
      CHECK(reinterpret_cast<uintptr_t>(data) % 16 == 0);  // as aligned as operator new's
    }
  }
}

TEST_CASE("tensor: aliases share storage and version counter - ids are creation order", "[tensor]") {
  Tensor x = iota({2, 3});
  Tensor a = agtrace::make_alias(x, {6}, {1}, 0);
  CHECK(a != x);
  CHECK(a->storage == x->storage);
  CHECK(a->version == x->version);
  CHECK(a->id > x->id);
  Tensor y = iota({2, 3});
  CHECK(y->storage->id > x->storage->id);
  CHECK(y->version != x->version);
}

TEST_CASE("tensor: version counter bump records the statement", "[tensor]") {
  agtrace::VersionCounter vc;
  const int saved = agtrace::run_position().statement;
  agtrace::run_position().statement = 12;
  vc.bump();
  agtrace::run_position().statement = saved;
  CHECK(vc.version == 1);
  CHECK(vc.last_bump_statement == 12);
  vc.bump();
  CHECK(vc.version == 2);
}

TEST_CASE("tensor: live tensor registry follows object lifetimes", "[tensor]") {
  auto live = [](const agtrace::TensorImpl* p) {
    const auto& r = agtrace::live_tensors();
    return std::find(r.begin(), r.end(), p) != r.end();
  };
  agtrace::TensorImpl* raw = nullptr;
  {
    Tensor t = iota({2});
    raw = t.get();
    CHECK(live(raw));
  }
  CHECK_FALSE(live(raw));
}

TEST_CASE("tensor: storage alloc and free reach the event sink", "[tensor][events]") {
  RecordingSink sink;
  const std::string saved_op = agtrace::run_position().op;
  agtrace::run_position().op = "test_alloc";
  int64_t sid = -1;
  {
    Tensor t = agtrace::empty_tensor({2, 3}, DType::Float32, false);
    sid = t->storage->id;
    auto allocs = sink.of(Event::Kind::Alloc);
    REQUIRE(allocs.size() == 1);
    CHECK(allocs[0].storage_id == sid);
    CHECK(allocs[0].bytes == 24);
    CHECK(allocs[0].what == "test_alloc");
    agtrace::run_position().op = saved_op;

    // An alias allocates nothing, and the storage outlives the first handle.
    Tensor alias = agtrace::make_alias(t, {6}, {1}, 0);
    CHECK(sink.of(Event::Kind::Alloc).size() == 1);
    t.reset();
    CHECK(sink.of(Event::Kind::Free).empty());
    alias.reset();
    auto frees = sink.of(Event::Kind::Free);
    REQUIRE(frees.size() == 1);
    CHECK(frees[0].storage_id == sid);
    CHECK(frees[0].bytes == 24);
  }
  agtrace::run_position().op = saved_op;
  // Meta storages are announced with their bytes too.
  { Tensor m = agtrace::empty_tensor({4}, DType::Float64, true); }
  auto allocs = sink.of(Event::Kind::Alloc);
  REQUIRE(allocs.size() == 2);
  CHECK(allocs[1].bytes == 32);
  CHECK(sink.of(Event::Kind::Free).size() == 2);
}

TEST_CASE("tensor: no sink, no crash", "[tensor][events]") {
  agtrace::EventSink* previous = agtrace::event_sink();
  agtrace::set_event_sink(nullptr);
  { Tensor t = agtrace::empty_tensor({3}, DType::Float32, false); }
  agtrace::set_event_sink(previous);
  SUCCEED();
}

// ---------------------------------------------------------------- dtypes

TEST_CASE("dtype: names, sizes, parse", "[tensor][dtype]") {
  CHECK(agtrace::dtype_name(DType::BFloat16) == "bfloat16");
  CHECK(agtrace::dtype_torch_name(DType::Float32) == "torch.float32");
  CHECK(agtrace::dtype_tensor_type(DType::Float32) == "FloatTensor");
  CHECK(agtrace::dtype_tensor_type(DType::Float64) == "DoubleTensor");
  CHECK(agtrace::dtype_tensor_type(DType::Float16) == "HalfTensor");
  CHECK(agtrace::dtype_tensor_type(DType::Int64) == "LongTensor");
  CHECK(agtrace::dtype_size(DType::Float16) == 2);
  CHECK(agtrace::dtype_size(DType::Int64) == 8);
  CHECK(agtrace::dtype_size(DType::Bool) == 1);
  for (DType d : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64, DType::Bool})
    CHECK(agtrace::parse_dtype(agtrace::dtype_name(d)) == d);
  CHECK_FALSE(agtrace::parse_dtype("float").has_value());
  CHECK(agtrace::is_floating(DType::BFloat16));
  CHECK_FALSE(agtrace::is_floating(DType::Int64));
}

TEST_CASE("dtype: round_to_dtype matches torch's .to(dtype) values", "[tensor][dtype]") {
  // torch.tensor(vals, dtype=float64).to(dt).to(float64).tolist(), torch 1.13.
  struct Row {
    double in, f32, bf16, f16;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const Row rows[] = {
      {0.1, 0.10000000149011612, 0.10009765625, 0.0999755859375},
      {1.0 / 3, 0.3333333432674408, 0.333984375, 0.333251953125},
      {3.14159265358979, 3.1415927410125732, 3.140625, 3.140625},
      {1e-8, 9.99999993922529e-09, 1.0011717677116394e-08, 0.0},
      {65504.0, 65504.0, 65536.0, 65504.0},
      {65519.0, 65519.0, 65536.0, 65504.0},
      {65520.0, 65520.0, 65536.0, inf},
      {1e5, 100000.0, 99840.0, inf},
      {6e-8, 5.99999978589949e-08, 6.007030606269836e-08, 5.960464477539063e-08},
      {2.9802322387695312e-08, 2.9802322387695312e-08, 2.9802322387695312e-08, 0.0},  // f16 tie -> even (0)
      {1.00390625, 1.00390625, 1.0, 1.00390625},                                      // bf16 tie -> even
      {1.01171875, 1.01171875, 1.015625, 1.01171875},                                 // bf16 tie -> even (up)
      {-2.5e-3, -0.0024999999441206455, -0.00250244140625, -0.0025005340576171875},
      {1e39, inf, inf, inf},
      {3.0000001, 3.0, 3.0, 3.0},
  };
  for (const Row& r : rows) {
    INFO("value " << r.in);
    CHECK(agtrace::round_to_dtype(r.in, DType::Float32) == r.f32);
    CHECK(agtrace::round_to_dtype(r.in, DType::BFloat16) == r.bf16);
    CHECK(agtrace::round_to_dtype(r.in, DType::Float16) == r.f16);
    CHECK(agtrace::round_to_dtype(r.in, DType::Float64) == r.in);
  }
  CHECK(agtrace::round_to_dtype(-2.7, DType::Int64) == -2.0);
  CHECK(agtrace::round_to_dtype(0.5, DType::Bool) == 1.0);
  CHECK(agtrace::round_to_dtype(0.0, DType::Bool) == 0.0);
  CHECK(std::isnan(agtrace::round_to_dtype(std::nan(""), DType::BFloat16)));
  CHECK(agtrace::round_to_dtype(-1e39, DType::Float16) == -inf);
}

TEST_CASE("tensor: an empty view at a non-zero offset of an empty storage reads and writes nothing",
          "[tensor]") {
  // torch.stack of [0, 3] tensors writes each input through such a view; the storage holds
  // no elements, so its data pointer is null and no offset may be applied to it (UBSan
  // reported it under fuzzing; the sanitizer build of this test catches a regression).
  for (DType d : {DType::Float32, DType::Float64}) {
    Tensor e = empty_tensor({2, 0, 3}, d, false);
    Tensor v = make_alias(e, {0, 3}, {3, 1}, 8);
    CHECK(to_values(v).empty());
    write_values(v, {});
    CHECK(v->numel() == 0);
  }
}
