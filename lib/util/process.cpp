#include "util/process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "errors.hpp"
#include "util/atomic_file.hpp"

extern char** environ;

namespace agtrace {

ProcessResult run_program(const std::vector<std::string>& argv) {
  ProcessResult r;
  char err_path[] = "/tmp/agtrace-stderr-XXXXXX";
  int err_fd = ::mkstemp(err_path);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (err_fd >= 0) posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc == 0) {
    r.started = true;
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0) {
    }
    r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  }
  if (err_fd >= 0) {
    ::close(err_fd);
    std::ifstream in(err_path);
    std::ostringstream ss;
    ss << in.rdbuf();
    r.err = ss.str();
    ::unlink(err_path);
  }
  return r;
}

void render_graphviz(const std::string& dot_text, const std::string& format, const std::string& out_path) {
  std::string dir = ".";
  auto slash = out_path.rfind('/');
  if (slash != std::string::npos) dir = slash == 0 ? "/" : out_path.substr(0, slash);
  const std::string stem = dir + "/.agtrace-" + std::to_string(::getpid());
  const std::string dot_file = stem + ".dot", out_tmp = stem + "." + format;
  write_file_atomic(dot_file, dot_text);
  ProcessResult r = run_program({"dot", "-T" + format, dot_file, "-o", out_tmp});
  ::unlink(dot_file.c_str());
  if (!r.started) {
    ::unlink(out_tmp.c_str());
    InputError e("io", "cannot render " + format + ": Graphviz's 'dot' was not found on PATH (install it: apt-get install graphviz)");
    e.file = out_path;
    throw e;
  }
  if (r.status != 0) {
    ::unlink(out_tmp.c_str());
    InputError e("io", "Graphviz 'dot -T" + format + "' failed (exit " + std::to_string(r.status) + "): " + r.err);
    e.file = out_path;
    throw e;
  }
  if (std::rename(out_tmp.c_str(), out_path.c_str()) != 0) {
    ::unlink(out_tmp.c_str());
    InputError e("io", "cannot rename the rendered file into place");
    e.file = out_path;
    throw e;
  }
}

}  // namespace agtrace
