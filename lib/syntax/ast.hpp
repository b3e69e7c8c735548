// The Python subset a scenario statement is written in (spec: "Statements",
// "Expressions"). One Expr struct with a kind keeps the tree plain and cheap to walk.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace agtrace::syntax {

enum class ExprKind {
  Name,       // text = identifier
  Int,        // int_value
  Float,      // float_value
  Bool,       // bool_value
  None,       // None
  String,     // text = decoded string value
  Tuple,      // items; `(a,)`, `a, b`, `()`
  List,       // items; `[a, b]`
  Unary,      // text = "-", "+", "not"; a = operand
  Binary,     // text = "+", "-", "*", "/", "//", "%", "@", "**", "and", "or"; a, b
  Compare,    // text = "==", "!=", "<", "<=", ">", ">=", "is", "is not"; a, b (no chains)
  Attribute,  // a = object, text = attribute name
  Call,       // a = callee, items = positional args, keywords
  Subscript,  // a = object, items = index expressions (`x[0, 1:3]` gives two items)
  Slice,      // a = start, b = stop, c = step; each may be null (`x[:, ::2]`)
  Ellipsis,   // `...`
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Keyword {
  std::string name;
  ExprPtr value;
  int column = 0;
};

struct Expr {
  ExprKind kind = ExprKind::None;
  int column = 0;  // 1-based column of the expression's first character in the statement
  std::string text;
  int64_t int_value = 0;
  double float_value = 0.0;
  bool bool_value = false;
  std::vector<ExprPtr> items;
  std::vector<Keyword> keywords;
  ExprPtr a, b, c;
  bool parenthesized = false;  // written inside (...) in the source (for `(g,)` vs `g,`)
  // Subscript: written with a comma (`x[a,]`), so Python passes a tuple of indices even when
  // it holds one item (`x[[0, 1],]` differs from `x[[0, 1]]` once the list holds lists).
  bool tuple_index = false;
  // Name: a number the interpreter gives each distinct name of a program, so that reading
  // or binding it does not look the text up every time (-1: not given).
  int name_slot = -1;
  // Attribute: a number the interpreter gives each attribute expression, under which it
  // keeps what `<tensor>.<text>(...)` calls (-1: not given).
  int method_slot = -1;
};

enum class StmtKind {
  Assign,     // target = value; target is Name, Tuple/List of Names, Attribute or Subscript
  AugAssign,  // target op= value; text = "+", "-", "*", "/", "@", "**"
  ExprStmt,   // value evaluated for its effect (calls, print(...))
  Del,        // del targets...
};

struct Stmt {
  StmtKind kind = StmtKind::ExprStmt;
  std::string text;               // AugAssign operator
  ExprPtr target;                 // Assign / AugAssign
  ExprPtr value;                  // Assign / AugAssign / ExprStmt
  std::vector<ExprPtr> targets;   // Del
};

// Parses one statement. Throws agtrace::InputError with kind "syntax", `column`
// set (1-based) and `detail` explaining what was expected; the caller fills in the
// file and statement number.
Stmt parse_statement(const std::string& source);

// Renders an expression back to Python source (normalised spacing). Used by reports
// and by `agtrace export --torch`.
std::string to_source(const Expr& e);

}  // namespace agtrace::syntax
