// Graphviz picture of the autograd graph, in the style torchviz users know (boxes named
// like PyTorch's nodes, leaves labelled with their variable and shape), plus what torchviz
// lacks: the saved tensors each node keeps, attached to it (orange rows of the node's box,
// with shape, dtype, bytes and whose tensor it is), storage sharing, each node's kept bytes,
// one cluster per statement, the roots and a legend.
//
// By default the picture is the graph as it stood when the most saved bytes were alive
// (normally the end of the forward, before the first backward frees them): drawn at the end
// of a program that called backward, every saved value would be released and the picture
// would not show what autograd kept. DotOptions::at picks a statement or the end instead.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "account/analysis.hpp"  // new bytes per node, allocator model
#include "report/report.hpp"

namespace agtrace {

namespace {

// A DOT double-quoted string: backslash and quote escaped, newlines as \n, other control
// bytes dropped, so any scenario name renders.
std::string q(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      continue;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Text inside an HTML-like label: the markup characters as entities, control bytes dropped.
std::string h(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else if (c < 0x20 || c == 0x7f) continue;
    else out += static_cast<char>(c);
  }
  return out;
}

template <typename Shape>
std::string shape_text(DType dtype, const Shape& shape) {
  std::string out = dtype_name(dtype) + "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string shortened(const std::string& s, size_t most) {
  return s.size() <= most ? s : s.substr(0, most - 3) + "...";
}

const char* const kKeptFill = "#f6a540";      // a saved tensor autograd keeps at the drawn time
const char* const kReleasedFill = "#eeeeee";  // released by then
const char* const kLeafFill = "#cde7f7";
const char* const kNodeFill = "#e8e8e8";
const char* const kFoldFill = "#fff6d5";

// The statement after which the most saved bytes were alive (each storage counted once), and
// those bytes. Of equal maxima, the latest statement of the first run of them: the graph is
// then as complete as it gets before anything is released. -2 (the end) when nothing was saved.
std::pair<int, int64_t> statement_of_most_saved(const RunResult& r) {
  const int statements = static_cast<int>(r.statements.size());
  std::vector<std::vector<const SavedLifetime*>> saved_at(statements), released_at(statements);
  for (const SavedLifetime& s : r.saved) {
    if (s.storage_id < 0 || s.saved_at < 0 || s.saved_at >= statements) continue;
    saved_at[s.saved_at].push_back(&s);
    if (s.released_at >= 0 && s.released_at < statements) released_at[s.released_at].push_back(&s);
  }
  std::map<int64_t, std::pair<int, int64_t>> holders;  // storage -> (saved values on it, bytes)
  int64_t live = 0, best = 0;
  int best_at = -2;
  bool extending = false;
  for (int i = 0; i < statements; ++i) {
    for (const SavedLifetime* s : saved_at[i]) {
      auto& [count, bytes] = holders[s->storage_id];
      if (count++ == 0) live += (bytes = s->bytes);
      else if (s->bytes > bytes) live += s->bytes - bytes, bytes = s->bytes;
    }
    for (const SavedLifetime* s : released_at[i]) {
      auto it = holders.find(s->storage_id);
      if (it != holders.end() && --it->second.first == 0) {
        live -= it->second.second;
        holders.erase(it);
      }
    }
    if (live > best) {
      best = live;
      best_at = i;
      extending = true;
    } else if (live == best && extending && best > 0) {
      best_at = i;
    } else {
      extending = false;
    }
  }
  return {best_at, best};
}

// Tandem repeats in a sequence of node names: the longest block (up to kLongestBlock nodes)
// that the sequence repeats right after itself, found left to right. Each repeat after the
// first becomes one box. Compared through prefix hashes, so a 30,000-node graph takes a few
// million comparisons.
struct Fold {
  size_t start = 0, length = 0, copies = 0;  // copies after the first, folded
};
std::vector<Fold> find_repeats(const std::vector<std::string>& names) {
  constexpr size_t kLongestBlock = 400;
  const size_t n = names.size();
  std::vector<uint64_t> ids(n);
  std::map<std::string, uint64_t> number;
  for (size_t i = 0; i < n; ++i) ids[i] = number.emplace(names[i], number.size() + 1).first->second;
  std::vector<uint64_t> prefix(n + 1, 0), power(n + 1, 1);
  const uint64_t base = 1000003;
  for (size_t i = 0; i < n; ++i) {
    prefix[i + 1] = prefix[i] * base + ids[i];
    power[i + 1] = power[i] * base;
  }
  auto hash = [&](size_t a, size_t len) { return prefix[a + len] - prefix[a] * power[len]; };
  auto same = [&](size_t a, size_t b, size_t len) {
    if (hash(a, len) != hash(b, len)) return false;
    return std::equal(ids.begin() + static_cast<std::ptrdiff_t>(a), ids.begin() + static_cast<std::ptrdiff_t>(a + len),
                      ids.begin() + static_cast<std::ptrdiff_t>(b));
  };
  // At each position, the block whose repeats cover the most nodes (of equal cover, the
  // shortest): four identical layers of two nodes fold as three repeats of two, not one of four.
  std::vector<Fold> folds;
  size_t i = 0;
  while (i < n) {
    size_t best = 0, best_copies = 0;
    for (size_t len = 2; len <= std::min(kLongestBlock, (n - i) / 2); ++len) {
      if (!same(i, i + len, len)) continue;
      size_t copies = 1;
      while (i + (copies + 2) * len <= n && same(i, i + (copies + 1) * len, len)) ++copies;
      if (copies * len > best_copies * best) best = len, best_copies = copies;
    }
    if (!best) {
      ++i;
      continue;
    }
    folds.push_back({i + best, best, best_copies});
    i += (best_copies + 1) * best;
  }
  return folds;
}

}  // namespace

std::string report_dot(const RunResult& r, const DotOptions& opt) {
  const MemoryAnalysis analysis = analyse_memory(r);
  std::map<int64_t, int64_t> new_bytes_of;
  for (const auto& nm : analysis.nodes) new_bytes_of[nm.node_id] = nm.new_bytes;

  // When: the statement after which the graph is drawn (-2: the end of the program).
  int at = opt.at;
  std::string when;
  if (at == DotOptions::kAtPeak) {
    const auto [statement, bytes] = statement_of_most_saved(r);
    at = statement;
    when = at == -2 ? "at the end (nothing saved)"
                    : "after " + statement_ref(at) + ", when the most saved bytes were alive (" + human_bytes(bytes) + ")";
  } else {
    when = at == DotOptions::kAtEnd ? "at the end" : "after " + statement_ref(at);
  }
  if (at >= static_cast<int>(r.statements.size())) at = -2;
  if (at >= 0) when += ": " + shortened(r.statements[static_cast<size_t>(at)].source, 80);
  auto exists_at = [at](int created) { return at == -2 || created <= at; };
  // A saved value is kept at the drawn time if it was saved by then and not yet released.
  auto kept_at = [at](const SavedSnapshot& s) {
    if (at == -2) return !s.released;
    return s.saved_at <= at && !(s.released && s.released_at >= 0 && s.released_at <= at);
  };

  // The nodes of that time that still existed at the end (nodes are recorded from the graph
  // alive at the end and at captured walks; one freed before then has no record, and the
  // title says how many are missing).
  std::vector<const NodeSnapshot*> nodes;
  for (const auto& [id, n] : r.nodes)
    if (exists_at(n.created_at)) nodes.push_back(&n);
  int64_t boundary = -1;  // the first node id created after the drawn time
  for (const auto& [id, n] : r.nodes)
    if (!exists_at(n.created_at)) {
      boundary = id;
      break;
    }
  if (boundary < 0)
    for (const auto& [id, n] : r.nodes) boundary = std::max(boundary, id + 1);
  int64_t missing = 0;
  for (int64_t id = 0; id < boundary; ++id)
    if (!r.nodes.count(id)) ++missing;

  std::map<std::string, const LeafRecord*> leaf_by_name;
  for (const LeafRecord& l : r.leaves) leaf_by_name[l.name] = &l;
  const StorageNames storage_names(r);

  // The bytes of the distinct storages a node's kept saved values hold, not yet in `storages`.
  auto add_kept_bytes = [&kept_at](const NodeSnapshot& n, std::set<int64_t>& storages) {
    int64_t bytes = 0;
    for (const auto& s : n.saved)
      if (s.is_tensor && s.defined && kept_at(s) && storages.insert(s.storage_id).second) bytes += s.bytes;
    return bytes;
  };

  // Folding (--max-nodes): repeats of a block of backward nodes become one box each.
  std::map<int64_t, std::string> folded_into;  // node id -> box id
  std::vector<std::pair<std::string, std::string>> boxes;  // box id, label
  if (opt.max_nodes > 0 && static_cast<int64_t>(nodes.size()) > opt.max_nodes) {
    std::vector<const NodeSnapshot*> inner;
    for (const NodeSnapshot* n : nodes)
      if (n->name != "AccumulateGrad") inner.push_back(n);
    std::vector<std::string> names;
    for (const NodeSnapshot* n : inner) names.push_back(n->name.str());
    for (const Fold& f : find_repeats(names)) {
      const std::string box = "fold" + std::to_string(boxes.size());
      int64_t kept = 0;  // bytes of the distinct storages the box's saved values keep
      std::set<int64_t> storages;
      std::map<std::string, int> counts;
      for (size_t k = f.start; k < f.start + f.length * f.copies; ++k) {
        folded_into[inner[k]->id] = box;
        kept += add_kept_bytes(*inner[k], storages);
      }
      for (size_t k = f.start; k < f.start + f.length; ++k) counts[inner[k]->name.str()]++;
      std::string what;
      for (const auto& [name, count] : counts) what += (what.empty() ? "" : ", ") + name + (count > 1 ? " ×" + std::to_string(count) : "");
      const std::string first = "#" + std::to_string(inner[f.start - f.length]->id);
      boxes.push_back({box, std::to_string(f.copies) + " more " + (f.copies == 1 ? "repeat" : "repeats") +
                                 " of the block of " + std::to_string(f.length) + " nodes from " + first + "\n(" +
                                 shortened(what, 120) + ")\nnodes #" + std::to_string(inner[f.start]->id) + " to #" +
                                 std::to_string(inner[f.start + f.length * f.copies - 1]->id) + ", keeping " +
                                 human_bytes(kept)});
    }
    // A leaf only folded nodes use goes into their box too (a repeated layer's parameters).
    std::map<int64_t, std::set<std::string>> users;  // leaf node id -> DOT ids of its users
    for (const NodeSnapshot* n : nodes)
      for (const NodeEdge& e : n->next)
        if (e.node >= 0) {
          auto f = folded_into.find(n->id);
          users[e.node].insert(f != folded_into.end() ? f->second : "n" + std::to_string(n->id));
        }
    for (const NodeSnapshot* n : nodes) {
      if (n->name != "AccumulateGrad") continue;
      auto u = users.find(n->id);
      if (u != users.end() && u->second.size() == 1 && u->second.begin()->rfind("fold", 0) == 0)
        folded_into[n->id] = *u->second.begin();
    }
    const size_t drawn_count = nodes.size() - folded_into.size() + boxes.size();
    // Still too many: the nodes nearest the roots (latest created) stay, the rest are one box.
    if (static_cast<int64_t>(drawn_count) > opt.max_nodes) {
      int64_t room = opt.max_nodes - static_cast<int64_t>(boxes.size()) - 1;
      int64_t rest = 0, rest_saved = 0;
      std::set<int64_t> storages;
      for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
        if (folded_into.count((*it)->id)) continue;
        if (room > 0) {
          --room;
          continue;
        }
        folded_into[(*it)->id] = "fold_rest";
        ++rest;
        rest_saved += add_kept_bytes(**it, storages);
      }
      if (rest > 0)
        boxes.push_back({"fold_rest", std::to_string(rest) + " earlier nodes not drawn (--max-nodes " +
                                          std::to_string(opt.max_nodes) + "), keeping " + human_bytes(rest_saved)});
    }
  }
  auto dot_id = [&](int64_t node) {
    auto it = folded_into.find(node);
    return it != folded_into.end() ? it->second : "n" + std::to_string(node);
  };

  std::ostringstream o;
  o << "digraph agtrace {\n";
  std::string title = "agtrace: " + r.scenario + ", the graph " + when;
  if (missing > 0) title += "\n" + std::to_string(missing) + " nodes of that time were freed before the end and are not drawn";
  title += "\npeak " + human_bytes(r.memory.peak_bytes) + ", saved " + human_bytes(r.memory.saved_bytes) + ", new " +
           human_bytes(analysis.new_bytes) + "; model (512-byte blocks) peak " + human_bytes(r.account.model.peak_bytes);
  o << "  graph [label=" << q(title) << ", labelloc=t, fontname=\"Helvetica\", rankdir=TB, newrank=true];\n";
  o << "  node [fontname=\"Helvetica\", fontsize=11, shape=box, style=filled, fillcolor=\"" << kNodeFill << "\"];\n";
  o << "  edge [fontname=\"Helvetica\", fontsize=9];\n";

  // Nodes, each statement's in a cluster labelled with its source; leaves outside.
  std::map<int, std::vector<std::string>> by_statement;
  std::map<int64_t, std::vector<std::pair<std::string, const SavedSnapshot*>>> ports_by_storage;
  std::map<int64_t, std::string> leaf_by_tensor;  // leaf tensor id -> its node's DOT id
  for (const NodeSnapshot* n : nodes) {
    if (folded_into.count(n->id)) continue;
    const std::string nid = "n" + std::to_string(n->id);
    std::string line;
    if (n->name == "AccumulateGrad") {
      const std::string var = n->variable.empty() ? "leaf" : n->variable.str();
      std::string label = var;
      auto leaf = leaf_by_name.find(var);
      if (leaf != leaf_by_name.end()) label += "\n" + shape_text(leaf->second->dtype, leaf->second->shape);
      label += "\nAccumulateGrad #" + std::to_string(n->id);
      line = nid + " [label=" + q(label) + ", fillcolor=\"" + kLeafFill + "\"];";
      leaf_by_tensor[n->variable_tensor_id] = nid;
      o << "  " << line << "\n";
      continue;
    }
    std::string head = "<b>" + h(n->name.str()) + "</b> #" + std::to_string(n->id);
    if (!n->wraps.empty()) head += "<br/>wraps " + h(n->wraps.str());
    int64_t kept = 0, released = 0;
    std::string rows;
    for (const auto& s : n->saved) {
      if (!s.is_tensor || !s.defined) continue;
      const bool keeps = kept_at(s);
      (keeps ? kept : released) += s.bytes;
      if (!opt.saved) continue;
      std::string text = h(s.attr.str()) + ": " + h(shape_text(s.dtype, s.shape)) + ", " + h(human_bytes(s.bytes));
      if (!s.hooks.empty())
        text += s.hooks == "checkpoint" ? ", checkpoint: not kept"
                                         : ", " + h(s.hooks.str()) + " hooks keep " + h(human_bytes(s.packed_bytes));
      else if (s.from_python_number) text += ", a Python number";
      else if (!s.is_output && !s.same_object_as.empty()) text += ", same object as " + h(s.same_object_as.str());
      else if (!s.is_output) text += ", an unnamed tensor on " + h(storage_names(s.storage_id));
      else text += ", new object on " + h(storage_names(s.storage_id));
      if (!keeps) text += ", released at " + statement_ref(s.released_at);
      const std::string port = "s_" + s.attr.str();
      rows += "<tr><td port=\"" + port + "\" align=\"left\" bgcolor=\"" + (keeps ? kKeptFill : kReleasedFill) + "\">" +
              (keeps ? text : "<font color=\"#888888\">" + text + "</font>") + "</td></tr>";
      if (keeps) ports_by_storage[s.storage_id].push_back({nid + ":" + port, &s});
    }
    if (kept > 0) {
      head += "<br/>keeps " + h(human_bytes(kept));
      auto nb = new_bytes_of.find(n->id);
      if (nb != new_bytes_of.end()) head += ", new " + h(human_bytes(nb->second));
    } else if (released > 0) {
      head += "<br/>released " + h(human_bytes(released));
    }
    line = nid + " [shape=plain, style=\"\", label=<<table border=\"0\" cellborder=\"1\" cellspacing=\"0\" cellpadding=\"4\">"
           "<tr><td bgcolor=\"" + std::string(released > 0 && kept == 0 ? "#f4f4f4" : kNodeFill) + "\">" + head +
           "</td></tr>" + rows + "</table>>];";
    by_statement[n->created_at].push_back(line);
  }
  for (const auto& [box, label] : boxes)
    o << "  " << box << " [label=" << q(label) << ", shape=box3d, fillcolor=\"" << kFoldFill << "\"];\n";
  for (const auto& [statement, lines] : by_statement) {
    const bool named = statement >= 0 && statement < static_cast<int>(r.statements.size());
    o << "  subgraph cluster_s" << (statement < 0 ? "setup" : std::to_string(statement)) << " {\n";
    o << "    label=" << q(named ? statement_ref(statement) + " " + shortened(r.statements[static_cast<size_t>(statement)].source, 60) : statement_ref(statement))
      << "; labeljust=l; fontsize=10; fontcolor=\"#555555\"; color=\"#bbbbbb\"; style=dashed;\n";
    for (const auto& line : lines) o << "    " << line << "\n";
    o << "  }\n";
  }

  // Edges, as next_functions run (node -> input's node), or torchviz's way (input -> node).
  std::set<std::pair<std::string, std::string>> edges;
  for (const NodeSnapshot* n : nodes)
    for (const NodeEdge& e : n->next) {
      auto target = r.nodes.find(e.node);
      if (e.node < 0 || target == r.nodes.end() || !exists_at(target->second.created_at)) continue;
      const std::string from = dot_id(n->id), to = dot_id(e.node);
      if (from == to) continue;
      if (!edges.insert({from, to}).second) continue;
      if (opt.forward_edges) o << "  " << to << " -> " << from << ";\n";
      else o << "  " << from << " -> " << to << ";\n";
    }

  // Shared storage: kept saved values on one storage are linked, and to the leaf whose
  // tensor they are.
  for (const auto& [storage, members] : ports_by_storage) {
    for (size_t i = 1; i < members.size(); ++i)
      o << "  " << members[i - 1].first << " -> " << members[i].first
        << " [style=dotted, dir=none, constraint=false, color=\"#7a3db8\", xlabel=\"same storage\", fontcolor=\"#7a3db8\"];\n";
    for (const auto& [port, s] : members) {
      if (s->is_output) continue;
      auto leaf = leaf_by_tensor.find(s->tensor_id);
      if (leaf == leaf_by_tensor.end()) continue;
      o << "  " << port << " -> " << leaf->second
        << " [style=dotted, dir=none, constraint=false, color=\"#7a3db8\", xlabel=\"same object\", fontcolor=\"#7a3db8\"];\n";
      break;
    }
  }

  // Roots: the walks' named tensors whose node exists at the drawn time.
  int k = 0;
  std::set<std::string> rooted;
  for (const auto& w : r.walks) {
    if (w.nodes.empty()) continue;
    auto first = r.nodes.find(w.nodes.front());
    if (first == r.nodes.end() || !exists_at(first->second.created_at)) continue;
    if (!rooted.insert(w.key + "|" + std::to_string(w.nodes.front())).second) continue;
    const std::string rid = "root" + std::to_string(k++);
    o << "  " << rid << " [label=" << q(w.key) << ", shape=ellipse, fillcolor=\"#c9f0c9\"];\n";
    if (opt.forward_edges) o << "  " << dot_id(w.nodes.front()) << " -> " << rid << " [color=\"#2e8b2e\"];\n";
    else o << "  " << rid << " -> " << dot_id(w.nodes.front()) << " [color=\"#2e8b2e\"];\n";
  }

  // Legend.
  o << "  subgraph cluster_legend {\n";
  o << "    label=\"legend\"; fontsize=10; color=\"#cccccc\"; style=solid;\n";
  o << "    lg_root [label=\"root tensor\", shape=ellipse, fillcolor=\"#c9f0c9\"];\n";
  o << "    lg_node [shape=plain, style=\"\", label=<<table border=\"0\" cellborder=\"1\" cellspacing=\"0\" "
       "cellpadding=\"4\"><tr><td bgcolor=\""
    << kNodeFill << "\"><b>backward node</b><br/>keeps: bytes its saved tensors hold</td></tr><tr><td bgcolor=\""
    << kKeptFill << "\">saved tensor kept</td></tr><tr><td bgcolor=\"" << kReleasedFill
    << "\"><font color=\"#888888\">saved tensor released</font></td></tr></table>>];\n";
  o << "    lg_leaf [label=\"leaf (AccumulateGrad)\\nshape\", fillcolor=\"" << kLeafFill << "\"];\n";
  o << "    lg_fold [label=\"folded repeats (--max-nodes)\", shape=box3d, fillcolor=\"" << kFoldFill << "\"];\n";
  o << "    { rank=same; lg_root; lg_node; lg_leaf; lg_fold; }\n";
  o << "    lg_root -> lg_node -> lg_leaf -> lg_fold [style=invis];\n";
  o << "  }\n";
  o << "}\n";
  return o.str();
}

}  // namespace agtrace
