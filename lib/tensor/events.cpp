#include "tensor/events.hpp"

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
IdCounters& id_counters() { return g_ids; }
void reset_run_state() {
  g_position = RunPosition{};
  g_ids = IdCounters{};
  g_limits.held = 0;
}

}  // namespace agtrace
