// Standard output as a checked stream. A report that never reached its reader is an error,
// not a success: std::cout writes through a buffer of ours that keeps the first write(2)
// error, and at exit the buffer is flushed and the error reported (exit 2, with a message
// on stderr): a full disk (/dev/full, a file over its size limit), a closed stdout (`>&-`).
//
// A reader that went away (`agtrace run BIG | head -1`) is the end of the output, not an
// error: SIGPIPE is ignored while agtrace works, so every output file (-o, --dot, --junit,
// goldens) is still written in full and temporary files are removed, and at exit agtrace
// ends as cat does in that pipeline: killed by SIGPIPE, silently (status 141 in a shell).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <streambuf>

#include "commands.hpp"
#include "util/cleanup.hpp"

namespace agtrace::app {

namespace {

class CheckedStdoutBuf : public std::streambuf {
 public:
  CheckedStdoutBuf() { setp(buf_, buf_ + sizeof buf_); }
  int first_errno() const { return errno_; }

 protected:
  int_type overflow(int_type ch) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  // Writes the buffer out; after the first error the rest is dropped (the error is what
  // the user learns), so a dead pipe does not cost a failed write per line.
  bool drain() {
    const char* p = pbase();
    const char* end = pptr();
    while (errno_ == 0 && p < end) {
      const ssize_t n = ::write(STDOUT_FILENO, p, static_cast<size_t>(end - p));
      if (n < 0) {
        if (errno == EINTR) continue;
        errno_ = errno;
      } else {
        p += n;
      }
    }
    setp(buf_, buf_ + sizeof buf_);
    return errno_ == 0;
  }

  char buf_[1 << 16];
  int errno_ = 0;
};

CheckedStdoutBuf* g_buf = nullptr;
std::streambuf* g_original = nullptr;
bool g_stdout_was_closed = false;

void finish_stdout() {
  std::cout.flush();
  std::cout.rdbuf(g_original);  // static destructors after this one flush std::cout again
  const int err = g_buf->first_errno();
  if (err == 0) return;
  if (err == EPIPE) {
    std::signal(SIGPIPE, SIG_DFL);
    std::raise(SIGPIPE);
  }
  const std::string why = g_stdout_was_closed ? "it is closed" : std::strerror(err);
  std::fprintf(stderr, "agtrace: error: [io] cannot write to standard output: %s\n", why.c_str());
  std::fflush(stderr);
  ::_exit(kBadInput);
}

}  // namespace

void guard_standard_streams() {
  // A closed standard descriptor is taken by the next file opened (an output's temporary
  // file would then receive the report). It is filled with /dev/null opened read-only, so
  // a write to it fails (EBADF) as a write to the closed one would.
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (fd == STDOUT_FILENO) g_stdout_was_closed = true;
    const int got = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (got >= 0 && got != fd) ::close(got);  // cannot happen: open returns the lowest free fd
  }
  std::signal(SIGPIPE, SIG_IGN);
  install_cleanup_handlers();
  static CheckedStdoutBuf buf;
  g_buf = &buf;
  g_original = std::cout.rdbuf(&buf);
  std::atexit(finish_stdout);
}

}  // namespace agtrace::app
