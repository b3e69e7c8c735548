#include "interp/static_check.hpp"

#include "interp/suggest.hpp"
#include "ops/table.hpp"

namespace agtrace::interp {

namespace {

using syntax::Expr;
using syntax::ExprKind;

// `torch.nn.functional.relu` -> "F.relu"; "" when the expression is not a dotted name
// rooted at torch or F.
std::string module_spelling(const Expr& e) {
  if (e.kind == ExprKind::Name) return e.text == "torch" || e.text == "F" ? e.text : "";
  if (e.kind != ExprKind::Attribute || !e.a) return "";
  const std::string base = module_spelling(*e.a);
  if (base.empty()) return "";
  const std::string full = base + "." + e.text;
  return full == "torch.nn.functional" ? "F" : full;
}

std::vector<std::string> spellings_with_prefix(const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& s : ops::all_spellings())
    if (s.rfind(prefix, 0) == 0) out.push_back(s);
  return out;
}

void check_call(const Expr& call, std::vector<UnknownOperation>& out) {
  const Expr& callee = *call.a;
  if (callee.kind != ExprKind::Attribute || !callee.a) return;  // print(...), len(...), names bound at run time
  const std::string module = module_spelling(callee);
  if (!module.empty()) {
    if (!ops::find_op(module)) out.push_back({callee.column, module, suggest(module, ops::all_spellings())});
    return;
  }
  // A method: of a tensor (the op table's Tensor.* spellings) or of a backward node (name()).
  const std::string& name = callee.text;
  if (name == "name" || ops::find_op("Tensor." + name)) return;
  std::vector<std::string> methods;
  for (const std::string& s : spellings_with_prefix("Tensor.")) methods.push_back(s.substr(7));
  const std::string hint = suggest(name, methods);
  out.push_back({callee.column, "Tensor." + name, hint.empty() ? "" : "Tensor." + hint});
}

void visit(const Expr* e, std::vector<UnknownOperation>& out) {
  if (!e) return;
  if (e->kind == ExprKind::Call) check_call(*e, out);
  // The callee itself is not walked as an attribute read (`x.relu` in `x.relu()`), but the
  // receiver is: `a.foo().bar()` checks both calls.
  if (e->kind == ExprKind::Call && e->a && e->a->kind == ExprKind::Attribute)
    visit(e->a->a.get(), out);
  else
    visit(e->a.get(), out);
  visit(e->b.get(), out);
  visit(e->c.get(), out);
  for (const auto& item : e->items) visit(item.get(), out);
  for (const auto& kw : e->keywords) visit(kw.value.get(), out);
}

}  // namespace

std::vector<UnknownOperation> unknown_operations(const syntax::Stmt& stmt) {
  std::vector<UnknownOperation> out;
  visit(stmt.target.get(), out);
  visit(stmt.value.get(), out);
  for (const auto& t : stmt.targets) visit(t.get(), out);
  return out;
}

}  // namespace agtrace::interp
