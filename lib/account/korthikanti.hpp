// Reconciliation of a transformer layer's saved bytes with Korthikanti et al. 2022,
// "Reducing Activation Recomputation in Large Transformer Models", section 4.1: activation
// memory per layer = sbh(34 + 5as/h) bytes, with 2-byte activations and 1-byte dropout
// masks, no parallelism. Each saved value of the run gets a role (what the paper calls it);
// per role the report sets the paper's terms beside the bytes agtrace recorded and explains
// every difference from the run's own tensors (dtype, a mask saved in the input's dtype,
// values the paper does not count).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "interp/result.hpp"

namespace agtrace {

struct KorthikantiShape {
  int64_t s = 0, b = 0, h = 0, a = 0;
};

struct ReconcileDifference {
  std::string reason;
  int64_t bytes = 0;
};

struct ReconcileRole {
  std::string role;                 // layernorm_input, linear_input, attention_bmm_operand, ...
  std::vector<std::string> terms;   // the paper's terms, e.g. "QKV projection input 2sbh"
  int64_t formula_bytes = 0;        // the paper's bytes for those terms (0: not counted)
  int64_t run_bytes = 0;            // bytes of the saved values agtrace recorded in this role
  int saved_count = 0;
  struct Value {
    std::string what;               // "SoftmaxBackward0._saved_result"
    int64_t bytes = 0;
    std::string dtype;              // "" when its node was not reached by a walk
    int statement = -1;             // where it was saved
  };
  std::vector<Value> values;        // the saved values of the run in this role, in save order
  std::vector<ReconcileDifference> explained;
  int64_t unexplained = 0;          // run - formula - explained; 0 when reconciled
};

struct KorthikantiReport {
  KorthikantiShape shape;
  int64_t formula_bytes = 0;        // sbh(34 + 5as/h)
  int64_t activation_bytes = 0;     // saved bytes of the run that are not parameters
  int64_t parameter_bytes = 0;      // saved leaf tensors that require grad (weights)
  int64_t parameter_cast_bytes = 0; // saved autocast copies of those (float16 / bfloat16 weights)
  int64_t explained_bytes = 0;
  int64_t unexplained_bytes = 0;   // sum of |unexplained| over the roles
  std::vector<ReconcileRole> roles;
};

// The role of one saved value ("parameter", "parameter_cast", "dropout_mask", ... or "other").
std::string saved_role(const RunResult& r, const SavedLifetime& s);

KorthikantiReport reconcile_korthikanti(const RunResult& r, const KorthikantiShape& shape);

// The shape from the scenario's expect block (`"korthikanti": {"s":..,"b":..,"h":..,"a":..}`);
// false when the scenario asks for no reconciliation.
bool korthikanti_requested(const RunResult& r, KorthikantiShape& shape);

}  // namespace agtrace
