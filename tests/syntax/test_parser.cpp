// Tests of the scenario statement parser and of to_source (lib/syntax).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "errors.hpp"
#include "syntax/ast.hpp"

using agtrace::InputError;
using namespace agtrace::syntax;

namespace {

ExprPtr expr(const std::string& source) {
  Stmt st = parse_statement(source);
  REQUIRE(st.kind == StmtKind::ExprStmt);
  return std::move(st.value);
}

std::string rendered(const std::string& source) { return to_source(*expr(source)); }

InputError error_of(const std::string& source) {
  try {
    parse_statement(source);
  } catch (const InputError& e) {
    return e;
  }
  FAIL("no syntax error for: " << source);
  throw std::logic_error("unreachable");
}

// Every syntax error carries kind, column, the statement text and a detail.
void check_error(const std::string& source, int column, const std::string& fragment) {
  INFO("statement: " << source);
  InputError e = error_of(source);
  INFO("detail: " << e.detail);
  CHECK(e.kind == "syntax");
  CHECK(e.column == column);
  CHECK(e.source == source);
  CHECK_THAT(e.detail, Catch::Matchers::Contains(fragment));
}

// Structural equality, ignoring columns and the parenthesized flag (which
// to_source does not preserve).
bool same_tree(const Expr* x, const Expr* y) {
  if (!x || !y) return x == y;
  if (x->kind != y->kind || x->text != y->text || x->int_value != y->int_value ||
      x->bool_value != y->bool_value || x->items.size() != y->items.size() ||
      x->keywords.size() != y->keywords.size())
    return false;
  if (!(x->float_value == y->float_value ||
        (std::isnan(x->float_value) && std::isnan(y->float_value))))
    return false;
  for (size_t i = 0; i < x->items.size(); ++i)
    if (!same_tree(x->items[i].get(), y->items[i].get())) return false;
  for (size_t i = 0; i < x->keywords.size(); ++i)
    if (x->keywords[i].name != y->keywords[i].name ||
        !same_tree(x->keywords[i].value.get(), y->keywords[i].value.get()))
      return false;
  return same_tree(x->a.get(), y->a.get()) && same_tree(x->b.get(), y->b.get()) &&
         same_tree(x->c.get(), y->c.get());
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("precedence follows Python", "[syntax]") {
  SECTION("-x ** 2 is -(x ** 2)") {
    auto e = expr("-x ** 2");
    REQUIRE(e->kind == ExprKind::Unary);
    CHECK(e->text == "-");
    REQUIRE(e->a->kind == ExprKind::Binary);
    CHECK(e->a->text == "**");
    CHECK(e->a->a->text == "x");
    CHECK(e->a->b->int_value == 2);
    CHECK(to_source(*e) == "-x ** 2");
  }
  SECTION("a + b * c") {
    auto e = expr("a + b * c");
    REQUIRE(e->kind == ExprKind::Binary);
    CHECK(e->text == "+");
    CHECK(e->a->text == "a");
    CHECK(e->b->kind == ExprKind::Binary);
    CHECK(e->b->text == "*");
  }
  SECTION("x @ W + b") {
    auto e = expr("x @ W + b");
    CHECK(e->text == "+");
    CHECK(e->a->text == "@");
    CHECK(e->a->a->text == "x");
    CHECK(e->a->b->text == "W");
    CHECK(e->b->text == "b");
  }
  SECTION("(x @ W + b).relu().sum()") {
    auto e = expr("(x @ W + b).relu().sum()");
    REQUIRE(e->kind == ExprKind::Call);
    CHECK(e->items.empty());
    REQUIRE(e->a->kind == ExprKind::Attribute);
    CHECK(e->a->text == "sum");
    const Expr& relu_call = *e->a->a;
    REQUIRE(relu_call.kind == ExprKind::Call);
    CHECK(relu_call.a->text == "relu");
    const Expr& inner = *relu_call.a->a;
    CHECK(inner.kind == ExprKind::Binary);
    CHECK(inner.text == "+");
    CHECK(inner.parenthesized);
    CHECK(inner.column == 1);
    CHECK(to_source(*e) == "(x @ W + b).relu().sum()");
  }
  SECTION("** is right-associative and takes a unary exponent") {
    auto e = expr("a ** b ** c");
    CHECK(e->a->text == "a");
    CHECK(e->b->text == "**");
    auto n = expr("2 ** -1");
    CHECK(n->text == "**");
    CHECK(n->b->kind == ExprKind::Unary);
    CHECK(n->b->a->int_value == 1);
  }
  SECTION("left-associative chains") {
    auto e = expr("a - b - c");
    CHECK(e->a->text == "-");
    CHECK(e->b->text == "c");
    auto t = expr("a // b % c * d / e @ f");
    CHECK(t->text == "@");
    CHECK(t->a->text == "/");
  }
  SECTION("boolean operators: not > and > or") {
    auto e = expr("not a and b or c");
    CHECK(e->text == "or");
    CHECK(e->a->text == "and");
    CHECK(e->a->a->kind == ExprKind::Unary);
    CHECK(e->a->a->text == "not");
    auto n = expr("not a == b");
    CHECK(n->kind == ExprKind::Unary);
    CHECK(n->a->kind == ExprKind::Compare);
  }
  SECTION("unary minus binds tighter than *") {
    auto e = expr("-a * b");
    CHECK(e->text == "*");
    CHECK(e->a->kind == ExprKind::Unary);
    auto p = expr("+a");
    CHECK(p->kind == ExprKind::Unary);
    CHECK(p->text == "+");
  }
}

TEST_CASE("comparisons and identity", "[syntax]") {
  for (const char* op : {"==", "!=", "<", "<=", ">", ">="}) {
    auto e = expr(std::string("a ") + op + " b + 1");
    REQUIRE(e->kind == ExprKind::Compare);
    CHECK(e->text == op);
    CHECK(e->b->text == "+");
  }
  auto is_not = expr("x.grad is not None");
  REQUIRE(is_not->kind == ExprKind::Compare);
  CHECK(is_not->text == "is not");
  CHECK(is_not->a->kind == ExprKind::Attribute);
  CHECK(is_not->b->kind == ExprKind::None);
  CHECK(to_source(*is_not) == "x.grad is not None");

  auto is = expr("a is b");
  CHECK(is->text == "is");

  auto paren_chain = expr("(a < b) == c");  // not a chain: the left side is bracketed
  CHECK(paren_chain->text == "==");
  CHECK(paren_chain->a->text == "<");
  CHECK(to_source(*paren_chain) == "(a < b) == c");
  CHECK(rendered("a == (b < c)") == "a == (b < c)");
}

TEST_CASE("calls with positional and keyword arguments", "[syntax]") {
  auto e = expr("torch.cat([a, b], dim=0)");
  REQUIRE(e->kind == ExprKind::Call);
  CHECK(e->a->kind == ExprKind::Attribute);
  CHECK(e->a->text == "cat");
  CHECK(e->a->a->text == "torch");
  REQUIRE(e->items.size() == 1);
  CHECK(e->items[0]->kind == ExprKind::List);
  CHECK(e->items[0]->items.size() == 2);
  REQUIRE(e->keywords.size() == 1);
  CHECK(e->keywords[0].name == "dim");
  CHECK(e->keywords[0].value->int_value == 0);
  CHECK(e->keywords[0].column == 19);

  auto k = expr("x.sum(dim = 1 , keepdim=True , )");
  REQUIRE(k->keywords.size() == 2);
  CHECK(k->keywords[1].name == "keepdim");
  CHECK(k->keywords[1].value->kind == ExprKind::Bool);
  CHECK(k->keywords[1].value->bool_value);
  CHECK(to_source(*k) == "x.sum(dim=1, keepdim=True)");

  auto empty = expr("y.backward()");
  CHECK(empty->items.empty());
  CHECK(empty->keywords.empty());

  auto cmp_arg = expr("f(a == b)");  // '==' is not a keyword argument
  CHECK(cmp_arg->items.size() == 1);
  CHECK(cmp_arg->keywords.empty());

  CHECK(rendered("print( 'a' ,x.shape,None,True,... )") ==
        "print('a', x.shape, None, True, ...)");
  CHECK(rendered("f()()") == "f()()");
}

TEST_CASE("subscripts and slices", "[syntax]") {
  SECTION("x[0]") {
    auto e = expr("x[0]");
    REQUIRE(e->kind == ExprKind::Subscript);
    REQUIRE(e->items.size() == 1);
    CHECK(e->items[0]->kind == ExprKind::Int);
  }
  SECTION("x[:, 1:3]") {
    auto e = expr("x[:, 1:3]");
    REQUIRE(e->items.size() == 2);
    const Expr& all = *e->items[0];
    CHECK(all.kind == ExprKind::Slice);
    CHECK(!all.a);
    CHECK(!all.b);
    CHECK(!all.c);
    CHECK(all.column == 3);
    const Expr& range = *e->items[1];
    CHECK(range.kind == ExprKind::Slice);
    CHECK(range.a->int_value == 1);
    CHECK(range.b->int_value == 3);
    CHECK(!range.c);
    CHECK(range.column == 6);
    CHECK(to_source(*e) == "x[:, 1:3]");
  }
  SECTION("x[a,] is a one-item tuple of indices, x[a] is not") {
    auto with_comma = expr("x[[0, 1],]");
    CHECK(with_comma->tuple_index);
    CHECK(to_source(*with_comma) == "x[[0, 1],]");
    CHECK_FALSE(expr("x[[0, 1]]")->tuple_index);
    CHECK(expr("x[0, 1]")->tuple_index);
  }
  SECTION("x[..., -1]") {
    auto e = expr("x[..., -1]");
    REQUIRE(e->items.size() == 2);
    CHECK(e->items[0]->kind == ExprKind::Ellipsis);
    CHECK(e->items[1]->kind == ExprKind::Unary);
    CHECK(to_source(*e) == "x[..., -1]");
  }
  SECTION("x[::2]") {
    auto e = expr("x[::2]");
    const Expr& s = *e->items[0];
    CHECK(s.kind == ExprKind::Slice);
    CHECK(!s.a);
    CHECK(!s.b);
    CHECK(s.c->int_value == 2);
    CHECK(to_source(*e) == "x[::2]");
  }
  SECTION("every other slice form") {
    auto from = expr("x[1:]");
    CHECK(from->items[0]->a->int_value == 1);
    CHECK(!from->items[0]->b);
    auto to = expr("x[:2]");
    CHECK(!to->items[0]->a);
    CHECK(to->items[0]->b->int_value == 2);
    auto step = expr("x[1:5:2]");
    CHECK(step->items[0]->c->int_value == 2);
    auto empty_step = expr("x[1::]");
    CHECK(empty_step->items[0]->a->int_value == 1);
    CHECK(!empty_step->items[0]->b);
    CHECK(!empty_step->items[0]->c);
    CHECK(rendered("x[1:]") == "x[1:]");
    CHECK(rendered("x[:2]") == "x[:2]");
    CHECK(rendered("x[1:5:2]") == "x[1:5:2]");
    CHECK(rendered("x[:]") == "x[:]");
    CHECK(rendered("x[::]") == "x[:]");
    CHECK(rendered("x[a:b, ::-1]") == "x[a:b, ::-1]");
    CHECK(rendered("x[n - 1:]") == "x[n - 1:]");
  }
  SECTION("x[idx] and multi-index") {
    auto e = expr("x[idx]");
    CHECK(e->items[0]->kind == ExprKind::Name);
    auto m = expr("x[0, 1]");
    CHECK(m->items.size() == 2);
    auto t = expr("x[0,]");  // trailing comma: still one item
    CHECK(t->items.size() == 1);
    auto tup = expr("x[(0, 1)]");  // an explicit tuple stays one Tuple item
    REQUIRE(tup->items.size() == 1);
    CHECK(tup->items[0]->kind == ExprKind::Tuple);
  }
}

TEST_CASE("atoms: names, literals, tuples and lists", "[syntax]") {
  CHECK(expr("True")->kind == ExprKind::Bool);
  CHECK(!expr("False")->bool_value);
  CHECK(expr("None")->kind == ExprKind::None);
  CHECK(expr("...")->kind == ExprKind::Ellipsis);
  CHECK(expr("_private9")->text == "_private9");
  CHECK(expr("match")->kind == ExprKind::Name);  // soft keywords are names

  auto empty = expr("()");
  CHECK(empty->kind == ExprKind::Tuple);
  CHECK(empty->items.empty());
  CHECK(empty->parenthesized);
  auto one = expr("(a,)");
  CHECK(one->kind == ExprKind::Tuple);
  CHECK(one->items.size() == 1);
  CHECK(to_source(*one) == "(a,)");
  auto two = expr("(a, b)");
  CHECK(two->items.size() == 2);
  auto grouped = expr("(a)");
  CHECK(grouped->kind == ExprKind::Name);
  CHECK(grouped->parenthesized);
  auto list = expr("[1, 2.5, 'a',]");
  CHECK(list->kind == ExprKind::List);
  CHECK(list->items.size() == 3);
  CHECK(expr("[]")->items.empty());
  CHECK(rendered("[ ]") == "[]");
  CHECK(rendered("( )") == "()");
}

TEST_CASE("numbers", "[syntax]") {
  CHECK(expr("0")->int_value == 0);
  CHECK(expr("00")->int_value == 0);
  CHECK(expr("1_000_000")->int_value == 1000000);
  CHECK(expr("9223372036854775807")->int_value == INT64_MAX);
  CHECK(expr("0x1F")->int_value == 31);
  CHECK(expr("0o17")->int_value == 15);
  CHECK(expr("0b1_01")->int_value == 5);

  auto f = [](const std::string& s) {
    auto e = expr(s);
    REQUIRE(e->kind == ExprKind::Float);
    return e->float_value;
  };
  CHECK(f("1.0") == 1.0);
  CHECK(f("1e-5") == 1e-5);
  CHECK(f(".5") == 0.5);
  CHECK(f("5.") == 5.0);
  CHECK(f("1_000.5") == 1000.5);
  CHECK(f("1E+3") == 1000.0);
  CHECK(f("2.5e-3") == 0.0025);
  CHECK(std::isinf(f("1e400")));
  CHECK(f("1e-400") == 0.0);

  // Python's repr: shortest round-trip digits, '.0' on integral values.
  CHECK(rendered("1.0") == "1.0");
  CHECK(rendered("2.") == "2.0");
  CHECK(rendered("1e-5") == "1e-05");
  CHECK(rendered("0.0001") == "0.0001");
  CHECK(rendered(".5") == "0.5");
  CHECK(rendered("0.1") == "0.1");
  CHECK(rendered("1_000.5") == "1000.5");
  CHECK(rendered("1e16") == "1e+16");
  CHECK(rendered("1e15") == "1000000000000000.0");
  CHECK(rendered("123456789012345678.0") == "1.2345678901234568e+17");
  CHECK(rendered("1.5e300") == "1.5e+300");
  CHECK(rendered("0.30000000000000004") == "0.30000000000000004");
  CHECK(rendered("0.0") == "0.0");
  CHECK(rendered("1e400") == "1e309");
  CHECK(rendered("0x10") == "16");
  CHECK(rendered("(1).real") == "(1).real");

  Expr neg;
  neg.kind = ExprKind::Float;
  neg.float_value = -0.5;
  CHECK(to_source(neg) == "-0.5");
}

TEST_CASE("strings and escapes", "[syntax]") {
  CHECK(expr("'abc'")->text == "abc");
  CHECK(expr("\"abc\"")->text == "abc");
  CHECK(expr("''")->text.empty());
  CHECK(expr(R"('it\'s')")->text == "it's");
  CHECK(expr(R"("say \"hi\"")")->text == "say \"hi\"");
  CHECK(expr(R"('a\\b')")->text == "a\\b");
  CHECK(expr(R"('line\nnext\ttab')")->text == "line\nnext\ttab");
  CHECK(expr(R"('\x41')")->text == "A");
  CHECK(expr("'a' \"b\"")->text == "ab");  // adjacent literals concatenate
  CHECK(expr("'h\xc3\xa9'")->text == "h\xc3\xa9");  // UTF-8 inside strings is fine
  CHECK(expr("\"it's\"")->text == "it's");

  CHECK(rendered(R"("it's")") == R"('it\'s')");
  CHECK(rendered(R"('a\\b\n\t')") == R"('a\\b\n\t')");
  CHECK(rendered("\"say \\\"hi\\\"\"") == "'say \"hi\"'");
  CHECK(rendered(R"('\x01')") == R"('\x01')");
}

TEST_CASE("statements", "[syntax]") {
  SECTION("name = expr") {
    Stmt st = parse_statement("y = (x @ W + b).relu().sum()");
    CHECK(st.kind == StmtKind::Assign);
    CHECK(st.target->kind == ExprKind::Name);
    CHECK(st.target->text == "y");
    CHECK(st.target->column == 1);
    CHECK(st.value->kind == ExprKind::Call);
    CHECK(st.value->column == 5);
  }
  SECTION("tuple targets") {
    Stmt bare = parse_statement("a, b = x.chunk(2)");
    CHECK(bare.kind == StmtKind::Assign);
    REQUIRE(bare.target->kind == ExprKind::Tuple);
    CHECK(!bare.target->parenthesized);
    CHECK(bare.target->items.size() == 2);
    CHECK(bare.target->items[1]->text == "b");

    Stmt one = parse_statement("(g,) = torch.autograd.grad(y, x)");
    REQUIRE(one.target->kind == ExprKind::Tuple);
    CHECK(one.target->parenthesized);
    CHECK(one.target->items.size() == 1);

    Stmt list = parse_statement("[a, b] = pair");
    CHECK(list.target->kind == ExprKind::List);

    Stmt trailing = parse_statement("a, = pair");
    CHECK(trailing.target->kind == ExprKind::Tuple);
    CHECK(trailing.target->items.size() == 1);
  }
  SECTION("attribute and subscript targets") {
    Stmt st = parse_statement("x.grad = None");
    CHECK(st.kind == StmtKind::Assign);
    REQUIRE(st.target->kind == ExprKind::Attribute);
    CHECK(st.target->text == "grad");
    CHECK(st.value->kind == ExprKind::None);
    Stmt sub = parse_statement("x[0] = 1");
    CHECK(sub.target->kind == ExprKind::Subscript);
  }
  SECTION("bare tuple on the right") {
    Stmt st = parse_statement("t = a, b");
    REQUIRE(st.value->kind == ExprKind::Tuple);
    CHECK(!st.value->parenthesized);
    CHECK(st.value->items.size() == 2);
    Stmt one = parse_statement("t = 1,");
    CHECK(one.value->kind == ExprKind::Tuple);
    CHECK(one.value->items.size() == 1);
  }
  SECTION("del") {
    Stmt st = parse_statement("del a, b");
    CHECK(st.kind == StmtKind::Del);
    REQUIRE(st.targets.size() == 2);
    CHECK(st.targets[0]->text == "a");
    CHECK(st.targets[1]->text == "b");
    Stmt grad = parse_statement("del x.grad");
    REQUIRE(grad.targets.size() == 1);
    CHECK(grad.targets[0]->kind == ExprKind::Attribute);
    Stmt nested = parse_statement("del (a, b), c,");  // tuples are flattened
    CHECK(nested.targets.size() == 3);
  }
  SECTION("augmented assignment") {
    struct Case {
      const char* source;
      const char* op;
    };
    for (Case c : {Case{"x += 1", "+"}, Case{"x -= lr * g", "-"}, Case{"x *= 2", "*"},
                   Case{"x /= 2", "/"}, Case{"h @= W", "@"}, Case{"x **= 2", "**"},
                   Case{"x.data -= 1", "-"}, Case{"x[0] += 1", "+"}}) {
      Stmt st = parse_statement(c.source);
      CHECK(st.kind == StmtKind::AugAssign);
      CHECK(st.text == c.op);
      CHECK(st.target);
      CHECK(st.value);
    }
  }
  SECTION("expression statements, comments and whitespace") {
    Stmt st = parse_statement("   y.backward()   # go  ");
    CHECK(st.kind == StmtKind::ExprStmt);
    CHECK(st.value->column == 4);
    Stmt multi = parse_statement("y = f(a,\n      b)  # inside brackets a line break is a space");
    CHECK(multi.value->items.size() == 2);
    CHECK(multi.value->items[1]->column == 16);
    Stmt trailing = parse_statement("\ny = 1\n\n# done\n");
    CHECK(trailing.kind == StmtKind::Assign);
    Stmt cont = parse_statement("y = 1 + \\\n 2");
    CHECK(cont.value->text == "+");
  }
  SECTION("columns") {
    auto e = expr("  x @ W");
    CHECK(e->column == 3);
    CHECK(e->a->column == 3);
    CHECK(e->b->column == 7);
    auto c = expr("f(a,  b)");
    CHECK(c->column == 1);
    CHECK(c->items[1]->column == 7);
    auto p = expr("((a + b) * c)");
    CHECK(p->column == 1);
    CHECK(p->a->column == 2);
    CHECK(p->a->parenthesized);
  }
}

TEST_CASE("syntax errors point at the offending column", "[syntax]") {
  check_error("y = (x + ", 9, "expected an expression");
  check_error("y = x +* 2", 8, "unexpected '*'");
  check_error("y = x[1", 8, "expected ']' to close '[' at column 6");
  check_error("y = 'abc", 5, "unterminated string");
  check_error("for i in x", 1, "'for' is not supported in a scenario statement");
  check_error("import torch", 1, "'import' is not supported in a scenario statement");
  check_error("def f(): pass", 1, "'def' is not supported");
  check_error("with torch.no_grad(): y = x", 1, "'with' is not supported");
  check_error("if x: y = 1", 1, "'if' is not supported");
  check_error("y = x if c else d", 7, "'if' is not supported");
  check_error("y = lambda: 1", 5, "'lambda' is not supported");
  check_error("y = [v for v in xs]", 8, "'for' is not supported");
  check_error("y := 3", 3, "':=' is not supported");
  check_error("a = 1; b = 2", 6, "';' is not supported");
  check_error("y = x $ 2", 7, "invalid character '$'");
  check_error("y = x ? 1", 7, "invalid character '?'");
  check_error("y = `x`", 5, "invalid character '`'");
  check_error("y = x \xc3\x97 2", 7, "invalid character");
  check_error("f(a=1, 2)", 8, "positional argument follows keyword argument");
  check_error("f(x, x=1, x=2)", 11, "keyword argument repeated");
  check_error("f(a.b=1)", 6, "keyword argument needs a plain name");
  check_error("1 = x", 1, "cannot assign to literal");
  check_error("f(x) = 3", 1, "cannot assign to function call");
  check_error("y, x + 1 = 3", 4, "cannot assign to expression");
  check_error("True = 1", 1, "cannot assign to True");
  check_error("a, b += 1", 1, "'tuple' is an illegal expression for augmented assignment");
  check_error("del f(x)", 5, "cannot delete function call");
  check_error("a < b < c", 7, "chained comparisons are not supported");
  check_error("x in y", 3, "'in' is not supported");
  check_error("x not in y", 3, "'not in' is not supported");
  check_error("y = a = b", 7, "chained assignment");
  check_error("x //= 2", 3, "augmented assignment '//=' is not supported");
  check_error("y = ~x", 5, "operator '~' is not supported");
  check_error("y = {}", 5, "no dict or set literals");
  check_error("y = f\"a{b}\"", 5, "string prefix 'f' is not supported");
  check_error("y = '''doc'''", 5, "triple-quoted strings are not supported");
  check_error(R"(y = 'a\qb')", 7, "unsupported escape sequence");
  check_error("y = 99999999999999999999", 5, "too large");
  check_error("y = 01", 5, "leading zeros");
  check_error("y = 1abc", 5, "invalid decimal literal");
  check_error("y = 1__0", 5, "invalid decimal literal");
  check_error("y = 1j", 5, "complex");
  check_error("y = x)", 6, "unmatched ')'");
  check_error("y = x.", 7, "expected an attribute name");
  check_error("x.if", 3, "'if' is not supported");
  check_error("y = f(a, b", 11, "expected ')' to close '(' at column 6");
  check_error("y = (1, 2", 10, "expected ')' to close '(' at column 5");
  check_error("y = [1, 2", 10, "expected ']' to close '[' at column 5");
  check_error("y = x.relu(", 12, "expected ')' to close '(' at column 11");
  check_error("y = f(a,", 9, "expected ')' to close '(' at column 6");
  check_error("y = x[1,", 9, "expected ']' to close '[' at column 6");
  check_error("y = (", 6, "expected ')' to close '(' at column 5");
  check_error("y = [", 6, "expected ']' to close '[' at column 5");
  check_error("y = x[", 7, "expected ']' to close '[' at column 6");
  check_error("y = x[]", 7, "expected an index or a slice");
  check_error("y = x y", 7, "unexpected name 'y'");
  check_error("y = ", 4, "expected an expression");
  check_error("a = 1\nb = 2", 6, "line break");
  check_error("y = x +\nz", 8, "line break");
  check_error("print x", 7, "unexpected name 'x'");
  check_error("*a, b = x", 1, "unexpected '*'");
  check_error("", 1, "empty statement");
  check_error("   # just a comment", 1, "empty statement");
}

TEST_CASE("deep nesting is a syntax error, not a crash", "[syntax]") {
  SECTION("10,000 parentheses") {
    std::string s = "y = " + repeat("(", 10000) + "x" + repeat(")", 10000);
    check_error(s, 4 + 201, "nested too deeply");
  }
  SECTION("10,000 unclosed parentheses and brackets") {
    check_error(repeat("(", 10000), 201, "nested too deeply");
    check_error(repeat("[", 10000), 201, "nested too deeply");
    check_error(repeat("f(", 10000), 402, "nested too deeply");
    check_error("x" + repeat("[0", 10000), 402, "nested too deeply");
  }
  SECTION("unary, not and ** chains") {
    check_error(repeat("-", 10000) + "x", 201, "nested too deeply");
    check_error(repeat("not ", 10000) + "x", 801, "nested too deeply");
    check_error("x" + repeat(" ** x", 10000), 1 + 200 * 5 + 2, "nested too deeply");
  }
  SECTION("long left-associative chains make the tree too tall") {
    check_error("x" + repeat(" + 1", 10000), 1 + 199 * 4 + 2, "nested too deeply");
    check_error("x" + repeat(".a", 10000), 1 + 199 * 2 + 1, "nested too deeply");
    check_error("x" + repeat("()", 10000), 1 + 199 * 2 + 1, "nested too deeply");
  }
  SECTION("moderate nesting still parses and renders") {
    std::string s = repeat("(", 150) + "x + 1" + repeat(")", 150) + " * 2";
    CHECK(rendered(s) == "(x + 1) * 2");
    std::string lists = repeat("[", 150) + repeat("]", 150);
    CHECK(rendered(lists) == lists);
    std::string chain = "x" + repeat(" + 1", 150);
    CHECK(rendered(chain) == chain);
  }
}

TEST_CASE("to_source adds only the parentheses precedence needs", "[syntax]") {
  CHECK(rendered("a+b*c") == "a + b * c");
  CHECK(rendered("(a+b)*c") == "(a + b) * c");
  CHECK(rendered("a-(b-c)") == "a - (b - c)");
  CHECK(rendered("(a-b)-c") == "a - b - c");
  CHECK(rendered("a**b**c") == "a ** b ** c");
  CHECK(rendered("(a**b)**c") == "(a ** b) ** c");
  CHECK(rendered("(-x)**2") == "(-x) ** 2");
  CHECK(rendered("2**-1") == "2 ** -1");
  CHECK(rendered("-(a*b)") == "-(a * b)");
  CHECK(rendered("(-a)*b") == "-a * b");
  CHECK(rendered("a*-b") == "a * -b");
  CHECK(rendered("-(-x)") == "--x");
  CHECK(rendered("not (a and b)") == "not (a and b)");
  CHECK(rendered("(a or b) and c") == "(a or b) and c");
  CHECK(rendered("a or (b and c)") == "a or b and c");
  CHECK(rendered("(not a) == b") == "(not a) == b");
  CHECK(rendered("(a + b).sum()") == "(a + b).sum()");
  CHECK(rendered("(-x).abs()") == "(-x).abs()");
  CHECK(rendered("(x)[0]") == "x[0]");
  CHECK(rendered("x @ W + b") == "x @ W + b");
}

TEST_CASE("to_source round-trips", "[syntax]") {
  const char* sources[] = {
      "(x @ W + b).relu().sum()",
      "-x ** 2",
      "(-x) ** 2 + a ** -b ** c",
      "a - (b - c) * (d // e % f) / g @ h",
      "not a and (b or c) or not (d is not None)",
      "x.grad is None",
      "torch.cat([a, b], dim=0).view(2, -1)[:, 1:3]",
      "x[..., -1] + x[::2] - x[1:5:2] * x[:2] / x[1:]",
      "F.cross_entropy(logits, target, reduction='sum', label_smoothing=0.1)",
      "print('it\\'s', \"a\\\\b\\n\", 1e-5, 2., .5, 1_000.5, 1e16, 123456789.123)",
      "((a,), (), [1, [2, (3, 4)]], ...)",
      "x.sum(dim=1, keepdim=True) >= (y - 1) ** 2",
      "(a < b) != (c > d)",
      "h.mul_(2).add_(-0.5)",
      "node.next_functions[0][0].name()",
      "(1).real + 1.5.real",
      "-(-(-x))",
      "x[(0, 1)] + x[idx, 0:n - 1:-1]",
  };
  for (const char* s : sources) {
    INFO("source: " << s);
    ExprPtr first = expr(s);
    std::string once = to_source(*first);
    ExprPtr second = expr(once);
    CHECK(to_source(*second) == once);
    CHECK(same_tree(first.get(), second.get()));
  }
}
