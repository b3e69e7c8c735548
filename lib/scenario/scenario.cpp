// Loading and validating a scenario file (spec: shared/spec/scenario-format.md).
//
// The whole file is checked before anything runs, and every problem is reported as an
// InputError naming the file and the JSON pointer of the exact offending value, so a user
// can find the mistake without guessing. Kinds used:
//   "io"     the file cannot be read
//   "limit"  the file is larger than 16 MiB, JSON nests deeper than 512 levels, blocks nest
//            deeper than 64, or a shape has more than 64 dimensions (bounds that keep
//            loading cheap and its recursion shallow); the program has more than 100,000
//            statements, a statement longer than 64 KiB, or repeat blocks that would run
//            more than 10,000,000 statements (bounds that keep a run finite and cheap)
//   "json"   the text is not JSON; the message carries line and column
//   "schema" everything else: unknown or missing fields, wrong types, bad values, duplicate
//            keys
//
// Parsing uses a SAX handler of our own instead of ordered_json::parse because
//  - object keys must keep file order (tensors are created in the order written), yet
//    ordered_json's own insertion looks every key up linearly, which is quadratic on a large
//    object; we detect duplicates with a hash set and append directly;
//  - duplicate keys must be an error (plain parsing silently keeps one of them), and the
//    handler knows the path of the duplicate, so it can name it with a JSON pointer.
#include "scenario/scenario.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "errors.hpp"
#include "util/atomic_file.hpp"

namespace agtrace {
namespace {

using OJ = nlohmann::ordered_json;

constexpr std::size_t kMaxFileBytes = std::size_t(16) << 20;  // 16 MiB
constexpr int kMaxBlockDepth = 64;
constexpr std::size_t kMaxRank = 64;
constexpr int64_t kMaxDim = int64_t(1) << 40;
// A valid scenario nests JSON at most about 2 * kMaxBlockDepth + 4 levels (program blocks)
// or kMaxRank + 4 (nested values); beyond this bound the input cannot be valid, and
// stopping early keeps a file of brackets from costing hundreds of megabytes.
constexpr std::size_t kMaxJsonDepth = 512;
// Program size: bounds that keep parsing and running a hostile program cheap. A statement
// count above kMaxStatements, a statement longer than kMaxStatementBytes, or a program whose
// repeat blocks would execute more than kMaxExecutedStatements statements is a "limit" error.
constexpr int kMaxStatements = 100000;
constexpr std::size_t kMaxStatementBytes = std::size_t(64) << 10;  // 64 KiB
constexpr int64_t kMaxExecutedStatements = 10000000;

// ---------------------------------------------------------------------------------------
// Small helpers for messages and pointers

// RFC 6901: '~' and '/' inside a reference token are escaped.
std::string escape_token(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string child(const std::string& ptr, const std::string& key) {
  return ptr + "/" + escape_token(key);
}
std::string child(const std::string& ptr, std::size_t index) {
  return ptr + "/" + std::to_string(index);
}

// A user-supplied string quoted for a message; very long ones are cut so that a hostile
// key cannot make a message of megabytes.
std::string quote(const std::string& s) {
  constexpr std::size_t kMax = 60;
  if (s.size() <= kMax) return "'" + s + "'";
  return "'" + s.substr(0, kMax) + "...'";
}

std::string type_name(const OJ& j) {
  switch (j.type()) {
    case OJ::value_t::null: return "null";
    case OJ::value_t::boolean: return "a boolean";
    case OJ::value_t::number_integer:
    case OJ::value_t::number_unsigned: return "an integer";
    case OJ::value_t::number_float: return "a number";
    case OJ::value_t::string: return "a string";
    case OJ::value_t::array: return "a list";
    case OJ::value_t::object: return "an object";
    default: return "a value of another kind";
  }
}

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// Optimal string alignment distance: Levenshtein plus adjacent transposition, so that the
// common typo "requires_gard" is one edit away from "requires_grad".
std::size_t edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

// "; did you mean 'x'?" when some candidate is within two edits, else "".
std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  std::size_t best = 3;
  const std::string* pick = nullptr;
  for (const auto& c : candidates) {
    // A length difference above 2 already means a distance above 2; skipping those keeps
    // a huge unknown key from costing a huge table.
    const std::size_t diff = word.size() > c.size() ? word.size() - c.size() : c.size() - word.size();
    if (diff > 2) continue;
    const std::size_t d = edit_distance(word, c);
    if (d < best) {
      best = d;
      pick = &c;
    }
  }
  return pick ? "; did you mean '" + *pick + "'?" : "";
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

[[noreturn]] void fail(const std::string& kind, const std::string& pointer, const std::string& detail) {
  InputError e(kind, detail);
  e.json_pointer = pointer;
  throw e;
}

// ---------------------------------------------------------------------------------------
// Names

const std::vector<std::string>& python_keywords() {
  static const std::vector<std::string> k = {
      "False", "None",   "True",    "and",      "as",       "assert", "async",
      "await", "break",  "class",   "continue", "def",      "del",    "elif",
      "else",  "except", "finally", "for",      "from",     "global", "if",
      "import", "in",    "is",      "lambda",   "nonlocal", "not",    "or",
      "pass",  "raise",  "return",  "try",      "while",    "with",   "yield"};
  return k;
}

// Names the interpreter already binds; a tensor with one of these names would shadow them.
const std::vector<std::string>& interpreter_builtins() {
  static const std::vector<std::string> k = {"torch", "F", "print", "shares_storage"};
  return k;
}

// Why `name` cannot name a tensor, or nullopt when it can. Identifiers are ASCII only:
// Python allows more, but reports and golden file names are simpler this way.
std::optional<std::string> name_problem(const std::string& name) {
  if (name.empty()) return "a name must not be empty";
  auto is_start = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  auto is_part = [&](char c) { return is_start(c) || (c >= '0' && c <= '9'); };
  if (!is_start(name[0]) || !std::all_of(name.begin(), name.end(), is_part))
    return quote(name) + " is not a Python identifier (ASCII letters, digits and '_', not starting with a digit)";
  if (contains(python_keywords(), name)) return quote(name) + " is a Python keyword";
  if (contains(interpreter_builtins(), name))
    return quote(name) + " is already defined by the interpreter (torch, F, print, shares_storage)";
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------
// SAX handler: builds an ordered_json, rejects duplicate keys with their pointer, and turns
// parse errors into InputError("json") with line and column computed from the text.

class Builder {
 public:
  using number_integer_t = OJ::number_integer_t;
  using number_unsigned_t = OJ::number_unsigned_t;
  using number_float_t = OJ::number_float_t;
  using string_t = OJ::string_t;
  using binary_t = OJ::binary_t;

  explicit Builder(const std::string& text) : text_(text) {}

  OJ take_root() { return std::move(root_); }

  bool null() { return put(OJ(nullptr)); }
  bool boolean(bool v) { return put(OJ(v)); }
  bool number_integer(number_integer_t v) { return put(OJ(v)); }
  bool number_unsigned(number_unsigned_t v) { return put(OJ(v)); }
  bool number_float(number_float_t v, const string_t&) { return put(OJ(v)); }
  bool string(string_t& v) { return put(OJ(std::move(v))); }
  bool binary(binary_t& v) { return put(OJ::binary(std::move(v))); }  // never for JSON text

  bool start_object(std::size_t) {
    check_depth();
    frames_.push_back(Frame{OJ::object(), false, {}, {}});
    return true;
  }
  bool key(string_t& k) {
    Frame& f = frames_.back();
    if (!f.keys.insert(k).second) {
      std::string pointer = path_to_top() + "/" + escape_token(k);
      // The tensors object is where a duplicate most likely means a real mistake (two
      // leaves with one name), so it gets its own wording.
      bool in_tensors = frames_.size() == 2 && !frames_[0].array && frames_[0].key == "tensors";
      fail("schema", pointer,
           in_tensors ? "duplicate tensor name " + quote(k) : "duplicate key " + quote(k));
    }
    f.key = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) {
    check_depth();
    frames_.push_back(Frame{OJ::array(), true, {}, {}});
    return true;
  }
  bool end_array() { return close(); }

  template <class Exception>
  bool parse_error(std::size_t position, const std::string&, const Exception& ex) {
    // `position` counts the characters read, so the offending character is the last one
    // read: text_[position - 1]. Columns count UTF-8 characters, not bytes.
    std::size_t upto = std::min(position > 0 ? position - 1 : 0, text_.size());
    int line = 1;
    std::size_t line_start = 0;
    for (std::size_t i = 0; i < upto; ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    std::size_t column = 1;
    for (std::size_t i = line_start; i < upto; ++i)
      if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) ++column;
    // nlohmann's message is "[json.exception.parse_error.101] parse error at line L,
    // column C: what"; keep only "what", since we state the location ourselves.
    // Other errors reported here (a number too large, 1e400) carry only the
    // "[json.exception...] " prefix.
    std::string what = ex.what();
    std::size_t p = what.find("parse error");
    if (p != std::string::npos) {
      std::size_t c = what.find(": ", p);
      if (c != std::string::npos) what = what.substr(c + 2);
    } else if (!what.empty() && what[0] == '[') {
      std::size_t c = what.find("] ");
      if (c != std::string::npos) what = what.substr(c + 2);
    }
    fail("json", "",
         "malformed JSON at line " + std::to_string(line) + ", column " + std::to_string(column) +
             ": " + what);
  }

 private:
  struct Frame {
    OJ value;
    bool array;
    std::string key;                      // object: the key whose value is being read
    std::unordered_set<std::string> keys;  // object: keys seen so far
  };

  void check_depth() const {
    if (frames_.size() >= kMaxJsonDepth)
      fail("limit", path_to_top(), "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }

  // Pointer of the container on top of the stack.
  std::string path_to_top() const {
    std::string out;
    for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      out += "/";
      out += f.array ? std::to_string(f.value.size()) : escape_token(f.key);
    }
    return out;
  }

  bool put(OJ v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return true;
    }
    Frame& f = frames_.back();
    if (f.array) {
      f.value.get_ref<OJ::array_t&>().push_back(std::move(v));
    } else {
      // Append to ordered_map's underlying vector: the key is known to be new, so the
      // linear lookup that ordered_map's own insertion does would only cost time.
      auto& obj = f.value.get_ref<OJ::object_t&>();
      static_cast<OJ::object_t::Container&>(obj).emplace_back(f.key, std::move(v));
    }
    return true;
  }

  bool close() {
    OJ v = std::move(frames_.back().value);
    frames_.pop_back();
    return put(std::move(v));
  }

  const std::string& text_;
  std::vector<Frame> frames_;
  OJ root_;
};

// ---------------------------------------------------------------------------------------
// Typed access with errors

void check_fields(const OJ& obj, const std::string& ptr, const std::vector<std::string>& known) {
  for (const auto& [k, v] : obj.items()) {
    (void)v;
    if (!contains(known, k)) {
      std::string s = suggestion(k, known);
      fail("schema", child(ptr, k),
           "unknown field " + quote(k) + (s.empty() ? " (known fields: " + join(known) + ")" : s));
    }
  }
}

const OJ* find_field(const OJ& obj, const std::string& key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

void expect_type(bool ok, const OJ& j, const std::string& ptr, const std::string& wanted) {
  if (!ok) fail("schema", ptr, "expected " + wanted + ", found " + type_name(j));
}

const std::string& get_string(const OJ& j, const std::string& ptr) {
  expect_type(j.is_string(), j, ptr, "a string");
  return j.get_ref<const std::string&>();
}

bool get_bool(const OJ& j, const std::string& ptr) {
  expect_type(j.is_boolean(), j, ptr, "a boolean (true or false)");
  return j.get<bool>();
}

// A JSON integer (not 2.0) that fits int64.
int64_t get_int(const OJ& j, const std::string& ptr, const std::string& wanted = "an integer") {
  if (j.is_number_unsigned()) {
    if (j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("schema", ptr, "integer out of range");
    return static_cast<int64_t>(j.get<uint64_t>());
  }
  if (j.is_number_integer()) return j.get<int64_t>();
  fail("schema", ptr, "expected " + wanted + ", found " + type_name(j));
}

int64_t get_nonneg_int(const OJ& j, const std::string& ptr) {
  int64_t v = get_int(j, ptr, "a non-negative integer");
  if (v < 0) fail("schema", ptr, "expected a non-negative integer, found " + std::to_string(v));
  return v;
}

double get_finite(const OJ& j, const std::string& ptr) {
  expect_type(j.is_number(), j, ptr, "a number");
  double v = j.get<double>();
  if (!std::isfinite(v)) fail("schema", ptr, "number out of range");
  return v;
}

const OJ& get_list(const OJ& j, const std::string& ptr, const std::string& wanted = "a list") {
  expect_type(j.is_array(), j, ptr, wanted);
  return j;
}

const OJ& get_object(const OJ& j, const std::string& ptr) {
  expect_type(j.is_object(), j, ptr, "an object");
  return j;
}

constexpr std::size_t kNoIndex = static_cast<std::size_t>(-1);

// One element value of a tensor of dtype `d` (in "values" or "full"): `j` is at `parent`, or
// at its element `index`, whose pointer is only built for an error message (building one per
// element was most of loading a scenario with an input of a few thousand values).
double element_value(const OJ& j, const std::string& parent, DType d, std::size_t index = kNoIndex) {
  auto ptr = [&] { return index == kNoIndex ? parent : child(parent, index); };
  if (j.is_boolean()) {
    if (d != DType::Bool)
      fail("schema", ptr(), "expected a number (true/false only for bool tensors), found a boolean");
    return j.get<bool>() ? 1.0 : 0.0;
  }
  if (!j.is_number())
    fail("schema", ptr(),
         std::string("expected a number") + (d == DType::Bool ? " or a boolean" : "") + ", found " +
             type_name(j));
  if (d == DType::Int64) {
    if (j.is_number_unsigned() &&
        j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("schema", ptr(), "value out of range for int64");
    if (j.is_number_float()) {
      double v = j.get<double>();
      if (!std::isfinite(v) || std::trunc(v) != v)
        fail("schema", ptr(), "int64 values must be integral, found " + j.dump());
      // 2^63 itself is out of range; every double below it in magnitude fits.
      if (std::fabs(v) >= 9223372036854775808.0 && v != -9223372036854775808.0)
        fail("schema", ptr(), "value out of range for int64");
      return v;
    }
    // int64 elements are held as doubles (tensor/dtype.hpp): beyond 2**53 a value would be
    // rounded, so it is refused rather than changed.
    constexpr int64_t kExact = int64_t{1} << 53;
    const bool exact = j.is_number_unsigned() ? j.get<uint64_t>() <= static_cast<uint64_t>(kExact)
                                              : j.get<int64_t>() <= kExact && j.get<int64_t>() >= -kExact;
    if (!exact)
      fail("limit", ptr(), "int64 values beyond 2**53 are not supported (agtrace holds int64 elements as doubles), found " +
                             j.dump());
    return j.get<double>();
  }
  const double v = j.get<double>();  // a number, checked above
  if (!std::isfinite(v)) fail("schema", ptr(), "number out of range");
  return v;
}

// ---------------------------------------------------------------------------------------
// The loader

class Loader {
 public:
  explicit Loader(Scenario& s) : s_(s) {}

  void load(const OJ& root) {
    get_object(root, "");
    check_fields(root, "", {"format", "name", "description", "device", "dtype", "seed", "tensors",
                            "program", "expect"});

    if (const OJ* f = find_field(root, "format")) {
      int64_t v = get_int(*f, "/format");
      if (v != 1)
        fail("schema", "/format",
             "unsupported format version " + std::to_string(v) + " (this agtrace reads format 1)");
      s_.format = 1;
    }

    const OJ* name = find_field(root, "name");
    if (!name) fail("schema", "", "missing required field 'name'");
    s_.name = get_string(*name, "/name");
    auto name_ok = [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '.' || c == '-';
    };
    if (s_.name.empty() || !std::all_of(s_.name.begin(), s_.name.end(), name_ok))
      fail("schema", "/name",
           "a scenario name uses only letters, digits, '_', '.' and '-' (and is not empty)");

    if (const OJ* d = find_field(root, "description")) s_.description = get_string(*d, "/description");

    if (const OJ* d = find_field(root, "device")) {
      const std::string& v = get_string(*d, "/device");
      static const std::vector<std::string> devices = {"cpu", "cuda", "meta"};
      if (!contains(devices, v))
        fail("schema", "/device", "unknown device " + quote(v) + " (valid: cpu, cuda, meta)");
      s_.device = v;
    }

    if (const OJ* d = find_field(root, "dtype")) s_.dtype = parse_dtype_at(*d, "/dtype");

    if (const OJ* d = find_field(root, "seed")) {
      if (d->is_number_unsigned())
        s_.seed = d->get<uint64_t>();
      else if (d->is_number_integer())
        fail("schema", "/seed", "expected a non-negative integer, found " + d->dump());
      else
        fail("schema", "/seed", "expected a non-negative integer, found " + type_name(*d));
    }

    if (const OJ* t = find_field(root, "tensors")) load_tensors(*t);

    const OJ* program = find_field(root, "program");
    if (!program) fail("schema", "", "missing required field 'program'");
    get_list(*program, "/program", "a list of statements");
    load_items(*program, "/program", 0, s_.program);
    s_.statement_count = next_index_;
    executed_statements(s_.program, 1);
    // Only now are all the vectors final, so pointers into them stay valid.
    s_.statements.clear();
    s_.statements.reserve(static_cast<std::size_t>(next_index_));
    collect_statements(s_.program);

    if (const OJ* e = find_field(root, "expect")) load_expect(*e);
  }

 private:
  DType parse_dtype_at(const OJ& j, const std::string& ptr) {
    const std::string& v = get_string(j, ptr);
    if (auto d = parse_dtype(v)) return *d;
    std::vector<std::string> names;
    for (DType d : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64,
                    DType::Bool})
      names.push_back(dtype_name(d));
    std::string s = suggestion(v, names);
    fail("schema", ptr, "unknown dtype " + quote(v) + s + " (valid: " + join(names) + ")");
  }

  // ---- tensors ----

  void load_tensors(const OJ& tensors) {
    get_object(tensors, "/tensors");
    for (const auto& [name, spec] : tensors.items()) {
      const std::string ptr = child("/tensors", name);
      if (auto problem = name_problem(name)) fail("schema", ptr, "bad tensor name: " + *problem);
      s_.tensors.push_back(load_leaf(name, spec, ptr));
    }
  }

  LeafSpec load_leaf(const std::string& name, const OJ& spec, const std::string& ptr) {
    LeafSpec leaf;
    leaf.name = name;
    leaf.pointer = ptr;
    get_object(spec, ptr);
    check_fields(spec, ptr, {"shape", "dtype", "requires_grad", "init"});

    leaf.dtype = s_.dtype;
    if (const OJ* d = find_field(spec, "dtype")) leaf.dtype = parse_dtype_at(*d, child(ptr, "dtype"));

    const OJ* shape = find_field(spec, "shape");
    if (!shape) fail("schema", ptr, "missing required field 'shape'");
    const std::string sptr = child(ptr, "shape");
    get_list(*shape, sptr, "a list of non-negative integers");
    if (shape->size() > kMaxRank)
      fail("limit", sptr, "a tensor has at most " + std::to_string(kMaxRank) + " dimensions");
    int64_t numel = 1;
    for (std::size_t i = 0; i < shape->size(); ++i) {
      const std::string dptr = child(sptr, i);
      int64_t dim = get_nonneg_int((*shape)[i], dptr);
      if (dim > kMaxDim)
        fail("schema", dptr, "dimension " + std::to_string(dim) + " is larger than 2^40");
      int64_t next;
      if (__builtin_mul_overflow(numel, dim, &next))
        fail("schema", dptr, "the element count of this shape overflows int64");
      numel = next;
      leaf.shape.push_back(dim);
    }
    // Byte accounting multiplies by the element size; keep that representable too.
    int64_t bytes;
    if (__builtin_mul_overflow(numel, dtype_size(leaf.dtype), &bytes))
      fail("schema", sptr, "the byte size of this tensor overflows int64");

    if (const OJ* rg = find_field(spec, "requires_grad")) {
      const std::string rptr = child(ptr, "requires_grad");
      leaf.requires_grad = get_bool(*rg, rptr);
      if (leaf.requires_grad && !is_floating(leaf.dtype))
        fail("schema", rptr,
             "only floating-point tensors can require grad (this one is " + dtype_name(leaf.dtype) + ")");
    }

    if (const OJ* init = find_field(spec, "init")) leaf.init = load_init(*init, child(ptr, "init"), leaf, numel);
    return leaf;
  }

  InitSpec load_init(const OJ& j, const std::string& ptr, const LeafSpec& leaf, int64_t numel) {
    static const std::vector<std::string> kinds = {"zeros",   "ones",    "full",   "values", "arange",
                                                   "linspace", "uniform", "normal", "randint"};
    static const std::vector<std::string> object_kinds = {"full",     "values",  "arange", "linspace",
                                                          "uniform", "normal", "randint"};
    InitSpec init;
    if (j.is_string()) {
      const std::string& k = j.get_ref<const std::string&>();
      if (k == "zeros") {
        init.kind = InitSpec::Kind::Zeros;
      } else if (k == "ones") {
        init.kind = InitSpec::Kind::Ones;
      } else if (contains(object_kinds, k)) {
        fail("schema", ptr, "initialiser " + quote(k) + " takes arguments: write {\"" + k + "\": ...}");
      } else {
        fail("schema", ptr, "unknown initialiser " + quote(k) + suggestion(k, kinds) +
                                " (valid: " + join(kinds) + ")");
      }
      return init;
    }
    expect_type(j.is_object(), j, ptr, "an initialiser (\"zeros\", \"ones\" or an object such as {\"uniform\": [-1, 1]})");
    if (j.size() != 1)
      fail("schema", ptr, "an initialiser object has exactly one key, found " + std::to_string(j.size()));
    const std::string& k = j.begin().key();
    const OJ& arg = j.begin().value();
    const std::string aptr = child(ptr, k);
    const DType d = leaf.dtype;
    if (k == "full") {
      init.kind = InitSpec::Kind::Full;
      init.a = element_value(arg, aptr, d);
    } else if (k == "values") {
      init.kind = InitSpec::Kind::Values;
      init.values = load_values(arg, aptr, leaf.shape, numel, d);
    } else if (k == "arange" || k == "linspace") {
      init.kind = k == "arange" ? InitSpec::Kind::Arange : InitSpec::Kind::Linspace;
      std::tie(init.a, init.b) = pair(arg, aptr, k == "arange" ? "[start, step]" : "[lo, hi]");
    } else if (k == "uniform" || k == "normal") {
      init.kind = k == "uniform" ? InitSpec::Kind::Uniform : InitSpec::Kind::Normal;
      std::tie(init.a, init.b) = pair(arg, aptr, k == "uniform" ? "[lo, hi]" : "[mean, std]");
      // PyTorch's uniform_/normal_ are not implemented for integer or bool tensors.
      if (!is_floating(d))
        fail("schema", aptr, "the " + k + " initialiser needs a floating-point dtype (this tensor is " +
                                 dtype_name(d) + ")");
      if (k == "uniform" && init.a > init.b)
        fail("schema", aptr, "uniform needs lo <= hi");
      if (k == "normal" && init.b < 0) fail("schema", child(aptr, 1), "normal needs std >= 0");
    } else if (k == "randint") {
      init.kind = InitSpec::Kind::Randint;
      std::tie(init.a, init.b) = pair(arg, aptr, "[lo, hi]");
      for (std::size_t i = 0; i < 2; ++i) {
        double v = i == 0 ? init.a : init.b;
        // Integers up to 2^53 are exact in double, which the generator computes in.
        if (std::trunc(v) != v || std::fabs(v) > 9007199254740992.0)
          fail("schema", child(aptr, i), "randint bounds are integers (magnitude at most 2^53)");
      }
      if (!(init.a < init.b)) fail("schema", aptr, "randint needs lo < hi (the range is [lo, hi))");
    } else {
      std::string s = suggestion(k, kinds);
      fail("schema", aptr,
           "unknown initialiser " + quote(k) + (s.empty() ? " (valid: " + join(kinds) + ")" : s));
    }
    return init;
  }

  std::pair<double, double> pair(const OJ& j, const std::string& ptr, const std::string& form) {
    if (!j.is_array() || j.size() != 2)
      fail("schema", ptr, "expected a list of two numbers " + form + ", found " +
                              (j.is_array() ? "a list of " + std::to_string(j.size()) : type_name(j)));
    return {get_finite(j[0], child(ptr, 0)), get_finite(j[1], child(ptr, 1))};
  }

  // {"values": ...}: nested in the shape, or flat in row-major order (a 0-d tensor may also
  // give its one value bare). The first element decides: a list means nested.
  std::vector<double> load_values(const OJ& j, const std::string& ptr, const std::vector<int64_t>& shape,
                                  int64_t numel, DType d) {
    std::vector<double> out;
    if (shape.empty() && !j.is_array()) {
      out.push_back(element_value(j, ptr, d));
      return out;
    }
    get_list(j, ptr, "a list of values");
    const bool nested = shape.size() >= 2 && !j.empty() && j[0].is_array();
    if (!nested) {
      if (static_cast<int64_t>(j.size()) != numel) {
        std::string want = shape.size() >= 2
                               ? std::to_string(numel) + " values (flat, row-major) or lists nested in shape " +
                                     shape_text(shape)
                               : std::to_string(numel) + " values (shape " + shape_text(shape) + ")";
        fail("schema", ptr, "expected " + want + ", found " + std::to_string(j.size()));
      }
      out.reserve(j.size());
      for (std::size_t i = 0; i < j.size(); ++i) out.push_back(element_value(j[i], ptr, d, i));
      return out;
    }
    // A valid file holds at most one value per two bytes; a larger count (a huge shape with
    // a short nested list) is refused by nested_values, so never reserve beyond the text.
    if (static_cast<uint64_t>(numel) <= kMaxFileBytes) out.reserve(static_cast<std::size_t>(numel));
    nested_values(j, ptr, shape, 0, d, out);
    return out;
  }

  // Recursion depth is bounded by the rank (at most kMaxRank).
  void nested_values(const OJ& j, const std::string& ptr, const std::vector<int64_t>& shape, std::size_t dim,
                     DType d, std::vector<double>& out) {
    if (dim == shape.size()) {
      out.push_back(element_value(j, ptr, d));
      return;
    }
    auto want = [&] {
      return std::to_string(shape[dim]) + " entries (dimension " + std::to_string(dim) + " of shape " +
             shape_text(shape) + ")";
    };
    if (!j.is_array()) fail("schema", ptr, "expected a list of " + want() + ", found " + type_name(j));
    if (static_cast<int64_t>(j.size()) != shape[dim])
      fail("schema", ptr, "expected " + want() + ", found " + std::to_string(j.size()));
    if (dim + 1 == shape.size()) {  // the innermost list: its elements' pointers only on error
      for (std::size_t i = 0; i < j.size(); ++i) out.push_back(element_value(j[i], ptr, d, i));
      return;
    }
    for (std::size_t i = 0; i < j.size(); ++i) nested_values(j[i], child(ptr, i), shape, dim + 1, d, out);
  }

  // ---- program ----

  void load_items(const OJ& list, const std::string& ptr, int depth, std::vector<ProgramItem>& out) {
    out.reserve(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) out.push_back(load_item(list[i], child(ptr, i), depth));
  }

  ProgramItem load_item(const OJ& j, const std::string& ptr, int depth) {
    ProgramItem item;
    item.pointer = ptr;
    if (j.is_string()) {
      const std::string& src = j.get_ref<const std::string&>();
      if (src.find_first_not_of(" \t") == std::string::npos) fail("schema", ptr, "empty statement");
      if (src.find_first_of("\n\r") != std::string::npos)
        fail("schema", ptr, "a statement string holds one statement: no newlines (one statement per string)");
      if (src.size() > kMaxStatementBytes)
        fail("limit", ptr, "a statement is longer than " + std::to_string(kMaxStatementBytes) + " bytes");
      if (next_index_ >= kMaxStatements)
        fail("limit", ptr, "the program has more than " + std::to_string(kMaxStatements) + " statements");
      item.kind = ProgramItem::Kind::Statement;
      item.source = src;
      item.index = next_index_++;
      return item;
    }
    if (!j.is_object())
      fail("schema", ptr,
           "a program entry is a statement string or a block object, found " + type_name(j));
    load_block(j, ptr, depth + 1, item);
    return item;
  }

  void load_block(const OJ& j, const std::string& ptr, int depth, ProgramItem& item) {
    static const std::vector<std::string> heads = {"no_grad",            "enable_grad", "set_grad_enabled", "try",
                                                   "saved_tensor_hooks", "repeat",      "checkpoint",       "autocast"};
    static const std::vector<std::string> all_keys = {"no_grad",    "enable_grad", "set_grad_enabled", "try",
                                                      "saved_tensor_hooks", "repeat", "checkpoint", "body",
                                                      "inputs",     "outputs",     "autocast",   "device_type"};
    if (depth > kMaxBlockDepth)
      fail("limit", ptr, "blocks nest deeper than " + std::to_string(kMaxBlockDepth));

    // Unknown keys first: a misspelt block kind ("no_gard") should be named as such rather
    // than as "a block with no kind".
    for (const auto& [k, v] : j.items()) {
      (void)v;
      if (!contains(all_keys, k)) {
        std::string s = suggestion(k, all_keys);
        fail("schema", child(ptr, k),
             "unknown block key " + quote(k) + (s.empty() ? " (blocks: " + join(heads) + ")" : s));
      }
    }
    std::string head;
    for (const auto& [k, v] : j.items()) {
      (void)v;
      if (!contains(heads, k)) continue;
      if (!head.empty())
        fail("schema", child(ptr, k), "a block has exactly one kind; found both '" + head + "' and '" + k + "'");
      head = k;
    }
    if (head.empty()) fail("schema", ptr, "a block object needs one of: " + join(heads));

    std::vector<std::string> extras;
    if (head == "saved_tensor_hooks" || head == "repeat" || head == "set_grad_enabled" || head == "autocast")
      extras = {"body"};
    if (head == "checkpoint") extras = {"inputs", "outputs"};
    for (const auto& [k, v] : j.items()) {
      (void)v;
      if (head == "autocast" && k == "device_type") continue;  // optional
      if (k != head && !contains(extras, k))
        fail("schema", child(ptr, k), "field '" + k + "' does not belong in a " + head + " block");
    }
    for (const auto& e : extras)
      if (!j.contains(e)) fail("schema", ptr, "a " + head + " block needs '" + e + "'");

    const OJ& hv = j.at(head);
    const std::string hptr = child(ptr, head);
    auto body = [&](const OJ& list, const std::string& lptr) {
      get_list(list, lptr, "a list of statements");
      load_items(list, lptr, depth, item.body);
    };
    if (head == "no_grad") {
      item.kind = ProgramItem::Kind::NoGrad;
      body(hv, hptr);
    } else if (head == "enable_grad") {
      item.kind = ProgramItem::Kind::EnableGrad;
      body(hv, hptr);
    } else if (head == "set_grad_enabled") {
      // with torch.set_grad_enabled(BOOL): ...
      item.kind = ProgramItem::Kind::SetGradEnabled;
      if (!hv.is_boolean()) fail("schema", hptr, "set_grad_enabled needs true or false, found " + type_name(hv));
      item.grad_mode = hv.get<bool>();
      body(j.at("body"), child(ptr, "body"));
    } else if (head == "try") {
      item.kind = ProgramItem::Kind::Try;
      body(hv, hptr);
    } else if (head == "saved_tensor_hooks") {
      item.kind = ProgramItem::Kind::SavedTensorHooks;
      static const std::vector<std::string> hook_kinds = {"save_on_cpu", "fp16", "bf16", "count"};
      const std::string& k = get_string(hv, hptr);
      if (!contains(hook_kinds, k))
        fail("schema", hptr, "unknown saved_tensor_hooks kind " + quote(k) + suggestion(k, hook_kinds) +
                                 " (valid: " + join(hook_kinds) + ")");
      item.hooks_kind = k;
      body(j.at("body"), child(ptr, "body"));
    } else if (head == "autocast") {
      // with torch.autocast(device_type, dtype=DTYPE): the dtypes torch.autocast lowers to.
      item.kind = ProgramItem::Kind::Autocast;
      static const std::vector<std::string> dtypes = {"bfloat16", "float16"};
      const std::string& d = get_string(hv, hptr);
      if (!contains(dtypes, d))
        fail("schema", hptr, "unknown autocast dtype " + quote(d) + suggestion(d, dtypes) + " (valid: " + join(dtypes) + ")");
      item.autocast_dtype = d == "float16" ? DType::Float16 : DType::BFloat16;
      if (j.contains("device_type")) {
        // PyTorch 1.13's torch.autocast accepts 'cuda' and 'cpu' only.
        static const std::vector<std::string> types = {"cpu", "cuda"};
        const std::string tptr = child(ptr, "device_type");
        const std::string& t = get_string(j.at("device_type"), tptr);
        if (!contains(types, t))
          fail("schema", tptr, "unknown autocast device_type " + quote(t) + suggestion(t, types) + " (valid: " + join(types) + ")");
        item.device_type = t;
      }
      body(j.at("body"), child(ptr, "body"));
    } else if (head == "repeat") {
      item.kind = ProgramItem::Kind::Repeat;
      int64_t n = get_int(hv, hptr, "an integer >= 1");
      if (n < 1) fail("schema", hptr, "repeat needs N >= 1, found " + std::to_string(n));
      item.repeat = n;
      body(j.at("body"), child(ptr, "body"));
    } else {  // checkpoint
      item.kind = ProgramItem::Kind::Checkpoint;
      body(hv, hptr);
      item.inputs = names(j.at("inputs"), child(ptr, "inputs"), true);
      item.outputs = names(j.at("outputs"), child(ptr, "outputs"), false);
    }
  }

  // Checkpoint inputs become parameters of `def fn(...)` (duplicates are a SyntaxError in
  // Python); outputs are the names bound from its result.
  std::vector<std::string> names(const OJ& j, const std::string& ptr, bool unique) {
    get_list(j, ptr, "a list of names");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < j.size(); ++i) {
      const std::string nptr = child(ptr, i);
      const std::string& n = get_string(j[i], nptr);
      if (auto problem = name_problem(n)) fail("schema", nptr, "bad name: " + *problem);
      if (unique && contains(out, n)) fail("schema", nptr, "duplicate name " + quote(n));
      out.push_back(n);
    }
    return out;
  }

  // How many statements a run executes, repeat blocks multiplied out; refuses a program
  // that would execute more than kMaxExecutedStatements (saturating, so no overflow).
  int64_t executed_statements(const std::vector<ProgramItem>& items, int64_t times) {
    int64_t total = 0;
    for (const ProgramItem& it : items) {
      int64_t n = 0;
      if (it.kind == ProgramItem::Kind::Statement) {
        n = times;
      } else {
        int64_t inner = times;
        if (it.kind == ProgramItem::Kind::Repeat)
          inner = it.repeat > kMaxExecutedStatements / times ? kMaxExecutedStatements + 1 : times * it.repeat;
        n = it.body.empty() ? 0 : executed_statements(it.body, inner);
      }
      total += n;  // each term is at most kMaxExecutedStatements + 1: no overflow
      if (total > kMaxExecutedStatements)
        fail("limit", it.pointer,
             "the program would execute more than " + std::to_string(kMaxExecutedStatements) +
                 " statements (repeat counts multiplied out)");
    }
    return total;
  }

  void collect_statements(const std::vector<ProgramItem>& items) {
    for (const ProgramItem& it : items) {
      if (it.kind == ProgramItem::Kind::Statement)
        s_.statements.push_back(&it);
      else
        collect_statements(it.body);  // depth bounded by kMaxBlockDepth
    }
  }

  // ---- expect ----

  void load_expect(const OJ& e) {
    get_object(e, "/expect");
    check_fields(e, "/expect", {"walk", "printed", "errors", "memory", "korthikanti"});

    if (const OJ* w = find_field(e, "walk")) {
      get_object(*w, "/expect/walk");
      for (const auto& [root, names] : w->items()) {
        const std::string rptr = child("/expect/walk", root);
        string_list(names, rptr, "a list of node names");
      }
    }
    if (const OJ* p = find_field(e, "printed")) string_list(*p, "/expect/printed", "a list of strings");

    if (const OJ* errs = find_field(e, "errors")) {
      get_list(*errs, "/expect/errors", "a list of error objects");
      for (std::size_t i = 0; i < errs->size(); ++i) load_expected_error((*errs)[i], child("/expect/errors", i));
    }

    // Extension (issue #4, accountant): reconcile the saved bytes with Korthikanti et al.
    // 2022 for a transformer layer of this shape; `check` fails when a difference is unexplained.
    if (const OJ* k = find_field(e, "korthikanti")) {
      get_object(*k, "/expect/korthikanti");
      check_fields(*k, "/expect/korthikanti", {"s", "b", "h", "a"});
      for (const char* key : {"s", "b", "h", "a"}) {
        const OJ* v = find_field(*k, key);
        const std::string kptr = child("/expect/korthikanti", key);
        if (!v) fail("schema", "/expect/korthikanti", std::string("missing required field '") + key + "'");
        if (get_nonneg_int(*v, kptr) == 0) fail("schema", kptr, "must be positive");
      }
      if ((*k)["h"].get<int64_t>() % (*k)["a"].get<int64_t>() != 0)
        fail("schema", "/expect/korthikanti/a", "h must be a multiple of a (heads)");
    }
    if (const OJ* m = find_field(e, "memory")) {
      get_object(*m, "/expect/memory");
      check_fields(*m, "/expect/memory", {"peak_bytes", "saved_bytes", "saved_unique_bytes", "graph_only_bytes"});
      for (const auto& [k, v] : m->items()) {
        const std::string mptr = child("/expect/memory", k);
        if (v.is_object()) {
          check_fields(v, mptr, {"min", "max"});
          if (v.empty()) fail("schema", mptr, "a bound needs 'min', 'max' or both");
          int64_t lo = 0, hi = 0;
          if (const OJ* x = find_field(v, "min")) lo = get_nonneg_int(*x, child(mptr, "min"));
          if (const OJ* x = find_field(v, "max")) hi = get_nonneg_int(*x, child(mptr, "max"));
          if (v.contains("min") && v.contains("max") && lo > hi) fail("schema", mptr, "min is larger than max");
        } else if (!v.is_number_integer()) {
          fail("schema", mptr,
               "expected a byte count or a bound such as {\"max\": 1024}, found " + type_name(v));
        } else {
          get_nonneg_int(v, mptr);
        }
      }
    }

    // The rest of the program works with nlohmann::json; the order inside expect does not
    // matter to it. The value is validated (bounded depth), so the round trip is cheap.
    s_.expect = nlohmann::json::parse(e.dump());
  }

  void string_list(const OJ& j, const std::string& ptr, const std::string& wanted) {
    get_list(j, ptr, wanted);
    for (std::size_t i = 0; i < j.size(); ++i) get_string(j[i], child(ptr, i));
  }

  void load_expected_error(const OJ& e, const std::string& ptr) {
    static const std::vector<std::string> kinds = {
        "leaf_inplace",   "view_of_leaf_inplace", "saved_tensor_modified", "saved_tensors_freed",
        "no_grad_fn",     "grad_not_scalar",      "shape_mismatch",        "dtype_mismatch",
        "index_out_of_range", "unsupported",      "name_error",            "type_error",
        // agtrace's extensions (README, "Error kinds beyond the spec").
        "unused_input",   "limit",                "view_inplace"};
    get_object(e, ptr);
    check_fields(e, ptr, {"statement", "kind", "phase", "node", "expected_version", "found_version", "saved_at"});
    const OJ* kind = find_field(e, "kind");
    if (!kind) fail("schema", ptr, "missing required field 'kind'");
    const std::string& k = get_string(*kind, child(ptr, "kind"));
    if (!contains(kinds, k))
      fail("schema", child(ptr, "kind"),
           "unknown error kind " + quote(k) + suggestion(k, kinds) + " (valid: " + join(kinds) + ")");
    for (const char* key : {"statement", "saved_at"}) {
      if (const OJ* st = find_field(e, key)) {
        const std::string sptr = child(ptr, key);
        int64_t n = get_nonneg_int(*st, sptr);
        if (n >= next_index_)
          fail("schema", sptr, "no statement " + std::to_string(n) + " (the program has " +
                                   std::to_string(next_index_) + ")");
      }
    }
    if (const OJ* ph = find_field(e, "phase")) {
      const std::string& p = get_string(*ph, child(ptr, "phase"));
      if (p != "forward" && p != "backward")
        fail("schema", child(ptr, "phase"), "phase is 'forward' or 'backward', found " + quote(p));
    }
    if (const OJ* n = find_field(e, "node")) get_string(*n, child(ptr, "node"));
    for (const char* key : {"expected_version", "found_version"})
      if (const OJ* v = find_field(e, key)) get_nonneg_int(*v, child(ptr, key));
  }

  Scenario& s_;
  int next_index_ = 0;
};

}  // namespace

std::unique_ptr<Scenario> load_scenario_text(const std::string& text, const std::string& file_label) {
  auto s = std::make_unique<Scenario>();
  s->file = file_label;
  try {
    if (text.size() > kMaxFileBytes)
      fail("limit", "", "the scenario is larger than 16 MiB (" + std::to_string(text.size()) + " bytes)");
    Builder builder(text);
    OJ::sax_parse(text, &builder);
    OJ root = builder.take_root();
    Loader(*s).load(root);
  } catch (InputError& e) {
    e.file = file_label;
    throw;
  }
  return s;
}

nlohmann::ordered_json parse_json_bounded(const std::string& text, const std::string& file_label) {
  try {
    Builder builder(text);
    OJ::sax_parse(text, &builder);
    return builder.take_root();
  } catch (InputError& e) {
    e.file = file_label;
    throw;
  }
}

std::unique_ptr<Scenario> load_scenario_file(const std::string& path) {
  // read_file checks a regular file's size before reading it and cuts off anything else
  // (a pipe, /dev/zero) one byte past the limit; a FIFO with no writer is an error.
  return load_scenario_text(read_file(path, kMaxFileBytes, "scenario"), path);
}

}  // namespace agtrace
