#include "util/process.hpp"

#include <cctype>
#include <string_view>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "errors.hpp"
#include "util/atomic_file.hpp"
#include "util/cleanup.hpp"

extern char** environ;

namespace agtrace {

namespace {
// Past this wait a render is worth a line on stderr, so a slow one does not look hung.
constexpr double kSlowNoteSeconds = 3;

std::string temp_folder() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

// Waits for pid; kills it once `timeout_s` (> 0) has passed. Returns false on a timeout.
bool wait_child(pid_t pid, double timeout_s, const std::string& slow_note, int& wstatus) {
  const auto start = std::chrono::steady_clock::now();
  bool noted = false;
  auto sleep = std::chrono::milliseconds(1);
  for (;;) {
    const pid_t got = ::waitpid(pid, &wstatus, timeout_s > 0 || !slow_note.empty() ? WNOHANG : 0);
    if (got == pid) return true;
    if (got < 0 && errno != EINTR) return true;  // not our child any more: nothing to wait for
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_s > 0 && waited > timeout_s) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
      }
      return false;
    }
    if (!noted && !slow_note.empty() && waited > kSlowNoteSeconds) {
      std::fprintf(stderr, "agtrace: %s\n", slow_note.c_str());
      noted = true;
    }
    std::this_thread::sleep_for(sleep);
    if (sleep < std::chrono::milliseconds(50)) sleep *= 2;
  }
}
}  // namespace

ProcessResult run_program(const std::vector<std::string>& argv, double timeout_s, const std::string& slow_note) {
  ProcessResult r;
  std::string err_path = temp_folder() + "/agtrace-stderr-XXXXXX";
  int err_fd = ::mkstemp(err_path.data());
  TempPathGuard remove_on_signal(err_fd >= 0 ? err_path : std::string());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (err_fd >= 0) posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  // agtrace ignores SIGPIPE (a closed reader of its stdout ends it at exit); the child gets
  // the default back, as it would from a shell.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc == 0) {
    r.started = true;
    set_cleanup_child(pid);  // a signal that ends agtrace stops the child too
    int wstatus = 0;
    r.timed_out = !wait_child(pid, timeout_s, slow_note, wstatus);
    set_cleanup_child(0);
    r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  }
  if (err_fd >= 0) {
    ::close(err_fd);
    try {
      r.err = read_file(err_path, std::size_t(1) << 20, "captured stderr");
    } catch (const InputError&) {
      r.err = "(its stderr could not be read back)";
    }
    ::unlink(err_path.c_str());
  }
  return r;
}

int64_t dot_node_count(const std::string& dot_text) {
  int64_t count = 0;
  size_t start = 0;
  while (start < dot_text.size()) {
    size_t end = dot_text.find('\n', start);
    if (end == std::string::npos) end = dot_text.size();
    const std::string_view line(dot_text.data() + start, end - start);
    start = end + 1;
    const size_t id = line.find_first_not_of(' ');
    if (id == std::string_view::npos) continue;
    size_t after = id;
    while (after < line.size() && (std::isalnum(static_cast<unsigned char>(line[after])) || line[after] == '_')) ++after;
    if (after == id || line.compare(after, 2, " [") != 0 || line.find("->") != std::string_view::npos) continue;
    const std::string_view name = line.substr(id, after - id);
    if (name != "graph" && name != "node" && name != "edge") ++count;
  }
  return count;
}

void render_graphviz(const std::string& dot_text, const std::string& format, const std::string& out_path,
                     double timeout_s, int64_t max_nodes) {
  const int64_t nodes = dot_node_count(dot_text);
  if (nodes > max_nodes) {
    InputError e("limit", "the graph has " + std::to_string(nodes) + " nodes, more than --render-max-nodes (" +
                              std::to_string(max_nodes) +
                              "): Graphviz's layout of a graph this size takes many minutes; raise the limit, or "
                              "write --dot FILE and render the part you need");
    e.file = out_path;
    throw e;
  }
  std::string dir = ".";
  auto slash = out_path.rfind('/');
  if (slash != std::string::npos) dir = slash == 0 ? "/" : out_path.substr(0, slash);
  const std::string stem = dir + "/.agtrace-" + std::to_string(::getpid());
  const std::string dot_file = stem + ".dot", out_tmp = stem + "." + format;
  TempPathGuard remove_dot_on_signal(dot_file), remove_out_on_signal(out_tmp);
  write_file_atomic(dot_file, dot_text);
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", timeout_s);
  ProcessResult r = run_program({"dot", "-T" + format, dot_file, "-o", out_tmp}, timeout_s,
                                "Graphviz 'dot -T" + format + "' is still rendering " + out_path + " (time limit " +
                                    limit + " s, --render-timeout)");
  ::unlink(dot_file.c_str());
  auto fail = [&](const std::string& what) {
    ::unlink(out_tmp.c_str());
    InputError e("io", what);
    e.file = out_path;
    throw e;
  };
  if (!r.started)
    fail("cannot render " + format + ": Graphviz's 'dot' was not found on PATH (install it: apt-get install graphviz)");
  if (r.timed_out)
    fail("Graphviz 'dot -T" + format + "' did not finish within " + limit +
         " s and was stopped (a larger limit: --render-timeout SECONDS)");
  if (r.status != 0)
    fail("Graphviz 'dot -T" + format + "' failed (exit " + std::to_string(r.status) + "): " + r.err);
  // A target that is not a regular file (a device, a FIFO, a symlink) is never renamed over:
  // write_file_atomic writes through it or replaces what the link names.
  struct stat st {};
  if (::lstat(out_path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    std::string rendered;
    try {
      rendered = read_file(out_tmp, kMaxInputBytes, "rendered graph");
    } catch (const InputError&) {
      ::unlink(out_tmp.c_str());
      throw;
    }
    ::unlink(out_tmp.c_str());
    write_file_atomic(out_path, rendered);
    return;
  }
  if (std::rename(out_tmp.c_str(), out_path.c_str()) != 0) fail("cannot rename the rendered file into place");
}

}  // namespace agtrace
