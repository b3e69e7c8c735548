// What a run produced, as plain data: the printers (text, JSON, DOT) read only this, so
// they never touch live tensors and the order of everything is fixed by creation ids.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "account/extras.hpp"  // issue #4 accountant (helper C)
#include "tensor/tensor.hpp"

namespace agtrace {

struct SavedSnapshot {
  std::string attr;          // without the `_saved_` prefix
  bool is_tensor = false;
  bool defined = false;      // tensor saved (false: reads as None)
  std::string value;         // non-tensor: Python repr of the value
  // Tensors:
  bool is_output = false;    // saved output: unpacking gives a new object on the same storage
  int64_t tensor_id = -1;
  std::string same_object_as;            // name bound to the very object saved (saved inputs)
  bool from_python_number = false;       // a Python scalar wrapped as a 0-d tensor
  std::vector<std::string> shares_with;  // names bound to tensors on the same storage
  Shape shape;
  DType dtype = DType::Float32;
  int64_t bytes = 0;
  int64_t storage_id = -1;
  int64_t storage_bytes = 0;
  int64_t saved_version = 0;
  int saved_at = -1;
  bool released = false;
  int released_at = -1;
  std::string why;           // which gradient needs it
};

struct NodeSnapshot {
  int64_t id = 0;
  std::string name;
  std::vector<int64_t> next;       // node ids; -1 for None
  std::vector<int> next_input_nr;
  std::vector<SavedSnapshot> saved;
  int created_at = -1;
  std::string variable;            // AccumulateGrad: the leaf's name
  std::string wraps;               // CopySlices: the in-place node it runs on the view's slice
  int64_t variable_tensor_id = -1;
  bool released = false;
  int released_at = -1;
  int64_t saved_bytes = 0;         // bytes of its saved tensors (held or released)
};

struct WalkRecord {
  std::string key;                 // name of the root tensor or "statement N"
  int statement = -1;              // when captured; -2 at the end of the program
  std::vector<int64_t> nodes;      // DFS order, each node once
};

struct ErrorRecord {
  int statement = -1;
  int iteration = -1;
  std::string phase;               // forward | backward
  std::string kind;
  std::string message;
  nlohmann::json facts = nlohmann::json::object();
  bool caught = false;             // inside a try block
};

struct StatementResult {
  int index = 0;
  std::string source;
  std::string status = "not_run";  // ok | error | not_run
  int runs = 0;                    // > 1 inside repeat blocks
  std::string block;               // enclosing blocks, e.g. "try" or "no_grad"
};

struct StorageLifetime {
  int64_t id = 0;
  int64_t bytes = 0;
  DType dtype = DType::Float32;
  int64_t numel = 0;
  int allocated_at = -1;
  std::string allocated_by;        // op, or backward node
  bool in_backward = false;
  bool freed = false;
  int freed_at = -1;               // statement that freed it (-1: setup); see `freed`
  std::vector<std::string> holders;  // every holder seen at statement ends, in first-seen order
};

struct SavedLifetime {
  int64_t id = 0;
  int64_t node_id = 0;
  std::string what;                // "MmBackward0._saved_self"
  int64_t bytes = 0;
  int64_t storage_id = -1;
  int saved_at = -1;
  int released_at = -1;            // -1: alive at the end
};

struct StatementMemory {
  int index = 0;
  int64_t live_after = 0;
  int64_t peak_inside = 0;
  int64_t temporary_bytes = 0;     // allocated and freed inside the statement
  std::map<std::string, int64_t> categories;  // bytes by category after the statement
};

struct GradRecord {
  std::string name;
  Shape shape;
  DType dtype = DType::Float32;
  std::vector<double> values;
};

struct LeafRecord {
  std::string name;
  Shape shape;
  DType dtype = DType::Float32;
  bool requires_grad = false;
  int64_t bytes = 0;
  std::vector<double> values;
};

struct MemorySummary {
  int64_t peak_bytes = 0;
  int peak_statement = -1;
  int64_t saved_bytes = 0;
  int64_t saved_unique_bytes = 0;
  int64_t graph_only_bytes = 0;
  int graph_only_statement = -1;
  std::map<std::string, int64_t> categories_at_end;
};

struct RunResult {
  std::string file, scenario, description, device;
  std::vector<LeafRecord> leaves;
  std::vector<StatementResult> statements;
  std::vector<std::string> printed;
  std::vector<WalkRecord> walks;           // in order of capture; one per key
  std::map<int64_t, NodeSnapshot> nodes;   // every node a walk reaches, latest snapshot
  std::vector<ErrorRecord> errors;
  std::vector<GradRecord> grads;
  std::vector<StorageLifetime> storages;
  std::vector<SavedLifetime> saved;
  std::vector<StatementMemory> memory_by_statement;
  MemorySummary memory;
  AccountExtras account;                   // allocator model, peak location, saved categories (issue #4)
  bool raised = false;                     // an error outside try ended the program
  nlohmann::json expect;
};

}  // namespace agtrace
