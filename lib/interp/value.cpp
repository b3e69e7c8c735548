#include "interp/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace agtrace {

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::Str: return "str";
    case Value::Kind::Tensor: return "Tensor";
    case Value::Kind::Node: return v.node->name;
    case Value::Kind::Tuple: return v.s.empty() ? "tuple" : v.s;
    case Value::Kind::List: return "list";
    case Value::Kind::DType: return "torch.dtype";
    case Value::Kind::Size: return "torch.Size";
    case Value::Kind::Slice: return "slice";
    case Value::Kind::Ellipsis: return "ellipsis";
    case Value::Kind::Module: return "module";
    case Value::Kind::Method: return "method";
  }
  return "object";
}

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  // Python writes exponents with at least two digits and integral floats with ".0".
  auto e = s.find('e');
  if (e != std::string::npos) {
    std::string mant = s.substr(0, e), ex = s.substr(e + 1);
    char sign = ex[0] == '-' ? '-' : '+';
    if (ex[0] == '-' || ex[0] == '+') ex = ex.substr(1);
    while (ex.size() > 1 && ex[0] == '0') ex.erase(ex.begin());
    if (ex.size() < 2) ex = "0" + ex;
    // Python uses positional notation for exponents in [-4, 16).
    int exponent = std::atoi((sign == '-' ? "-" + ex : ex).c_str());
    if (exponent >= -4 && exponent < 16) {
      std::snprintf(buf, sizeof buf, "%.17f", v);
      std::string fixed = buf;
      // Trim to the shortest that round-trips.
      for (size_t keep = fixed.find('.') + 2; keep <= fixed.size(); ++keep) {
        std::string cand = fixed.substr(0, keep);
        if (std::strtod(cand.c_str(), nullptr) == v) return cand;
      }
      return fixed;
    }
    return mant + "e" + sign + ex;
  }
  if (s.find('.') == std::string::npos) s += ".0";
  return s;
}

namespace {

// Shortest decimal that reads back as the same value of the tensor's dtype.
std::string element_repr(double v, DType d) {
  if (d == DType::Bool) return v != 0.0 ? "1" : "0";
  if (d == DType::Int64) return std::to_string(static_cast<int64_t>(v));
  if (d == DType::Float64 || std::isnan(v) || std::isinf(v)) return float_repr(v);
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (round_to_dtype(std::strtod(buf, nullptr), d) == v) break;
  }
  return float_repr(std::strtod(buf, nullptr));
}

}  // namespace

// The value element_repr's text reads back as: the shortest "%.*g" that rounds back to v in
// dtype d. For float32, std::to_chars gives the shortest digit count that can round-trip
// first, so most values take one formatting instead of up to nine (20,000,000 float32
// leaf values under --values took 160 s, measured); where "%.*g" at that count does not
// round-trip (another string of that length does), the search goes on as element_repr's.
double display_value(double v, DType d) {
  if (std::isnan(v)) return std::numeric_limits<double>::quiet_NaN();  // read back from "nan"
  if (d == DType::Bool || d == DType::Int64 || d == DType::Float64 || std::isinf(v)) return v;
  int first = 1;
  if (d == DType::Float32) {
    char shortest[64];
    // Scientific: the shortest mantissa (fixed notation writes a large integer's every digit).
    const auto res = std::to_chars(shortest, shortest + sizeof shortest, static_cast<float>(v),
                                   std::chars_format::scientific);
    int digits = 0;
    for (const char* c = shortest; c != res.ptr && *c != 'e'; ++c) digits += *c >= '0' && *c <= '9';
    first = std::max(1, digits);
  }
  char buf[64];
  for (int prec = first; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    const double back = std::strtod(buf, nullptr);
    if (round_to_dtype(back, d) == v) return back;
  }
  return std::strtod(buf, nullptr);
}

namespace {

// PyTorch's print options (torch.set_printoptions defaults): a tensor of more than 1000
// elements is summarised, each dimension longer than 6 showing its first and last 3 entries
// around "...", so a printed line stays short whatever the tensor's size.
constexpr int64_t kPrintThreshold = 1000;
constexpr int64_t kPrintEdgeItems = 3;

// Row-major element `offset` onwards of dimension `dim`, `stride` elements per entry of it.
void nested(std::string& out, const std::vector<double>& vals, const Shape& shape, size_t dim, int64_t offset,
            int64_t stride_product, DType d, bool summarize) {
  if (dim == shape.size()) {
    const double v = vals[static_cast<size_t>(offset)];
    out += d == DType::Bool ? (v != 0.0 ? "True" : "False") : element_repr(v, d);
    return;
  }
  const int64_t size = shape[dim], stride = size > 0 ? stride_product / size : 0;
  const bool elide = summarize && size > 2 * kPrintEdgeItems;
  out += "[";
  for (int64_t i = 0; i < size; ++i) {
    if (elide && i == kPrintEdgeItems) {
      out += ", ...";
      i = size - kPrintEdgeItems - 1;
      continue;
    }
    if (i) out += ", ";
    nested(out, vals, shape, dim + 1, offset + i * stride, stride, d, summarize);
  }
  out += "]";
}

std::string tensor_repr(const Tensor& t) {
  std::string out = "tensor(";
  if (t->is_meta()) {
    out += "..., device='meta', size=(";
    for (size_t i = 0; i < t->sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(t->sizes[i]);
    out += t->sizes.size() == 1 ? ",)" : ")";
  } else {
    std::vector<double> vals = host_values(t);  // printing a cuda tensor copies it over
    const int64_t numel = static_cast<int64_t>(vals.size());
    nested(out, vals, t->sizes, 0, 0, numel, t->dtype(), numel > kPrintThreshold);
    if (t->storage->on_device()) out += ", device='cuda:0'";
  }
  if (t->dtype() != DType::Float32 && t->dtype() != DType::Int64 && t->dtype() != DType::Bool)
    out += ", dtype=" + dtype_torch_name(t->dtype());
  if (t->grad_fn)
    out += ", grad_fn=<" + t->grad_fn->name + ">";
  else if (t->requires_grad())
    out += ", requires_grad=True";
  return out + ")";
}

std::string sequence(const Value& v, const char* open, const char* close) {
  std::string out = open;
  for (size_t i = 0; i < v.items.size(); ++i) {
    if (i) out += ", ";
    out += repr_form(v.items[i]);
  }
  if (v.kind == Value::Kind::Tuple && v.items.size() == 1) out += ",";
  return out + close;
}

}  // namespace

std::string repr_form(const Value& v) {
  switch (v.kind) {
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.b ? "True" : "False";
    case Value::Kind::Int: return v.unsigned_int ? std::to_string(static_cast<uint64_t>(v.i)) : std::to_string(v.i);
    case Value::Kind::Float: return float_repr(v.f);
    case Value::Kind::Str: {
      std::string out = "'";
      for (char c : v.s) {
        if (c == '\'' || c == '\\') out += '\\';
        if (c == '\n') { out += "\\n"; continue; }
        out += c;
      }
      return out + "'";
    }
    case Value::Kind::Tensor: return tensor_repr(v.t);
    // PyTorch prints "<MulBackward0 object at 0x7f...>"; an address is not deterministic,
    // so agtrace prints the node's creation id instead.
    case Value::Kind::Node: return "<" + v.node->name + " object #" + std::to_string(v.node->id) + ">";
    case Value::Kind::Tuple:
      // A structseq prints one field a line (measured: "torch.return_types.max(\nvalues=tensor(...),\nindices=...)").
      if (!v.s.empty()) return v.s + "(\nvalues=" + repr_form(v.items[0]) + ",\nindices=" + repr_form(v.items[1]) + ")";
      return sequence(v, "(", ")");
    case Value::Kind::List: return sequence(v, "[", "]");
    case Value::Kind::DType: return dtype_torch_name(v.dtype);
    case Value::Kind::Size: {
      std::string out = "torch.Size([";
      for (size_t i = 0; i < v.size.size(); ++i) out += (i ? ", " : "") + std::to_string(v.size[i]);
      return out + "])";
    }
    case Value::Kind::Slice: return "slice(" + repr_form(v.items[0]) + ", " + repr_form(v.items[1]) + ", " + repr_form(v.items[2]) + ")";
    case Value::Kind::Ellipsis: return "Ellipsis";
    case Value::Kind::Module: return "<" + v.s + ">";
    case Value::Kind::Method: return "<bound method " + v.s + ">";
  }
  return "?";
}

const Value* return_type_field(const Value& v, const std::string& name) {
  if (v.kind != Value::Kind::Tuple || v.s.empty() || v.items.size() != 2) return nullptr;
  if (name == "values") return &v.items[0];
  if (name == "indices") return &v.items[1];
  return nullptr;
}

std::string print_form(const Value& v) { return v.kind == Value::Kind::Str ? v.s : repr_form(v); }

}  // namespace agtrace
