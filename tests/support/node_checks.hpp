// Shared by the fidelity tests: read a node's name, edges and saved values the way the
// tests compare them with PyTorch's `type(n).__name__`, `next_functions` and `dir(n)`.
#pragma once
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "autograd/node.hpp"
#include "errors.hpp"

namespace agtrace::test {

using Names = std::vector<std::string>;

inline autograd::Node& fn(const Tensor& t) {
  REQUIRE(t->grad_fn != nullptr);
  return *t->grad_fn;
}

// Saved attribute names in order, without the `_saved_` prefix.
inline Names saved_names(const autograd::Node& n) {
  Names out;
  for (const auto& e : n.saved) out.push_back(e.name);
  return out;
}

// next_functions as class names, "None" for an edge to nothing.
inline Names next_names(const autograd::Node& n) {
  Names out;
  for (const auto& e : n.next) out.push_back(e.fn ? e.fn->name : "None");
  return out;
}

// Whether a saved tensor attribute holds a tensor (false: it reads as None).
inline bool defined(autograd::Node& n, const std::string& attr) {
  const auto* e = n.find(attr);
  REQUIRE(e != nullptr);
  REQUIRE(e->is_tensor);
  return e->var.defined;
}

// A non-tensor saved attribute in Python's repr ("(2, 3)", "18446744073709551615").
inline std::string attr(const autograd::Node& n, const std::string& name) {
  const auto* e = n.find(name);
  REQUIRE(e != nullptr);
  REQUIRE_FALSE(e->is_tensor);
  REQUIRE(e->attr != nullptr);
  return autograd::attr_repr(*e->attr);
}

// The ScenarioError that f raises (fails the test if it raises none).
inline ScenarioError raised_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ScenarioError& e) {
    return e;
  }
  FAIL("no error was raised");
  return ScenarioError("none", "");
}

}  // namespace agtrace::test
