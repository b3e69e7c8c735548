// Graphviz picture of the autograd graph, in the style torchviz users know (boxes named
// like PyTorch's nodes, leaves as AccumulateGrad boxes labelled with their variable),
// plus what torchviz lacks: saved tensors with shape, dtype and bytes, storage sharing,
// released values greyed, each node's kept bytes, the roots and a legend.
#include <map>
#include <set>
#include <sstream>

#include "account/analysis.hpp"  // issue #4: new bytes per node, allocator model
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

std::string shape_text(const SavedSnapshot& s) {
  std::string out = dtype_name(s.dtype) + "[";
  for (size_t i = 0; i < s.shape.size(); ++i) out += (i ? ", " : "") + std::to_string(s.shape[i]);
  return out + "]";
}

}  // namespace

std::string report_dot(const RunResult& r) {
  std::ostringstream o;
  o << "digraph agtrace {\n";
  // issue #4 (accountant): peak, saved and the allocator model in the title; new bytes per node.
  const MemoryAnalysis analysis = analyse_memory(r);
  std::map<int64_t, int64_t> new_bytes_of;
  for (const auto& nm : analysis.nodes) new_bytes_of[nm.node_id] = nm.new_bytes;
  o << "  graph [label=" << q("agtrace: " + r.scenario + "\npeak " + human_bytes(r.memory.peak_bytes) + ", saved " +
                             human_bytes(r.memory.saved_bytes) + ", new " + human_bytes(analysis.new_bytes) +
                             "; model (512-byte blocks) peak " + human_bytes(r.account.model.peak_bytes))
    << ", labelloc=t, fontname=\"Helvetica\", rankdir=TB];\n";
  o << "  node [fontname=\"Helvetica\", fontsize=11, shape=box, style=filled, fillcolor=\"#e8e8e8\"];\n";
  o << "  edge [fontname=\"Helvetica\", fontsize=9];\n";

  // Nodes reached by any walk, in id order.
  std::set<int64_t> drawn;
  for (const auto& w : r.walks) drawn.insert(w.nodes.begin(), w.nodes.end());
  std::map<int64_t, std::vector<std::string>> storage_members;  // storage id -> saved-node DOT ids
  for (int64_t id : drawn) {
    auto it = r.nodes.find(id);
    if (it == r.nodes.end()) continue;
    const NodeSnapshot& n = it->second;
    const std::string nid = "n" + std::to_string(n.id);
    if (n.name == "AccumulateGrad") {
      o << "  " << nid << " [label=" << q((n.variable.empty() ? "leaf" : n.variable) + "\nAccumulateGrad #" + std::to_string(n.id))
        << ", fillcolor=\"#cde7f7\"];\n";
    } else {
      std::string label = n.name + " #" + std::to_string(n.id);
      if (!n.wraps.empty()) label += "\nwraps " + n.wraps;
      bool released = n.released && n.saved_bytes > 0;
      if (n.saved_bytes > 0)
        label += released ? "\nreleased " + human_bytes(n.saved_bytes) + " at [" + std::to_string(n.released_at) + "]"
                          : "\nkeeps " + human_bytes(n.saved_bytes);
      if (n.saved_bytes > 0 && new_bytes_of.count(n.id)) label += ", new " + human_bytes(new_bytes_of[n.id]);
      o << "  " << nid << " [label=" << q(label)
        << (released ? ", fillcolor=\"#f4f4f4\", fontcolor=\"#888888\", color=\"#aaaaaa\"" : "") << "];\n";
    }
    for (size_t i = 0; i < n.next.size(); ++i)
      if (n.next[i].node >= 0 && drawn.count(n.next[i].node)) o << "  " << nid << " -> n" << n.next[i].node << ";\n";
    for (const auto& s : n.saved) {
      if (!s.is_tensor || !s.defined) continue;
      const std::string sid = nid + "_" + s.attr;
      std::string label = "_saved_" + s.attr + "\n" + shape_text(s) + " " + human_bytes(s.bytes);
 if (!s.hooks.empty()) label += s.hooks == "checkpoint" ? "\ncheckpoint: not kept" : "\n" + s.hooks + " hooks keep " + human_bytes(s.packed_bytes);
      else if (s.from_python_number) label += "\na Python number as a 0-d tensor";
      else if (!s.is_output) label += "\nsame object as " + (s.same_object_as.empty() ? "#" + std::to_string(s.tensor_id) : s.same_object_as.str());
      else label += "\nnew object, same storage";
      if (s.released) label += "\nreleased at [" + std::to_string(s.released_at) + "]";
      o << "  " << sid << " [label=" << q(label) << ", shape=note, "
        << (s.released ? "fillcolor=\"#eeeeee\", fontcolor=\"#999999\", color=\"#bbbbbb\", style=\"filled,dashed\""
                       : "fillcolor=\"#fde3b0\"")
        << "];\n";
      o << "  " << sid << " -> " << nid << " [style=dashed, arrowhead=none, color=\"#c08000\"];\n";
      storage_members[s.storage_id].push_back(sid);
    }
  }
  // Shared storage: saved values on one storage are linked, and linked to the leaf whose
  // storage it is.
  std::map<int64_t, std::string> leaf_by_storage;
  for (int64_t id : drawn) {
    auto it = r.nodes.find(id);
    if (it == r.nodes.end() || it->second.name != "AccumulateGrad") continue;
    for (const auto& [nid2, n2] : r.nodes)
      for (const auto& s : n2.saved)
        if (s.defined && !s.is_output && s.tensor_id == it->second.variable_tensor_id)
          leaf_by_storage[s.storage_id] = "n" + std::to_string(it->second.id);
  }
  for (const auto& [storage, members] : storage_members) {
    for (size_t i = 1; i < members.size(); ++i)
      o << "  " << members[i - 1] << " -> " << members[i]
        << " [style=dotted, dir=none, color=\"#7a3db8\", label=\"same storage\", fontcolor=\"#7a3db8\"];\n";
    auto leaf = leaf_by_storage.find(storage);
    if (leaf != leaf_by_storage.end())
      o << "  " << members.front() << " -> " << leaf->second
        << " [style=dotted, dir=none, color=\"#7a3db8\", label=\"same object\", fontcolor=\"#7a3db8\"];\n";
  }
  // Roots.
  int k = 0;
  for (const auto& w : r.walks) {
    if (w.nodes.empty()) continue;
    const std::string rid = "root" + std::to_string(k++);
    o << "  " << rid << " [label=" << q(w.key) << ", shape=ellipse, fillcolor=\"#c9f0c9\"];\n";
    o << "  " << rid << " -> n" << w.nodes.front() << " [color=\"#2e8b2e\"];\n";
  }
  // Legend.
  o << "  subgraph cluster_legend {\n";
  o << "    label=\"legend\"; fontsize=10; color=\"#cccccc\";\n";
  o << "    lg_root [label=\"root tensor\", shape=ellipse, fillcolor=\"#c9f0c9\"];\n";
  o << "    lg_node [label=\"backward node\\nkeeps: bytes it saves\"];\n";
  o << "    lg_leaf [label=\"leaf (AccumulateGrad)\", fillcolor=\"#cde7f7\"];\n";
  o << "    lg_saved [label=\"saved tensor\", shape=note, fillcolor=\"#fde3b0\"];\n";
  o << "    lg_freed [label=\"released saved tensor\", shape=note, style=\"filled,dashed\", fillcolor=\"#eeeeee\", fontcolor=\"#999999\"];\n";
  o << "    { rank=same; lg_root; lg_node; lg_leaf; lg_saved; lg_freed; }\n";
  o << "    lg_saved -> lg_freed [style=dotted, dir=none, color=\"#7a3db8\", label=\"same storage\", fontcolor=\"#7a3db8\"];\n";
  o << "    lg_root -> lg_node -> lg_leaf [style=invis];\n";
  o << "  }\n";
  o << "}\n";
  return o.str();
}

}  // namespace agtrace
