// What agtrace removes when a signal ends it early: the temporary files it has made (an
// atomic write's `.NAME.tmp.PID`, the `.agtrace-PID.*` files of a Graphviz render, the
// captured stderr of a child) and the child it waits for. SIGINT, SIGTERM and SIGHUP run a
// handler that unlinks every registered path and stops the child, then re-raises the
// signal with its default action, so the caller still sees the process killed by it.
//
// The handler only reads a fixed table (no allocation, no locks): unlink(2), kill(2),
// signal(2) and raise(3) are async-signal-safe.
#pragma once
#include <sys/types.h>

#include <string>

namespace agtrace {

// Installs the handlers once. A signal the parent left ignored (nohup, a background job's
// SIGINT) stays ignored, as shells expect of a program.
void install_cleanup_handlers();

// Registers `path` for removal on a signal until the returned guard is destroyed (or
// release() is called, once the file was renamed into place or removed). Paths longer than
// the table's slot, or a full table, are not registered: the file is then only removed on
// the ordinary paths.
class TempPathGuard {
 public:
  explicit TempPathGuard(const std::string& path);
  ~TempPathGuard();
  TempPathGuard(const TempPathGuard&) = delete;
  TempPathGuard& operator=(const TempPathGuard&) = delete;
  void release();

 private:
  int slot_ = -1;
};

// The child process a signal should stop too (0: none).
void set_cleanup_child(pid_t pid);

}  // namespace agtrace
