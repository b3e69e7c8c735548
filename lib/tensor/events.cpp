#include "tensor/events.hpp"

#include <vector>

namespace agtrace {

namespace {
EventSink* g_sink = nullptr;
RunPosition g_position;
IdCounters g_ids;
RunLimits g_limits;
}  // namespace

RunLimits& run_limits() { return g_limits; }

EventSink* event_sink() { return g_sink; }
void set_event_sink(EventSink* sink) { g_sink = sink; }
RunPosition& run_position() { return g_position; }

InternedString current_op_interned() {
  // Events come from the run's thread (see event_sink); the op text changes once per op
  // while every allocation of the op names it.
  return g_position.op.interned();
}

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
IdCounters& id_counters() { return g_ids; }
void reset_run_state() {
  g_position = RunPosition{};
  g_ids = IdCounters{};
  g_limits.held = 0;
}

}  // namespace agtrace
