// Runs a scenario statement by statement: names -> values, blocks, errors where PyTorch
// raises them, walks and snapshots of the graph, and the accountant's figures.
#pragma once
#include <functional>
#include <string>

#include "interp/result.hpp"
#include "scenario/scenario.hpp"

namespace agtrace {

class DeviceBackend;

struct RunOptions {
  std::string device;        // overrides the scenario's device when not empty
  bool keep_values = false;  // --values: element values of leaves and gradients in the result
  // --values-limit: a leaf or gradient of more elements keeps no values, only their count
  // (values_elided); 0 keeps every value.
  int64_t values_limit = 0;
  int64_t max_memory = int64_t{4} << 30;  // --max-memory: budget for element data (see RunLimits)
  // --max-process-memory: budget for the whole process's peak resident memory (graph nodes,
  // saved-value records, events and report buffers as well as element data), checked after
  // the first statement, every 32nd and any that moves element data by a mebibyte (getrusage
  // is a system call); a checked statement that leaves it exceeded raises `limit`. 0: half the
  // machine's physical memory (default_process_memory_budget()).
  int64_t max_process_memory = 0;
  // Run checkpoint blocks as plain function calls (the "without checkpointing" figures).
  bool checkpoint_plain = false;
  // Run autocast blocks' bodies as plain statements (the "without autocast" figures).
  bool autocast_plain = false;
  // Check the holder index against a walk over every live tensor and node at every
  // statement end (slow: for tests; also set by AGTRACE_VERIFY_HOLDERS=1). A disagreement
  // throws std::logic_error.
  bool verify_holders = false;
  // Where the storages of a cuda run live (tensor/device_backend.hpp): the CUDA plugin
  // `agtrace run --device cuda` loads, or a test's host stand-in. Null on a cuda run: the
  // first cuda allocation raises `unsupported` saying no device is there.
  DeviceBackend* device_backend = nullptr;
  // Called after each statement run (each run of one inside a repeat block): its index, the
  // program's statement count, and how many operator and function calls ran so far. The
  // command line's progress line uses it; it must not change the run.
  std::function<void(int statement, int statements, int64_t calls)> on_statement_end;
};

// Parses every statement first (a syntax error is an InputError naming the statement and
// column, before anything runs), then runs the program. Errors the program raises are
// recorded in the result, not thrown.
RunResult run_scenario(const Scenario& scenario, const RunOptions& options);

// Half the machine's physical memory: the default --max-process-memory.
int64_t default_process_memory_budget();
// The process's peak resident memory so far, in bytes (getrusage's ru_maxrss).
int64_t process_peak_resident_bytes();

}  // namespace agtrace
