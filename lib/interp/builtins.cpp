#include "interp/builtins.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "errors.hpp"

namespace agtrace::interp {

namespace {

[[noreturn]] void type_error(const std::string& m) { throw ScenarioError("type_error", m); }

std::string strip_lower(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  std::string out = s.substr(b, e - b);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// float(str): Python accepts a decimal literal or, in any case, [+-]inf, [+-]infinity and
// [+-]nan, around optional white space; anything else is a ValueError.
double float_of_string(const std::string& text) {
  std::string s = strip_lower(text);
  double sign = 1.0;
  std::string body = s;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    sign = body[0] == '-' ? -1.0 : 1.0;
    body = body.substr(1);
  }
  if (body == "inf" || body == "infinity") return sign * std::numeric_limits<double>::infinity();
  if (body == "nan") return std::numeric_limits<double>::quiet_NaN();
  const bool plain = !s.empty() && s.find_first_not_of("0123456789+-.e_") == std::string::npos;
  if (plain && s.find('_') == std::string::npos) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(s.c_str(), &end);
    if (end && *end == '\0') return v;
  }
  type_error("could not convert string to float: '" + text + "'");
}

double number_of(const Value& v, const char* fn) {
  if (v.is_number()) return v.number();
  if (v.kind == Value::Kind::Tensor) {
    if (v.t->numel() != 1) type_error("only one element tensors can be converted to Python scalars");
    if (v.t->is_meta()) throw ScenarioError("unsupported", std::string(fn) + "() of a meta tensor has no value");
    return host_values(v.t)[0];
  }
  type_error(std::string(fn) + "() argument must be a string or a number, not '" + type_name(v) + "'");
}

}  // namespace

bool is_conversion_builtin(const std::string& name) { return name == "float" || name == "int" || name == "bool"; }

Value call_conversion_builtin(const std::string& name, const std::vector<Value>& args) {
  if (args.size() > 1) type_error(name + "() takes at most 1 argument (" + std::to_string(args.size()) + " given)");
  if (name == "bool") {
    if (args.empty()) return Value::boolean(false);
    const Value& v = args[0];
    if (v.kind == Value::Kind::Str) return Value::boolean(!v.s.empty());
    if (v.kind == Value::Kind::Tensor && v.t->numel() != 1)
      type_error("Boolean value of Tensor with more than one value is ambiguous");
    return Value::boolean(number_of(v, "bool") != 0.0);
  }
  if (args.empty()) return name == "float" ? Value::real(0.0) : Value::integer(0);
  const Value& v = args[0];
  if (name == "float") return Value::real(v.kind == Value::Kind::Str ? float_of_string(v.s) : number_of(v, "float"));
  // int(): a string is a base-10 integer literal; a float is truncated toward zero.
  if (v.kind == Value::Kind::Str) {
    const std::string s = strip_lower(v.s);
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || !end || *end != '\0' || errno == ERANGE)
      type_error("invalid literal for int() with base 10: '" + v.s + "'");
    return Value::integer(i);
  }
  if (v.kind == Value::Kind::Int || v.kind == Value::Kind::Bool) return Value::integer(static_cast<int64_t>(v.number()));
  const double d = number_of(v, "int");
  if (std::isnan(d)) type_error("cannot convert float NaN to integer");
  if (std::isinf(d)) type_error("cannot convert float infinity to integer");
  if (d >= 9223372036854775808.0 || d < -9223372036854775808.0)
    throw ScenarioError("unsupported", "int() of a value beyond int64 is not supported");
  if (v.kind == Value::Kind::Tensor && !is_floating(v.t->dtype())) return Value::integer(static_cast<int64_t>(d));
  return Value::integer(static_cast<int64_t>(std::trunc(d)));
}

}  // namespace agtrace::interp
