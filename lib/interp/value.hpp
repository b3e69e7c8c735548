// Python values a scenario statement computes with.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/node.hpp"
#include "tensor/tensor.hpp"

namespace agtrace {

struct Value {
  enum class Kind { None, Bool, Int, Float, Str, Tensor, Node, Tuple, List, DType, Size, Slice, Ellipsis, Module, Method };
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  bool unsigned_int = false;  // an int PyTorch stores as uint64 (reads back as 2**64 + v)
  double f = 0.0;
  std::string s;          // Str; Module: "torch", "F", "torch.autograd", "torch.mm"; Method: its name
  Tensor t;
  Shared<autograd::Node> node;
  std::vector<Value> items;  // Tuple / List; Slice: start, stop, step (None when omitted); Method: {receiver}
  DType dtype = DType::Float32;
  Shape size;             // torch.Size

  // Copies leave alone the members empty on both sides: a tensor bound to a name is copied
  // for every binding and read, and the string and vectors it does not use were a fifth
  // of the copy (issue #6). The result is the same as a member-wise copy.
  Value() = default;
  Value(const Value& o)
      : kind(o.kind), b(o.b), i(o.i), unsigned_int(o.unsigned_int), f(o.f), t(o.t), node(o.node), dtype(o.dtype) {
    if (!o.s.empty()) s = o.s;
    if (!o.items.empty()) items = o.items;
    if (!o.size.empty()) size = o.size;
  }
  Value& operator=(const Value& o) {
    if (this == &o) return *this;
    kind = o.kind;
    b = o.b;
    i = o.i;
    unsigned_int = o.unsigned_int;
    f = o.f;
    if (!s.empty() || !o.s.empty()) s = o.s;
    t = o.t;
    node = o.node;
    if (!items.empty() || !o.items.empty()) items = o.items;
    dtype = o.dtype;
    if (!size.empty() || !o.size.empty()) size = o.size;
    return *this;
  }
  Value(Value&&) noexcept = default;
  Value& operator=(Value&&) noexcept = default;
  ~Value() = default;

  static Value none() { return {}; }
  static Value boolean(bool v) { Value x; x.kind = Kind::Bool; x.b = v; return x; }
  static Value integer(int64_t v) { Value x; x.kind = Kind::Int; x.i = v; return x; }
  static Value real(double v) { Value x; x.kind = Kind::Float; x.f = v; return x; }
  static Value str(std::string v) { Value x; x.kind = Kind::Str; x.s = std::move(v); return x; }
  static Value tensor(Tensor v) { Value x; x.kind = Kind::Tensor; x.t = std::move(v); return x; }
  static Value node_of(Shared<autograd::Node> n) {
    if (!n) return none();
    Value x; x.kind = Kind::Node; x.node = std::move(n); return x;
  }
  static Value tuple(std::vector<Value> v) { Value x; x.kind = Kind::Tuple; x.items = std::move(v); return x; }
  // A torch.return_types structseq (max, min, ...): a tuple of (values, indices), indexable
  // and unpackable as one, whose type name `s` ("torch.return_types.max") also marks that
  // its items are the attributes .values and .indices.
  static Value return_type(std::string type, Value values, Value indices) {
    Value x = tuple({std::move(values), std::move(indices)});
    x.s = "torch.return_types." + std::move(type);
    return x;
  }
  static Value list(std::vector<Value> v) { Value x; x.kind = Kind::List; x.items = std::move(v); return x; }
  static Value dtype_of(DType d) { Value x; x.kind = Kind::DType; x.dtype = d; return x; }
  static Value torch_size(Shape s) { Value x; x.kind = Kind::Size; x.size = std::move(s); return x; }
  static Value module(std::string name) { Value x; x.kind = Kind::Module; x.s = std::move(name); return x; }

  static Value method(Value receiver, std::string name) {
    Value x; x.kind = Kind::Method; x.s = std::move(name); x.items.push_back(std::move(receiver)); return x;
  }

  bool is_number() const { return kind == Kind::Bool || kind == Kind::Int || kind == Kind::Float; }
  double number() const { return kind == Kind::Float ? f : kind == Kind::Int ? static_cast<double>(i) : (b ? 1.0 : 0.0); }
};

// Python's type name of a value, for TypeError messages ("int", "Tensor", "NoneType").
std::string type_name(const Value& v);

// A torch.return_types field (`values`, `indices`) of `v`; null when v is not such a
// structseq or has no field of that name.
const Value* return_type_field(const Value& v, const std::string& name);

// Python's printed form (print(v)): Python's own rules for bool/int/str/None/tuples/
// torch.Size/dtypes; tensors and nodes in agtrace's documented form (see README).
std::string print_form(const Value& v);
// repr() form, used inside containers (strings get quotes).
std::string repr_form(const Value& v);

// Shortest decimal that round-trips, as Python's repr(float).
std::string float_repr(double v);
// The double nearest to the shortest decimal that reads back as `v` in dtype d, so a
// float32 0.800000011920929 is reported as 0.8 (the value PyTorch prints).
double display_value(double v, DType d);

}  // namespace agtrace
