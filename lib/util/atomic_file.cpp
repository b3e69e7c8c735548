#include "util/atomic_file.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "errors.hpp"
#include "util/cleanup.hpp"

namespace agtrace {

namespace {
[[noreturn]] void io_error(const std::string& path, const std::string& what) {
  InputError e("io", what + ": " + std::strerror(errno));
  e.file = path;
  throw e;
}
// A target that is not a regular file (a device such as /dev/null or /dev/stdout, a FIFO, a
// terminal, a symlink to one) is opened and written as `cat > path` writes it: renaming a
// temporary over it would replace the device node with a regular file.
int open_through(const std::string& path) {
  // O_NONBLOCK: a FIFO nobody reads is an error (ENXIO) instead of a wait forever.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == ENXIO) io_error(path, "cannot write: a FIFO with no reader");
    io_error(path, "cannot open for writing");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(const std::string& requested) : requested_(requested), path_(requested) {
  // A symlink is followed: the file it names is replaced (atomically if it is a regular
  // file), never the link itself.
  struct stat st {};
  if (::lstat(requested.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    if (::stat(requested.c_str(), &st) != 0) {  // a dangling link: write where it points
      fd_ = open_through(requested);
      return;
    }
    if (S_ISREG(st.st_mode)) {
      char* real = ::realpath(requested.c_str(), nullptr);
      if (!real) io_error(requested, "cannot resolve the symlink");
      path_ = real;
      std::free(real);
    }
  }
  if (::stat(path_.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      errno = EISDIR;
      io_error(requested, "cannot write");
    }
    if (!S_ISREG(st.st_mode)) {
      fd_ = open_through(path_);
      return;
    }
  }
  dir_ = ".";
  std::string base = path_;
  auto slash = path_.rfind('/');
  if (slash != std::string::npos) {
    dir_ = slash == 0 ? "/" : path_.substr(0, slash);
    base = path_.substr(slash + 1);
  }
  tmp_ = dir_ + "/." + base + ".tmp." + std::to_string(::getpid());
  remove_on_signal_ = std::make_unique<TempPathGuard>(tmp_);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) io_error(path_, "cannot create temporary file " + tmp_);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::fail(const std::string& what) {
  const int saved = errno;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  errno = saved;
  io_error(tmp_.empty() ? requested_ : path_, what);
}

void AtomicFileWriter::write(std::string_view content) {
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd_, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write");
    }
    done += static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (tmp_.empty()) {  // written through
    const int fd = fd_;
    fd_ = -1;
    committed_ = true;
    if (::close(fd) != 0) io_error(requested_, "cannot write");
    return;
  }
  if (::fsync(fd_) != 0) fail("cannot sync");
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int saved = errno;
    ::unlink(tmp_.c_str());
    errno = saved;
    io_error(path_, "cannot rename " + tmp_ + " to " + path_);
  }
  committed_ = true;
  // Sync the folder so the rename itself is durable.
  int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  AtomicFileWriter file(path);
  file.write(content);
  file.commit();
}

namespace {
std::string mib_text(std::size_t bytes) {
  return bytes % (std::size_t(1) << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

// True when fd is an anonymous pipe (a shell's <(gen) or a | ): its writer exists from the
// start, so waiting on it is the legitimate wait for data. Linux names those "pipe:[N]".
bool is_anonymous_pipe(int fd) {
  char link[64];
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(proc.c_str(), link, sizeof link - 1);
  return n > 5 && std::strncmp(link, "pipe:", 5) == 0;
}
}  // namespace

std::string read_file(const std::string& path, std::size_t max_bytes, const std::string& what) {
  auto limit_error = [&](const std::string& size_note) {
    InputError e("limit", "the " + what + " is larger than " + mib_text(max_bytes) + size_note);
    e.file = path;
    return e;
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) io_error(path, "cannot read file");
  if (S_ISDIR(st.st_mode)) {
    InputError e("io", "cannot read file: it is a directory");
    e.file = path;
    throw e;
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes)
    throw limit_error(" (" + std::to_string(st.st_size) + " bytes)");
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) io_error(path, "cannot read file");
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && !is_anonymous_pipe(fd)) {
    // A named FIFO opened without O_NONBLOCK waits in open(2) until someone writes; opened
    // with it, poll(2) waits for data or for a writer that closed, for a bounded time.
    struct pollfd p {fd, POLLIN, 0};
    int ready = 0;
    do {
      ready = ::poll(&p, 1, kFifoWriterWaitSeconds * 1000);
    } while (ready < 0 && errno == EINTR);
    if (ready == 0) {
      InputError e("io", "cannot read file: a FIFO nobody wrote to within " + std::to_string(kFifoWriterWaitSeconds) +
                             " s");
      e.file = path;
      throw e;
    }
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      io_error(path, "cannot read file");
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > max_bytes) throw limit_error(S_ISREG(st.st_mode) ? " (it grew while read)" : "");
  }
  return text;
}

}  // namespace agtrace
