#include "util/cleanup.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>

namespace agtrace {

namespace {

constexpr int kSlots = 16;

struct Slot {
  char path[PATH_MAX];
  std::atomic<int> state{0};  // 0 free, 1 being written, 2 registered
};
Slot g_slots[kSlots];
std::atomic<pid_t> g_child{0};

static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads these");
static_assert(std::atomic<pid_t>::is_always_lock_free, "the signal handler reads these");

void on_signal(int sig) {
  const pid_t child = g_child.load();
  if (child > 0) ::kill(child, SIGTERM);
  for (Slot& s : g_slots)
    if (s.state.load() == 2) ::unlink(s.path);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void install_cleanup_handlers() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    // Every cleanup signal is blocked while one runs, so two never unlink at once.
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

TempPathGuard::TempPathGuard(const std::string& path) {
  if (path.empty() || path.size() >= PATH_MAX) return;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!g_slots[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(2);  // the path is complete before the handler may read it
    slot_ = i;
    return;
  }
}

TempPathGuard::~TempPathGuard() { release(); }

void TempPathGuard::release() {
  if (slot_ < 0) return;
  g_slots[slot_].state.store(0);
  slot_ = -1;
}

void set_cleanup_child(pid_t pid) { g_child.store(pid); }

}  // namespace agtrace
