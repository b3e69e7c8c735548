// Every allocation, free, save, release and version bump is announced as an Event.
// The accountant (lib/report/accountant) observes them; ops and tensors never count
// bytes themselves (design note "Accounting is an observer").
#pragma once
#include <cstdint>
#include <string>

#include "util/interned_string.hpp"

namespace agtrace {

struct Event {
  // Pack: a saved value handed to saved-tensor hooks (also announced as Save); Unpack: such
  // a value unpacked (backward or a `_saved_*` read); Recompute: a checkpoint block's body
  // run again to rebuild its saved values (what = "begin ..." / "end ...").
  enum class Kind { Alloc, Free, Save, Release, VersionBump, Pack, Unpack, Recompute };
  Kind kind = Kind::Alloc;
  int64_t storage_id = -1;
  int64_t bytes = 0;
  int64_t saved_id = -1;      // Save / Release
  int64_t node_id = -1;       // Save / Release: the node holding the saved value
  InternedString what;        // Alloc: the op that allocated; Save: "Node._saved_attr"
  int64_t version = 0;        // VersionBump: the new version; Unpack: the version found
  // Saved-tensor hooks (Pack / Unpack / Save under hooks).
  std::string hooks;          // "fp16", "checkpoint", ...; empty: no hooks
  int64_t packed_storage_id = -1;  // the storage the hooks keep (-1: nothing kept)
  int64_t packed_bytes = 0;        // bytes of the tensor the hooks keep
  int64_t expected_version = 0;    // Unpack: the version at save time (no check under hooks)
  bool on_device = false;          // Alloc: a cuda storage (its bytes are the device's)
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void on_event(const Event& e) = 0;
};

// The sink of the run in progress (single-threaded, one run at a time); null = nobody listens.
namespace detail {
// The run's sink and position, read inline: every tensor, saved value and node of a run
// emits events naming the op, and each accessor was a call (issue #6).
extern EventSink* g_event_sink;
}  // namespace detail
inline EventSink* event_sink() { return detail::g_event_sink; }
void set_event_sink(EventSink* sink);
inline void emit(const Event& e) {
  if (EventSink* s = event_sink()) s->on_event(e);
}

// Where the run is: statement number and the op being computed, for Alloc events and
// for the statements that errors and lifetimes name.
// The text of the op running, kept interned: every event of an op names it (issue #6:
// looking it up per event was 3% of a long chain's run), and ops and backward nodes set and
// restore it around their work, which copied the text twice per op when it was a string.
// Setting it from a string looks the text up (among the recently interned first); setting
// it from an InternedString (a node's name, an OpScope's) or copying it costs a pointer.
class OpText {
 public:
  OpText& operator=(std::string_view text) {
    interned_ = text.empty() ? InternedString() : InternedString::recent(text);
    return *this;
  }
  OpText& operator=(const std::string& text) { return *this = std::string_view(text); }
  OpText& operator=(const char* text) { return *this = std::string_view(text); }
  OpText& operator=(InternedString text) {
    interned_ = text;
    return *this;
  }
  void clear() { interned_ = InternedString(); }
  bool empty() const { return interned_.empty(); }
  const std::string& str() const { return interned_.str(); }
  operator const std::string&() const { return str(); }
  InternedString interned() const { return interned_; }

 private:
  InternedString interned_;
};

struct RunPosition {
  int statement = -1;
  OpText op;             // op currently allocating, e.g. "mm" or "MmBackward0"
  bool in_backward = false;
  // Inside a checkpoint recomputation: the body statement being run again (-1: none).
  int recompute_statement = -1;
  int64_t backward_node = -1;  // in backward: id of the node running (set by the engine)
};
namespace detail {
extern RunPosition g_run_position;
}  // namespace detail
inline RunPosition& run_position() { return detail::g_run_position; }
// run_position().op, interned; looked up again only when the op changed (issue #6). Events
// come from the run's thread (see event_sink); the op text changes once per op while every
// allocation of the op names it.
inline InternedString current_op_interned() { return detail::g_run_position.op.interned(); }
// "<node>._saved_<attr>", interned, from a small cache of the pairs a program uses.
InternedString saved_value_name(const std::string& node, const std::string& attr);
// The same for interned names (a node's and a saved entry's): the cache compares pointers.
InternedString saved_value_name(InternedString node, InternedString attr);

// Budget for element data held in memory, counted in the bytes agtrace really holds (4 per
// float32 element, 8 per element of every other dtype: see Storage): checked before each
// allocation, so a hostile shape is refused instead of exhausting the machine. The meta
// device holds no element data and is exempt.
struct RunLimits {
  int64_t max_memory = int64_t{4} << 30;  // bytes of element data
  int64_t held = 0;                        // bytes of element data held now
};
namespace detail {
extern RunLimits g_run_limits;
}  // namespace detail
inline RunLimits& run_limits() { return detail::g_run_limits; }  // inline: every storage asks (issue #6)

// Creation-order ids: deterministic, never pointers (design note "Deterministic output").
struct IdCounters {
  int64_t storage = 0, tensor = 0, node = 0, saved = 0;
};
namespace detail {
extern IdCounters g_id_counters;
}  // namespace detail
inline IdCounters& id_counters() { return detail::g_id_counters; }  // inline: every object asks (issue #6)
void reset_run_state();

}  // namespace agtrace
