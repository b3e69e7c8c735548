// The statement parser for the scenario language: a lazy hand-written lexer and a
// recursive-descent parser with one function per Python precedence level (spec:
// "Statements", "Expressions"), plus to_source, which renders a tree back.
//
// Two limits keep the process safe on hostile input, because the rest of agtrace
// (to_source, the interpreter, even ~Expr) walks trees recursively:
//  - kMaxNesting bounds the parser's own recursion (brackets, unary operators,
//    `not`, the right side of `**`), which grows even when no node is built, as
//    in `((((x))))`;
//  - kMaxHeight bounds the height of the tree built, which grows without
//    recursion in left-associative chains such as `a + b + c + ...` or
//    `x.f().g().h()...`.
#include "syntax/ast.hpp"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include "errors.hpp"

namespace agtrace::syntax {
namespace {

constexpr int kMaxNesting = 200;
constexpr int kMaxHeight = 200;
const char* const kTooDeep = "expression nested too deeply (the limit is 200 levels)";

[[noreturn]] void fail_at(const std::string& source, int column, const std::string& detail) {
  InputError err("syntax", detail);
  err.column = column;
  err.source = source;
  throw err;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_start(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's hard keywords. Only True/False/None/and/or/not/is/del mean something
// here; the rest exist so that a statement using them gets a clear "not supported"
// instead of being read as a name.
const std::unordered_set<std::string>& python_keywords() {
  static const std::unordered_set<std::string> kw = {
      "False", "None",   "True",    "and",      "as",       "assert", "async",
      "await", "break",  "class",   "continue", "def",      "del",    "elif",
      "else",  "except", "finally", "for",      "from",     "global", "if",
      "import", "in",    "is",      "lambda",   "nonlocal", "not",    "or",
      "pass",  "raise",  "return",  "try",      "while",    "with",   "yield"};
  return kw;
}

bool is_unsupported_keyword(const std::string& word) {
  static const std::unordered_set<std::string> ok = {"False", "None", "True", "and",
                                                      "or",    "not",  "is",   "del"};
  return python_keywords().count(word) && !ok.count(word);
}

enum class Tok { Name, Keyword, Int, Float, String, Op, Newline, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // Name/Keyword/Op: the spelling; String: the decoded value
  std::string raw;   // the source text of the token, for messages
  int column = 1;    // 1-based
  int64_t int_value = 0;
  double float_value = 0.0;
};

// Operators Python has but the scenario language does not; they lex as tokens so
// the parser can say exactly what is unsupported.
bool is_unsupported_operator(const std::string& op) {
  static const std::unordered_set<std::string> ops = {"~",  "&",  "|",   "^",   "<<",
                                                       ">>", "&=", "|=",  "^=",  "<<=",
                                                       ">>=", "->", "//=", "%="};
  return ops.count(op) > 0;
}

bool is_augassign(const std::string& op) {
  return op == "+=" || op == "-=" || op == "*=" || op == "/=" || op == "@=" || op == "**=";
}

// ---------------------------------------------------------------------------
// Lexer. Lazy, so that an error early in the statement is reported before a bad
// character later in it, as Python does.

class Lexer {
 public:
  explicit Lexer(const std::string& source) : src_(source), n_(source.size()) {}

  Token next() {
    size_t line_break = skip_trivia();
    if (line_break != std::string::npos) {
      Token t;
      t.kind = Tok::Newline;
      t.column = static_cast<int>(line_break) + 1;
      return t;
    }
    if (pos_ >= n_) {
      Token t;
      t.kind = Tok::End;
      // Just past the last token, so "expected ']'" points where it is missing.
      t.column = static_cast<int>(last_end_) + 1;
      return t;
    }
    size_t start = pos_;
    Token t = lex_one();
    t.column = static_cast<int>(start) + 1;
    t.raw = src_.substr(start, pos_ - start);
    last_end_ = pos_;
    produced_ = true;
    return t;
  }

 private:
  const std::string& src_;
  size_t n_;
  size_t pos_ = 0;
  size_t last_end_ = 0;
  int depth_ = 0;          // open brackets: a line break inside them is whitespace
  bool produced_ = false;  // a line break before the first token is just blank space

  [[noreturn]] void fail(size_t offset, const std::string& detail) const {
    fail_at(src_, static_cast<int>(offset) + 1, detail);
  }

  bool only_trivia_from(size_t p) const {
    while (p < n_) {
      char c = src_[p];
      if (c == '#') {
        while (p < n_ && src_[p] != '\n') ++p;
      } else if (c == ' ' || c == '\t' || c == '\f' || c == '\r' || c == '\n') {
        ++p;
      } else {
        return false;
      }
    }
    return true;
  }

  // Skips blanks, comments and line continuations. Returns the offset of a line
  // break that ends the statement while more code follows it (a second statement
  // in one program entry), or npos.
  size_t skip_trivia() {
    while (pos_ < n_) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\f' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < n_ && src_[pos_] != '\n') ++pos_;
      } else if (c == '\\') {
        size_t p = pos_ + 1;
        if (p < n_ && src_[p] == '\r') ++p;
        if (p < n_ && src_[p] == '\n') {
          pos_ = p + 1;
        } else {
          return std::string::npos;  // a stray backslash: lex_one reports it
        }
      } else if (c == '\n') {
        size_t at = pos_++;
        if (depth_ > 0 || !produced_) continue;
        if (only_trivia_from(pos_)) {
          pos_ = n_;
          return std::string::npos;
        }
        return at;
      } else {
        break;
      }
    }
    return std::string::npos;
  }

  Token lex_one() {
    char c = src_[pos_];
    if (is_ident_start(c)) return word();
    if (src_.compare(pos_, 3, "...") == 0) {
      pos_ += 3;
      return op("...");
    }
    if (is_digit(c) || (c == '.' && pos_ + 1 < n_ && is_digit(src_[pos_ + 1]))) return number();
    if (c == '\'' || c == '"') return string_literal();
    static const char* const three[] = {"**=", "//=", "<<=", ">>="};
    static const char* const two[] = {"**", "//", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=",
                                      "@=", "%=", ":=", "->", "<<", ">>", "&=", "|=", "^="};
    for (const char* o : three)
      if (src_.compare(pos_, 3, o) == 0) {
        pos_ += 3;
        return op(o);
      }
    for (const char* o : two)
      if (src_.compare(pos_, 2, o) == 0) {
        pos_ += 2;
        return op(o);
      }
    if (std::strchr("+-*/%@<>=()[]{},.:;~&|^", c) && c != '\0') {
      if (c == '(' || c == '[' || c == '{') ++depth_;
      if ((c == ')' || c == ']' || c == '}') && depth_ > 0) --depth_;
      ++pos_;
      return op(std::string(1, c));
    }
    invalid_character();
  }

  static Token op(std::string text) {
    Token t;
    t.kind = Tok::Op;
    t.text = std::move(text);
    return t;
  }

  [[noreturn]] void invalid_character() const {
    unsigned char c = static_cast<unsigned char>(src_[pos_]);
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", c);
    if (c >= 0x80) {
      // Show the whole UTF-8 character when it is well formed (a typographic quote
      // or a multiplication sign pasted from a document is the usual culprit).
      size_t len = c >= 0xF0 && c <= 0xF7 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
      bool ok = len > 0 && pos_ + len <= n_;
      for (size_t i = 1; ok && i < len; ++i)
        ok = (static_cast<unsigned char>(src_[pos_ + i]) & 0xC0) == 0x80;
      if (ok)
        fail(pos_, "invalid character '" + src_.substr(pos_, len) +
                       "' (non-ASCII characters are only allowed inside strings)");
      fail(pos_, std::string("invalid character (non-ASCII byte ") + hex +
                     "; non-ASCII characters are only allowed inside strings)");
    }
    if (c < 0x20 || c == 0x7F) fail(pos_, std::string("invalid character (control byte ") + hex + ")");
    if (c == '\\')
      fail(pos_, "invalid character '\\' (a backslash is only allowed inside a string or at the "
                 "end of a line)");
    fail(pos_, std::string("invalid character '") + static_cast<char>(c) + "'");
  }

  Token word() {
    size_t start = pos_;
    while (pos_ < n_ && is_ident_char(src_[pos_])) ++pos_;
    Token t;
    t.text = src_.substr(start, pos_ - start);
    if (pos_ < n_ && (src_[pos_] == '\'' || src_[pos_] == '"')) {
      std::string lower = t.text;
      for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      static const std::unordered_set<std::string> prefixes = {"r",  "u",  "f",  "b",
                                                               "br", "rb", "fr", "rf"};
      if (prefixes.count(lower))
        fail(start, "string prefix '" + t.text +
                        "' is not supported (only plain '...' or \"...\" strings; no f-strings, "
                        "raw or byte strings)");
    }
    t.kind = python_keywords().count(t.text) ? Tok::Keyword : Tok::Name;
    return t;
  }

  // Consumes [0-9](_?[0-9])* into `clean` (separators dropped). A '_' must sit
  // between two digits, as in Python.
  void decimal_digits(std::string& clean) {
    while (pos_ < n_) {
      char c = src_[pos_];
      if (is_digit(c)) {
        clean += c;
        ++pos_;
      } else if (c == '_' && pos_ + 1 < n_ && is_digit(src_[pos_ + 1]) && pos_ > 0 &&
                 is_digit(src_[pos_ - 1])) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  Token number() {
    size_t start = pos_;
    Token t;
    if (src_[pos_] == '0' && pos_ + 1 < n_ && src_[pos_ + 1] != '\0' &&
        std::strchr("xXoObB", src_[pos_ + 1]))
      return prefixed_int(start);

    std::string clean;
    bool is_float = false;
    decimal_digits(clean);
    if (pos_ < n_ && src_[pos_] == '.') {
      is_float = true;
      clean += '.';
      ++pos_;
      decimal_digits(clean);
    }
    if (pos_ < n_ && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t q = pos_ + 1;
      if (q < n_ && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < n_ && is_digit(src_[q])) {
        is_float = true;
        clean += 'e';
        clean.append(src_, pos_ + 1, q - pos_ - 1);
        pos_ = q;
        decimal_digits(clean);
      }
    }
    if (pos_ < n_ && (src_[pos_] == 'j' || src_[pos_] == 'J'))
      fail(start, "complex (imaginary) number literals are not supported");
    if (pos_ < n_ && is_ident_char(src_[pos_]))
      fail(start, "invalid decimal literal '" + src_.substr(start, pos_ + 1 - start) + "'");

    if (is_float) {
      double v = 0.0;
      auto r = std::from_chars(clean.data(), clean.data() + clean.size(), v);
      if (r.ec == std::errc::result_out_of_range) {
        // Python reads 1e400 as inf and 1e-400 as 0.0; strtod does the same.
        v = std::strtod(clean.c_str(), nullptr);
      } else if (r.ec != std::errc() || r.ptr != clean.data() + clean.size()) {
        fail(start, "invalid float literal '" + src_.substr(start, pos_ - start) + "'");
      }
      t.kind = Tok::Float;
      t.float_value = v;
      return t;
    }
    if (clean.size() > 1 && clean[0] == '0' && clean.find_first_not_of('0') != std::string::npos)
      fail(start, "leading zeros in decimal integer literals are not permitted");
    uint64_t v = 0;
    for (char c : clean) {
      uint64_t d = static_cast<uint64_t>(c - '0');
      if (v > (static_cast<uint64_t>(INT64_MAX) - d) / 10) too_large(start);
      v = v * 10 + d;
    }
    t.kind = Tok::Int;
    t.int_value = static_cast<int64_t>(v);
    return t;
  }

  [[noreturn]] void too_large(size_t start) const {
    fail(start, "integer literal is too large (it must fit in a signed 64-bit integer, at most "
                "9223372036854775807)");
  }

  Token prefixed_int(size_t start) {
    char p = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[pos_ + 1])));
    int base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
    const char* what = p == 'x' ? "hexadecimal" : p == 'o' ? "octal" : "binary";
    pos_ += 2;
    uint64_t v = 0;
    bool any = false;
    while (pos_ < n_) {
      char c = src_[pos_];
      int d = digit_value(c);
      if (c == '_' && pos_ + 1 < n_) {
        int next = digit_value(src_[pos_ + 1]);
        if (next >= 0 && next < base) {
          ++pos_;
          continue;
        }
        break;
      }
      if (d < 0 || d >= base) break;
      if (v > (static_cast<uint64_t>(INT64_MAX) - static_cast<uint64_t>(d)) / base)
        too_large(start);
      v = v * base + static_cast<uint64_t>(d);
      any = true;
      ++pos_;
    }
    if (!any || (pos_ < n_ && is_ident_char(src_[pos_])))
      fail(start, std::string("invalid ") + what + " literal '" +
                      src_.substr(start, std::min(n_, pos_ + 1) - start) + "'");
    Token t;
    t.kind = Tok::Int;
    t.int_value = static_cast<int64_t>(v);
    return t;
  }

  Token string_literal() {
    size_t start = pos_;
    char quote = src_[pos_];
    if (pos_ + 2 < n_ && src_[pos_ + 1] == quote && src_[pos_ + 2] == quote)
      fail(start, "triple-quoted strings are not supported");
    ++pos_;
    std::string value;
    for (;;) {
      if (pos_ >= n_ || src_[pos_] == '\n')
        fail(start, std::string("unterminated string (missing the closing ") + quote + ")");
      char c = src_[pos_];
      if (c == quote) {
        ++pos_;
        break;
      }
      if (c != '\\') {
        value += c;
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= n_)
        fail(start, std::string("unterminated string (missing the closing ") + quote + ")");
      char e = src_[pos_ + 1];
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': break;  // backslash-newline continues the string on the next line
        case 'x': {
          int hi = pos_ + 2 < n_ ? digit_value(src_[pos_ + 2]) : -1;
          int lo = pos_ + 3 < n_ ? digit_value(src_[pos_ + 3]) : -1;
          if (hi < 0 || lo < 0)
            fail(pos_, "invalid \\x escape in string (expected two hexadecimal digits)");
          // '\xNN' is the character U+00NN (a str holds characters, not bytes): '\xff'
          // is 'ÿ', two bytes in UTF-8.
          append_utf8(value, static_cast<uint32_t>(hi * 16 + lo));
          pos_ += 2;
          break;
        }
        case 'u':
        case 'U': {
          const int digits = e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < digits; ++k) {
            const int d = pos_ + 2 + k < n_ ? digit_value(src_[pos_ + 2 + k]) : -1;
            if (d < 0 || d > 15)
              fail(pos_, std::string("invalid \\") + e + " escape in string (expected " + std::to_string(digits) +
                             " hexadecimal digits)");
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          if (cp > 0x10FFFF) fail(pos_, "invalid \\U escape in string (past U+10FFFF)");
          // Python allows a lone surrogate in a str, but cannot print or encode it (its
          // UTF-8 encoder raises); agtrace's text is UTF-8 throughout, so it is refused.
          if (cp >= 0xD800 && cp <= 0xDFFF) fail(pos_, "unsupported: a surrogate code point in a string");
          append_utf8(value, cp);
          pos_ += digits;
          break;
        }
        default:
          // Python keeps unknown escapes literally (with a warning); refusing them
          // is clearer than guessing whether a backslash was meant.
          fail(pos_, std::string("unsupported escape sequence '\\") + e +
                         "' in string (supported: \\\\ \\' \\\" \\n \\t \\r \\xNN \\uNNNN \\UNNNNNNNN)");
      }
      pos_ += 2;
    }
    Token t;
    t.kind = Tok::String;
    t.text = std::move(value);
    return t;
  }
};

// ---------------------------------------------------------------------------
// Parser.

ExprPtr make(ExprKind kind, int column) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->column = column;
  return e;
}

class Parser {
 public:
  explicit Parser(const std::string& source) : src_(source), lex_(source) {}

  Stmt statement() {
    const Token& first = peek();
    if (first.kind == Tok::End) fail(1, "empty statement — expected a Python statement");
    if (first.kind == Tok::Keyword && first.text == "del") return del_statement();

    Stmt st;
    ExprPtr lhs = testlist();
    const Token& t = peek();
    if (t.kind == Tok::Op && t.text == "=") {
      take();
      check_target(*lhs, "assign to");
      st.kind = StmtKind::Assign;
      st.target = std::move(lhs);
      st.value = testlist();
      if (at_op("="))
        fail(peek().column,
             "chained assignment (a = b = c) is not supported; write one assignment per statement");
    } else if (t.kind == Tok::Op && is_augassign(t.text)) {
      Token op = take();
      check_augmented_target(*lhs);
      st.kind = StmtKind::AugAssign;
      st.text = op.text.substr(0, op.text.size() - 1);
      st.target = std::move(lhs);
      st.value = testlist();
    } else {
      st.kind = StmtKind::ExprStmt;
      st.value = std::move(lhs);
    }
    expect_end();
    return st;
  }

 private:
  const std::string& src_;
  Lexer lex_;
  std::deque<Token> ahead_;  // deque: peek() references survive further lookahead
  int nesting_ = 0;
  std::unordered_map<const Expr*, int> heights_;

  // ---- tokens

  const Token& peek(size_t k = 0) {
    while (ahead_.size() <= k) ahead_.push_back(lex_.next());
    return ahead_[k];
  }
  Token take() {
    peek();
    Token t = std::move(ahead_.front());
    ahead_.pop_front();
    return t;
  }
  bool at_op(const char* op, size_t k = 0) {
    const Token& t = peek(k);
    return t.kind == Tok::Op && t.text == op;
  }
  bool at_keyword(const char* kw, size_t k = 0) {
    const Token& t = peek(k);
    return t.kind == Tok::Keyword && t.text == kw;
  }
  bool at_end() {
    Tok k = peek().kind;
    return k == Tok::End || k == Tok::Newline;
  }

  // ---- errors

  [[noreturn]] void fail(int column, const std::string& detail) const {
    fail_at(src_, column, detail);
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::End: return "end of statement";
      case Tok::Newline: return "line break";
      case Tok::Name: return "name '" + t.text + "'";
      case Tok::Keyword: return "'" + t.text + "'";
      case Tok::Int:
      case Tok::Float: return "number " + t.raw;
      case Tok::String: return "string " + (t.raw.size() > 40 ? t.raw.substr(0, 37) + "..." : t.raw);
      case Tok::Op: return "'" + t.text + "'";
    }
    return "token";
  }

  // The one place that reports a token the grammar cannot take here. Constructs
  // outside the language get a message naming them rather than "unexpected".
  [[noreturn]] void unexpected(const Token& t, const std::string& expected) const {
    if (t.kind == Tok::Keyword && is_unsupported_keyword(t.text))
      fail(t.column, "'" + t.text + "' is not supported in a scenario statement");
    if (t.kind == Tok::Op) {
      if (t.text == ";")
        fail(t.column,
             "';' is not supported in a scenario statement (write one statement per entry)");
      if (t.text == ":=") fail(t.column, "':=' is not supported in a scenario statement");
      if (t.text == "{" || t.text == "}")
        fail(t.column, "'" + t.text +
                           "' is not supported in a scenario statement (no dict or set literals)");
      if (t.text == "//=" || t.text == "%=")
        fail(t.column, "augmented assignment '" + t.text +
                           "' is not supported (use +=, -=, *=, /=, @= or **=)");
      if (is_unsupported_operator(t.text))
        fail(t.column, "operator '" + t.text + "' is not supported in a scenario statement");
    }
    if (t.kind == Tok::Newline)
      fail(t.column,
           "unexpected line break — a program entry holds one statement (expected " + expected +
               ")");
    fail(t.column, "unexpected " + describe(t) + " — expected " + expected);
  }

  // A missing closing bracket at the end of the statement names the opening one;
  // anything else in its place is reported as unexpected.
  void expect_close(const char* close, int open_column, const std::string& expected) {
    if (at_op(close)) {
      take();
      return;
    }
    const Token& t = peek();
    if (t.kind == Tok::End)
      fail(t.column, std::string("expected '") + close + "' to close '" +
                         (close[0] == ')' ? "(" : "[") + "' at column " +
                         std::to_string(open_column));
    unexpected(t, expected);
  }

  // Before an item inside brackets: running out of input there means the
  // bracket was never closed, which says more than "expected an expression".
  void closed_before_end(const char* close, int open_column) {
    if (peek().kind == Tok::End) expect_close(close, open_column, "");
  }

  void expect_end() {
    const Token& t = peek();
    if (t.kind == Tok::End) return;
    if (t.kind == Tok::Newline)
      fail(t.column,
           "unexpected line break — a program entry holds one statement; put the next "
           "statement in an entry of its own");
    if (t.kind == Tok::Op && (t.text == ")" || t.text == "]" || t.text == "}"))
      fail(t.column, "unmatched '" + t.text + "'");
    unexpected(t, "an operator or the end of the statement");
  }

  // ---- depth limits

  struct Nest {
    Parser& p;
    Nest(Parser& parser, int column) : p(parser) {
      if (p.nesting_ >= kMaxNesting) p.fail(column, kTooDeep);
      ++p.nesting_;
    }
    ~Nest() { --p.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
  };

  int height(const ExprPtr& e) const {
    if (!e) return 0;
    auto it = heights_.find(e.get());
    return it == heights_.end() ? 1 : it->second;
  }

  // Records a finished node's height; `column` is where the error points when the
  // node makes the tree too tall (the operator or bracket that built it).
  ExprPtr seal(ExprPtr e, int column) {
    int h = std::max({height(e->a), height(e->b), height(e->c)});
    for (const ExprPtr& item : e->items) h = std::max(h, height(item));
    for (const Keyword& kw : e->keywords) h = std::max(h, height(kw.value));
    if (h + 1 > kMaxHeight) fail(column, kTooDeep);
    heights_[e.get()] = h + 1;
    return e;
  }

  ExprPtr binary(ExprKind kind, const Token& op, ExprPtr left, ExprPtr right) {
    auto e = make(kind, left->column);
    e->text = op.text;
    e->a = std::move(left);
    e->b = std::move(right);
    return seal(std::move(e), op.column);
  }

  // ---- statements

  Stmt del_statement() {
    Token del = take();
    Stmt st;
    st.kind = StmtKind::Del;
    if (at_end()) unexpected(peek(), "a name to delete");
    for (;;) {
      ExprPtr target = test();
      check_target(*target, "delete");
      flatten_into(std::move(target), st.targets);
      if (!at_op(",")) break;
      take();
      if (at_end()) break;
    }
    expect_end();
    return st;
  }

  // `del (a, b), c` deletes a, b and c: callers only ever see Name, Attribute and
  // Subscript targets.
  static void flatten_into(ExprPtr e, std::vector<ExprPtr>& out) {
    if (e->kind == ExprKind::Tuple || e->kind == ExprKind::List) {
      for (ExprPtr& item : e->items) flatten_into(std::move(item), out);
    } else {
      out.push_back(std::move(e));
    }
  }

  static const char* target_problem(const Expr& e) {
    switch (e.kind) {
      case ExprKind::Call: return "function call";
      case ExprKind::Int:
      case ExprKind::Float:
      case ExprKind::String: return "literal";
      case ExprKind::Bool: return e.bool_value ? "True" : "False";
      case ExprKind::None: return "None";
      case ExprKind::Ellipsis: return "ellipsis";
      case ExprKind::Compare: return "comparison";
      case ExprKind::Slice: return "slice";
      case ExprKind::Unary:
      case ExprKind::Binary: return "expression";
      default: return nullptr;
    }
  }

  void check_target(const Expr& e, const char* verb) const {
    if (e.kind == ExprKind::Tuple || e.kind == ExprKind::List) {
      for (const ExprPtr& item : e.items) check_target(*item, verb);
      return;
    }
    if (const char* problem = target_problem(e))
      fail(e.column, std::string("cannot ") + verb + " " + problem);
  }

  void check_augmented_target(const Expr& e) const {
    const char* problem = e.kind == ExprKind::Tuple  ? "tuple"
                          : e.kind == ExprKind::List ? "list"
                                                     : target_problem(e);
    if (problem)
      fail(e.column, std::string("'") + problem +
                         "' is an illegal expression for augmented assignment");
  }

  // `a, b` at statement level (either side of `=`): a Tuple that is not
  // parenthesized; a single expression stays itself.
  ExprPtr testlist() {
    ExprPtr first = test();
    if (!at_op(",")) return first;
    Token comma = peek();
    auto tuple = make(ExprKind::Tuple, first->column);
    tuple->items.push_back(std::move(first));
    while (at_op(",")) {
      take();
      const Token& t = peek();
      bool stop = t.kind == Tok::End || t.kind == Tok::Newline ||
                  (t.kind == Tok::Op && (t.text == "=" || is_augassign(t.text)));
      if (stop) break;  // trailing comma: `x = 1,` is the tuple (1,)
      tuple->items.push_back(test());
    }
    return seal(std::move(tuple), comma.column);
  }

  // ---- expressions, lowest precedence first

  ExprPtr test() {  // or
    ExprPtr left = and_test();
    while (at_keyword("or")) {
      Token op = take();
      left = binary(ExprKind::Binary, op, std::move(left), and_test());
    }
    return left;
  }

  ExprPtr and_test() {
    ExprPtr left = not_test();
    while (at_keyword("and")) {
      Token op = take();
      left = binary(ExprKind::Binary, op, std::move(left), not_test());
    }
    return left;
  }

  ExprPtr not_test() {
    if (!at_keyword("not")) return comparison();
    Token op = take();
    Nest nest(*this, op.column);
    auto e = make(ExprKind::Unary, op.column);
    e->text = "not";
    e->a = not_test();
    return seal(std::move(e), op.column);
  }

  // Returns the comparison operator at the cursor ("" when none) and how many
  // tokens it spans. `in` and `not in` are Python comparisons outside the language.
  std::string comparison_op(size_t& tokens) {
    const Token& t = peek();
    tokens = 1;
    if (t.kind == Tok::Op) {
      static const std::unordered_set<std::string> ops = {"==", "!=", "<", "<=", ">", ">="};
      return ops.count(t.text) ? t.text : "";
    }
    if (t.kind != Tok::Keyword) return "";
    if (t.text == "is") {
      if (at_keyword("not", 1)) {
        tokens = 2;
        return "is not";
      }
      return "is";
    }
    if (t.text == "in") fail(t.column, "'in' is not supported in a scenario statement");
    if (t.text == "not" && at_keyword("in", 1))
      fail(t.column, "'not in' is not supported in a scenario statement");
    return "";
  }

  ExprPtr comparison() {
    ExprPtr left = arith();
    size_t tokens = 0;
    std::string op = comparison_op(tokens);
    if (op.empty()) return left;
    Token first = take();
    if (tokens == 2) take();
    Token as_op = first;
    as_op.text = op;
    ExprPtr e = binary(ExprKind::Compare, as_op, std::move(left), arith());
    if (!comparison_op(tokens).empty())
      fail(peek().column,
           "chained comparisons are not supported (write 'a < b and b < c' instead of "
           "'a < b < c')");
    return e;
  }

  ExprPtr arith() {
    ExprPtr left = term();
    while (at_op("+") || at_op("-")) {
      Token op = take();
      left = binary(ExprKind::Binary, op, std::move(left), term());
    }
    return left;
  }

  ExprPtr term() {
    ExprPtr left = factor();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%") || at_op("@")) {
      Token op = take();
      left = binary(ExprKind::Binary, op, std::move(left), factor());
    }
    return left;
  }

  ExprPtr factor() {  // unary - and +
    if (!at_op("-") && !at_op("+")) return power();
    Token op = take();
    Nest nest(*this, op.column);
    auto e = make(ExprKind::Unary, op.column);
    e->text = op.text;
    e->a = factor();
    return seal(std::move(e), op.column);
  }

  ExprPtr power() {
    ExprPtr base = primary();
    if (!at_op("**")) return base;
    Token op = take();
    Nest nest(*this, op.column);
    // The exponent is a unary expression: `2 ** -1`, and `a ** b ** c` is right-assoc.
    return binary(ExprKind::Binary, op, std::move(base), factor());
  }

  ExprPtr primary() {
    ExprPtr e = atom();
    for (;;) {
      if (at_op(".")) {
        Token dot = take();
        const Token& name = peek();
        if (name.kind != Tok::Name) unexpected(name, "an attribute name after '.'");
        auto attr = make(ExprKind::Attribute, e->column);
        attr->text = take().text;
        attr->a = std::move(e);
        e = seal(std::move(attr), dot.column);
      } else if (at_op("(")) {
        e = call(std::move(e));
      } else if (at_op("[")) {
        e = subscript(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr call(ExprPtr callee) {
    Token open = take();
    Nest nest(*this, open.column);
    auto e = make(ExprKind::Call, callee->column);
    e->a = std::move(callee);
    while (!at_op(")")) {
      closed_before_end(")", open.column);
      if (peek().kind == Tok::Name && at_op("=", 1)) {
        Token name = take();
        take();  // '='
        for (const Keyword& kw : e->keywords)
          if (kw.name == name.text)
            fail(name.column, "keyword argument repeated: '" + name.text + "'");
        Keyword kw;
        kw.name = name.text;
        kw.column = name.column;
        kw.value = test();
        e->keywords.push_back(std::move(kw));
      } else {
        ExprPtr arg = test();
        if (!e->keywords.empty())
          fail(arg->column, "positional argument follows keyword argument");
        if (at_op("="))
          fail(peek().column,
               "unexpected '=' — a keyword argument needs a plain name before '=' (did you "
               "mean '=='?)");
        e->items.push_back(std::move(arg));
      }
      if (!at_op(",")) break;
      take();
    }
    expect_close(")", open.column, "',' or ')'");
    return seal(std::move(e), open.column);
  }

  ExprPtr subscript(ExprPtr object) {
    Token open = take();
    Nest nest(*this, open.column);
    auto e = make(ExprKind::Subscript, object->column);
    e->a = std::move(object);
    if (at_op("]")) unexpected(peek(), "an index or a slice");
    for (;;) {
      closed_before_end("]", open.column);
      e->items.push_back(subscript_item());
      if (!at_op(",")) break;
      take();
      e->tuple_index = true;
      if (at_op("]")) break;
    }
    expect_close("]", open.column, "',' or ']'");
    return seal(std::move(e), open.column);
  }

  // One comma-separated part of `x[...]`: an expression or a slice `a:b:c`.
  ExprPtr subscript_item() {
    ExprPtr start;
    if (!at_op(":")) {
      start = test();
      if (!at_op(":")) return start;
    }
    Token colon = take();
    auto slice = make(ExprKind::Slice, start ? start->column : colon.column);
    slice->a = std::move(start);
    auto part_follows = [&] {
      return !at_op(":") && !at_op(",") && !at_op("]") && peek().kind != Tok::End;
    };
    if (part_follows()) slice->b = test();
    if (at_op(":")) {
      take();
      if (part_follows()) slice->c = test();
    }
    return seal(std::move(slice), colon.column);
  }

  ExprPtr atom() {
    const Token& t = peek();
    const int t_column = t.column;  // seal() takes the pointer, so read it first
    switch (t.kind) {
      case Tok::Name: {
        auto e = make(ExprKind::Name, t.column);
        e->text = take().text;
        return seal(std::move(e), t_column);
      }
      case Tok::Int: {
        auto e = make(ExprKind::Int, t.column);
        e->int_value = take().int_value;
        return seal(std::move(e), t_column);
      }
      case Tok::Float: {
        auto e = make(ExprKind::Float, t.column);
        e->float_value = take().float_value;
        return seal(std::move(e), t_column);
      }
      case Tok::String: {
        auto e = make(ExprKind::String, t.column);
        // Adjacent literals concatenate, as in Python: 'a' "b" is 'ab'.
        while (peek().kind == Tok::String) e->text += take().text;
        return seal(std::move(e), t_column);
      }
      case Tok::Keyword: {
        if (t.text == "True" || t.text == "False") {
          auto e = make(ExprKind::Bool, t.column);
          e->bool_value = take().text == "True";
          return seal(std::move(e), t_column);
        }
        if (t.text == "None") {
          auto e = make(ExprKind::None, t.column);
          take();
          return seal(std::move(e), t_column);
        }
        break;
      }
      case Tok::Op: {
        if (t.text == "(") return parenthesized();
        if (t.text == "[") return list();
        if (t.text == "...") {
          auto e = make(ExprKind::Ellipsis, t.column);
          take();
          return seal(std::move(e), t_column);
        }
        break;
      }
      default: break;
    }
    unexpected(t, "an expression");
  }

  // `(e)` is e marked parenthesized, with the column of '('; `()`, `(a,)` and
  // `(a, b)` are tuples.
  ExprPtr parenthesized() {
    Token open = take();
    Nest nest(*this, open.column);
    if (at_op(")")) {
      take();
      auto e = make(ExprKind::Tuple, open.column);
      e->parenthesized = true;
      return seal(std::move(e), open.column);
    }
    closed_before_end(")", open.column);
    ExprPtr first = test();
    if (at_op(",")) {
      auto tuple = make(ExprKind::Tuple, open.column);
      tuple->items.push_back(std::move(first));
      while (at_op(",")) {
        take();
        if (at_op(")")) break;
        closed_before_end(")", open.column);
        tuple->items.push_back(test());
      }
      first = seal(std::move(tuple), open.column);
    }
    expect_close(")", open.column, "',' or ')'");
    first->parenthesized = true;
    first->column = open.column;
    return first;
  }

  ExprPtr list() {
    Token open = take();
    Nest nest(*this, open.column);
    auto e = make(ExprKind::List, open.column);
    while (!at_op("]")) {
      closed_before_end("]", open.column);
      e->items.push_back(test());
      if (!at_op(",")) break;
      take();
    }
    expect_close("]", open.column, "',' or ']'");
    return seal(std::move(e), open.column);
  }
};

// ---------------------------------------------------------------------------
// to_source

// Binding strength, Python's order: a child whose strength is below what its
// position needs gets parentheses.
enum Prec { kOr = 1, kAnd, kNot, kCompare, kArith, kTerm, kUnary, kPower, kAtom };

int binary_prec(const std::string& op) {
  if (op == "or") return kOr;
  if (op == "and") return kAnd;
  if (op == "+" || op == "-") return kArith;
  if (op == "**") return kPower;
  return kTerm;  // * / // % @
}

int prec(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Unary: return e.text == "not" ? kNot : kUnary;
    case ExprKind::Binary: return binary_prec(e.text);
    case ExprKind::Compare: return kCompare;
    case ExprKind::Slice: return 0;
    // A negative literal (never produced by the parser, which builds unary minus)
    // renders with a '-' and so binds like unary minus.
    case ExprKind::Int: return e.int_value < 0 ? kUnary : kAtom;
    case ExprKind::Float:
      return std::signbit(e.float_value) && !std::isnan(e.float_value) ? kUnary : kAtom;
    default: return kAtom;  // tuples always carry their own parentheses
  }
}

// Python's repr of a float: the shortest digits that read back to the same
// double, fixed notation for 1e-4 <= |v| < 1e16, else d.ddde±XX.
std::string float_repr(double v) {
  if (std::isnan(v)) return "float('nan')";
  if (std::isinf(v)) return v > 0 ? "1e309" : "-1e309";  // what Python reads as inf
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  size_t epos = s.find('e');
  int exp = std::atoi(s.c_str() + epos + 1);
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (s[i] != '.') digits += s[i];
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    std::string e = std::to_string(std::abs(exp));
    out += std::string("e") + (exp < 0 ? "-" : "+") + (e.size() < 2 ? "0" : "") + e;
  } else if (exp >= 0) {
    size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() > int_len)
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    else
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
  } else {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  }
  return sign + out;
}

std::string string_repr(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7F) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", u);
          out += hex;
        } else {
          out += c;  // printable ASCII and UTF-8 bytes pass through
        }
    }
  }
  return out + "'";
}

void emit(const Expr* e, std::string& out);

void emit_operand(const Expr* e, int min_prec, std::string& out) {
  bool wrap = e && prec(*e) < min_prec;
  if (wrap) out += '(';
  emit(e, out);
  if (wrap) out += ')';
}

void emit_list(const std::vector<ExprPtr>& items, std::string& out) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    emit_operand(items[i].get(), kOr, out);
  }
}

void emit(const Expr* e, std::string& out) {
  if (!e) {
    out += "<missing>";  // only for hand-built trees; the parser never leaves a hole
    return;
  }
  switch (e->kind) {
    case ExprKind::Name: out += e->text; break;
    case ExprKind::Int: out += std::to_string(e->int_value); break;
    case ExprKind::Float: out += float_repr(e->float_value); break;
    case ExprKind::Bool: out += e->bool_value ? "True" : "False"; break;
    case ExprKind::None: out += "None"; break;
    case ExprKind::String: out += string_repr(e->text); break;
    case ExprKind::Ellipsis: out += "..."; break;
    case ExprKind::Tuple:
      out += '(';
      emit_list(e->items, out);
      if (e->items.size() == 1) out += ',';
      out += ')';
      break;
    case ExprKind::List:
      out += '[';
      emit_list(e->items, out);
      out += ']';
      break;
    case ExprKind::Unary:
      if (e->text == "not") {
        out += "not ";
        emit_operand(e->a.get(), kNot, out);
      } else {
        out += e->text;
        emit_operand(e->a.get(), kUnary, out);
      }
      break;
    case ExprKind::Binary: {
      int p = binary_prec(e->text);
      // Left-associative operators need a tighter right operand; `**` is
      // right-associative and its right operand is a unary expression.
      int left_min = p == kPower ? kAtom : p;
      int right_min = p == kPower ? kUnary : p + 1;
      emit_operand(e->a.get(), left_min, out);
      out += " " + e->text + " ";
      emit_operand(e->b.get(), right_min, out);
      break;
    }
    case ExprKind::Compare:
      // Both sides bind tighter than a comparison: chains do not exist here.
      emit_operand(e->a.get(), kArith, out);
      out += " " + e->text + " ";
      emit_operand(e->b.get(), kArith, out);
      break;
    case ExprKind::Attribute:
    case ExprKind::Call:
    case ExprKind::Subscript: {
      const Expr* obj = e->a.get();
      // `1.real` would lex as the float `1.` followed by a name.
      bool wrap = obj && (prec(*obj) < kAtom || obj->kind == ExprKind::Int);
      if (wrap) out += '(';
      emit(obj, out);
      if (wrap) out += ')';
      if (e->kind == ExprKind::Attribute) {
        out += "." + e->text;
      } else if (e->kind == ExprKind::Call) {
        out += '(';
        emit_list(e->items, out);
        for (size_t i = 0; i < e->keywords.size(); ++i) {
          if (i || !e->items.empty()) out += ", ";
          out += e->keywords[i].name + "=";
          emit_operand(e->keywords[i].value.get(), kOr, out);
        }
        out += ')';
      } else {
        out += '[';
        for (size_t i = 0; i < e->items.size(); ++i) {
          if (i) out += ", ";
          emit(e->items[i].get(), out);  // a Slice renders itself; the rest are full exprs
        }
        if (e->tuple_index && e->items.size() == 1) out += ',';  // x[a,]: the one-item tuple
        out += ']';
      }
      break;
    }
    case ExprKind::Slice:
      if (e->a) emit_operand(e->a.get(), kOr, out);
      out += ':';
      if (e->b) emit_operand(e->b.get(), kOr, out);
      if (e->c) {
        out += ':';
        emit_operand(e->c.get(), kOr, out);
      }
      break;
  }
}

}  // namespace

Stmt parse_statement(const std::string& source) { return Parser(source).statement(); }

std::string to_source(const Expr& e) {
  std::string out;
  emit(&e, out);
  return out;
}

}  // namespace agtrace::syntax
