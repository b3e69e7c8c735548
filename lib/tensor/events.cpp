#include "tensor/events.hpp"

#include <vector>

namespace agtrace {

namespace detail {
EventSink* g_event_sink = nullptr;
RunPosition g_run_position;
IdCounters g_id_counters;
RunLimits g_run_limits;
}  // namespace detail

void set_event_sink(EventSink* sink) { detail::g_event_sink = sink; }

InternedString saved_value_name(const std::string& node, const std::string& attr) {
  return saved_value_name(InternedString::recent(node), InternedString::recent(attr));
}
InternedString saved_value_name(InternedString node, InternedString attr) {
  struct Entry {
    InternedString node, attr, name;
  };
  // A program saves under a handful of (node, attribute) pairs. Interned texts are equal
  // when their pointers are (issue #6: comparing the strings was ~90 instructions per save).
  static std::vector<Entry> cache;
  for (const Entry& e : cache)
    if (e.attr == attr && e.node == node) return e.name;
  const InternedString name(node.str() + "._saved_" + attr.str());
  if (cache.size() < 64) cache.push_back({node, attr, name});
  return name;
}
void reset_run_state() {
  detail::g_run_position = RunPosition{};
  detail::g_id_counters = IdCounters{};
  detail::g_run_limits.held = 0;
}

}  // namespace agtrace
