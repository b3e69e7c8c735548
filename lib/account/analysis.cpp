#include "account/analysis.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

namespace agtrace {

bool is_new_category(const std::string& category) { return category == "graph_only" || category == "other"; }

namespace {

// "MmBackward0._saved_self" -> "MmBackward0" and "self" (views into the interned text).
std::string_view node_of(std::string_view what) {
  const auto dot = what.find("._saved_");
  return dot == std::string_view::npos ? what : what.substr(0, dot);
}
std::string_view attr_of(std::string_view what) {
  const auto dot = what.find("._saved_");
  return dot == std::string_view::npos ? std::string_view() : what.substr(dot + 8);
}

// A saved value's attribute, interned as its snapshot's (`SavedSnapshot::attr`), so that it
// compares by pointer: a program's values have few distinct `what` texts, and the last one
// asked for is kept (the values of one node kind come in runs).
class AttrOfWhat {
 public:
  InternedString operator()(const InternedString& what) {
    if (!(what == last_what_)) {
      last_what_ = what;
      last_attr_ = InternedString(attr_of(what.str()));
    }
    return last_attr_;
  }

 private:
  InternedString last_what_, last_attr_;
};

// The snapshot of a saved tensor (shape, dtype) when its node was reached by a walk.
const SavedSnapshot* snapshot_of(const RunResult& r, int64_t node_id, const InternedString& attr) {
  auto n = r.nodes.find(node_id);
  if (n == r.nodes.end()) return nullptr;
  for (const auto& s : n->second.saved)
    if (s.is_tensor && s.defined && s.attr == attr) return &s;
  return nullptr;
}

bool wider_than_half(DType d) { return d == DType::Float32 || d == DType::Float64; }

void what_if_rows(const RunResult& r, MemoryAnalysis& a) {
  // save_on_cpu (torch.autograd.graph.save_on_cpu): pack copies every saved tensor to the
  // host, so the device keeps none of the graph-only storages; the host holds one copy per
  // saved tensor (packs are not shared).
  int64_t saved_sum = 0, f16_packed = 0, f16_freed = 0;
  std::vector<std::pair<int64_t, int64_t>> freed_storages;  // (storage id, its bytes), repeats included
  AttrOfWhat attr_of_what;
  for (const auto& s : a.saved) {
    saved_sum += s.bytes;
    const SavedSnapshot* snap = snapshot_of(r, s.node_id, attr_of_what(s.what));
    if (!snap || !wider_than_half(snap->dtype)) continue;
    // fp16 pack hook: x.to(torch.float16) is a new 2-byte-per-element tensor for float32 /
    // float64 values (one per saved value: packs are not shared; a float16 value is
    // returned as itself, no copy, no saving). A graph-only storage is freed once.
    f16_packed += shape_numel(snap->shape) * 2;
    if (s.is_new) freed_storages.emplace_back(snap->storage_id, snap->storage_bytes);
  }
  std::sort(freed_storages.begin(), freed_storages.end());
  for (size_t i = 0; i < freed_storages.size(); ++i)
    if (i == 0 || freed_storages[i].first != freed_storages[i - 1].first) f16_freed += freed_storages[i].second;
  const int64_t graph_only = r.memory.graph_only_bytes;
  if (r.device == "cpu") {
    // pack_to_cpu keeps tensor.cpu(), which on a CPU tensor is the tensor itself (measured:
    // `x.cpu() is x`): on this run nothing would move and nothing would be freed.
    a.what_if.push_back({"save_on_cpu", 0, 0,
                         "no effect on a CPU run (tensor.cpu() is the tensor itself); on a GPU the " +
                             std::to_string(graph_only) + " B of graph-only storages would leave the device"});
  } else {
    a.what_if.push_back({"save_on_cpu", -graph_only, saved_sum,
                         "graph-only storages leave the device; every saved tensor is copied to the host"});
  }
  a.what_if.push_back({"fp16 packing", f16_packed - f16_freed, 0,
                       "float32/float64 saved tensors kept as float16 copies (half or a quarter of their bytes); "
                       "the originals are freed when only the graph held them"});
  // Checkpointing a statement: its graph-only saved values are not kept (they are
  // recomputed in backward); what it reads from earlier statements stays alive anyway.
  // a.saved lists r.saved's values in r.saved's order (less the ones checkpoints do not
  // keep), so one walk pairs them: looking each up again was quadratic (issue #6: 22 M
  // comparisons for the 6,667 saved values of a 10,000-op chain).
  std::map<int, int64_t> new_by_statement;
  size_t next = 0;
  for (const auto& s : r.saved) {
    if (next == a.saved.size() || a.saved[next].saved_id != s.id) continue;
    if (a.saved[next].is_new) new_by_statement[s.saved_at] += s.bytes;
    ++next;
  }
  int64_t all_new = 0;
  for (const auto& [st, bytes] : new_by_statement) all_new += bytes;
  if (all_new > 0)
    a.what_if.push_back({"checkpoint the whole forward", -all_new, 0,
                         "no graph-only saved value is kept; the forward runs again during backward"});
  std::vector<std::pair<int64_t, int>> top;
  for (const auto& [st, bytes] : new_by_statement) top.push_back({bytes, st});
  std::sort(top.begin(), top.end(), [](const auto& x, const auto& y) { return x.first != y.first ? x.first > y.first : x.second < y.second; });
  for (size_t i = 0; i < top.size() && i < 3; ++i)
    a.what_if.push_back({"checkpoint [" + std::to_string(top[i].second) + "]", -top[i].first, 0,
                         "its graph-only saved values are recomputed in backward instead of kept"});
  // Without autocast: the same program with its autocast blocks' bodies run as plain
  // statements (run_scenario runs it); the row is the change of the peak.
  if (r.autocast_comparison.present) {
    const AutocastComparison& c = r.autocast_comparison;
    if (c.raised_at >= 0)
      a.what_if.push_back({"without autocast", 0, 0,
                           "the program raises " + c.raised_kind + " at [" + std::to_string(c.raised_at) +
                               "] when its autocast blocks run as plain statements"});
    else
      a.what_if.push_back({"without autocast", c.peak_bytes_without - c.peak_bytes_with, 0,
                           "peak " + std::to_string(c.peak_bytes_with) + " -> " + std::to_string(c.peak_bytes_without) +
                               " B, saved " + std::to_string(c.saved_bytes_with) + " -> " +
                               std::to_string(c.saved_bytes_without) +
                               " B: the autocast blocks run as plain statements (per node: agtrace diff S S "
                               "--b-without-autocast)"});
  }
  // Dropping a name (del x): frees its storage only when nothing else holds it.
  for (const auto& [id, holders] : r.account.holders_at_end) {
    std::vector<std::string> names, others;
    for (const auto& h : holders) (h.rfind("name ", 0) == 0 ? names : others).push_back(h);
    if (names.empty()) continue;
    int64_t bytes = 0;
    for (const auto& st : r.storages)
      if (st.id == id) bytes = st.bytes;
    std::string who;
    for (size_t i = 0; i < names.size(); ++i) who += (i ? ", " : "") + names[i].substr(5);
    std::string why;
    for (size_t i = 0; i < others.size(); ++i) why += (i ? "; " : "") + others[i];
    a.what_if.push_back({"del " + who, others.empty() ? -bytes : 0, 0,
                         others.empty() ? "nothing else holds its storage" : "its storage stays: " + why});
  }
}

}  // namespace

MemoryAnalysis analyse_memory(const RunResult& r, bool explain) {
  MemoryAnalysis a;
  // Values handed to a checkpoint block's hooks are not kept (recomputed in backward): they
  // cost their node nothing, as PyTorch's outer pack hooks see no bytes for them.
  std::set<int64_t> not_kept;
  if (r.events.has_hooks())
    for (const auto& e : r.events)
      if (e.kind == "save" && (e.hooks == "checkpoint" || e.hooks == "checkpoint_recompute")) not_kept.insert(e.saved_id);
  // Per node, in node id order. Node ids are dense creation-order numbers, so a table by id
  // finds a node's record (a std::map's walks and its nodes' cache misses were most of this
  // analysis on a 10,000-op chain, `perf record`).
  std::vector<NodeMemory> nodes;
  std::vector<int32_t> node_at;  // by node id: its record's index in `nodes`, or -1
  auto node_memory = [&](int64_t id) -> NodeMemory& {
    if (id < 0) {  // a value saved outside any node's record (the accountant's -1): looked for
      for (NodeMemory& n : nodes)
        if (n.node_id == id) return n;
      nodes.emplace_back().node_id = id;
      return nodes.back();
    }
    const size_t at = static_cast<size_t>(id);
    if (at >= node_at.size()) node_at.resize(std::max(at + 1, 2 * node_at.size()), -1);
    if (node_at[at] < 0) {
      node_at[at] = static_cast<int32_t>(nodes.size());
      nodes.emplace_back().node_id = id;
    }
    return nodes[static_cast<size_t>(node_at[at])];
  };
  for (const auto& s : r.saved) {
    if (!explain) break;
    if (not_kept.count(s.id)) continue;
    NodeMemory& n = node_memory(s.node_id);
    if (n.saved_count == 0) n.name = node_of(s.what.str());  // one node, one name
    if (n.saved_at < 0) n.saved_at = s.saved_at;
    ++n.saved_count;
    n.saved_bytes += s.bytes;
  }
  // why_saved's answer depends on the value's node and attribute (its interned text), its
  // bytes, the node's input count and the node's saved bytes: a program has few such
  // combinations, so each answer is made once (made per value, the sentences were a third
  // of this analysis on a 2,000-op chain under callgrind).
  std::map<std::tuple<const std::string*, int64_t, size_t, int64_t>, std::shared_ptr<const WhySaved>> why_of;
  a.saved.reserve(r.saved.size());
  for (const auto& s : r.saved) {
    if (not_kept.count(s.id)) continue;
    SavedExplained& e = a.saved.emplace_back();
    e.saved_id = s.id;
    e.node_id = s.node_id;
    e.what = s.what;
    e.bytes = s.bytes;
    if (const char* c = r.account.saved_category.find(s.id)) e.category = c;
    e.is_new = is_new_category(e.category);
    if (explain) {
      auto n = r.nodes.find(s.node_id);
      const size_t inputs = n != r.nodes.end() ? n->second.next.size() : 2;
      NodeMemory& node = node_memory(s.node_id);
      const auto key = std::make_tuple(&s.what.str(), s.bytes, inputs, node.saved_bytes);
      auto why = why_of.find(key);
      if (why == why_of.end()) {
        const std::string_view what = s.what.str();
        why = why_of.emplace(key, std::make_shared<const WhySaved>(why_saved(std::string(node_of(what)),
                                                                           std::string(attr_of(what)), s.bytes,
                                                                           inputs, node.saved_bytes)))
                  .first;
      }
      e.why_answer = why->second;
      if (e.is_new) node.new_bytes += s.bytes;
    }
    if (e.is_new) a.new_bytes += s.bytes;
  }
  // Values are saved in node creation order but for a few (a node saving again later), so
  // the records are mostly in id order already.
  const auto by_id = [](const NodeMemory& x, const NodeMemory& y) { return x.node_id < y.node_id; };
  if (!std::is_sorted(nodes.begin(), nodes.end(), by_id)) std::sort(nodes.begin(), nodes.end(), by_id);
  a.nodes = std::move(nodes);
  what_if_rows(r, a);
  return a;
}

}  // namespace agtrace
