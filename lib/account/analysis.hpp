// Post-run analysis of the accountant's figures, from the RunResult alone (plain data):
// per-node saved and new bytes, why each value is saved and what would change without
// it, and a what-if table (offload, fp16 packing, checkpointing, dropping a name).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "account/save_rules.hpp"
#include "interp/result.hpp"

namespace agtrace {

struct NodeMemory {
  int64_t node_id = 0;
  std::string name;
  int saved_at = -1;          // statement of its first saved value
  int saved_count = 0;
  int64_t saved_bytes = 0;    // bytes of its saved tensors
  int64_t new_bytes = 0;      // of which on storages no leaf, name or gradient holds
};

struct SavedExplained {
  int64_t saved_id = 0;
  int64_t node_id = 0;
  InternedString what;        // "MmBackward0._saved_self"
  int64_t bytes = 0;
  std::string category;       // of its storage, last seen while held ("" if never seen)
  bool is_new = false;        // graph_only / other: exists only because the graph keeps it
  // One answer shared by every value with the same node, attribute, bytes and node inputs
  // (why_saved's texts are the same for them); null when analysed without explanations.
  std::shared_ptr<const WhySaved> why_answer;
  const WhySaved& why() const {
    static const WhySaved kNone;
    return why_answer ? *why_answer : kNone;
  }
};

struct WhatIfRow {
  std::string change;         // "save_on_cpu", "fp16 packing", "checkpoint [2]", "del h"
  int64_t device_bytes = 0;   // change of bytes on the device (negative: saved)
  int64_t host_bytes = 0;     // bytes added on the host
  std::string detail;
};

struct MemoryAnalysis {
  std::vector<NodeMemory> nodes;     // in creation order
  std::vector<SavedExplained> saved; // in save order
  int64_t new_bytes = 0;             // sum over nodes
  std::vector<WhatIfRow> what_if;
};

// Categories whose bytes exist only because the graph holds them.
bool is_new_category(const std::string& category);

// explain false: `saved` without the why of each value (its text is most of the analysis's
// cost) and `nodes` left empty; new_bytes and what_if as with it (the JSON report's skeleton
// needs only those).
MemoryAnalysis analyse_memory(const RunResult& r, bool explain = true);

}  // namespace agtrace
