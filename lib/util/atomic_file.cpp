#include "util/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "errors.hpp"

namespace agtrace {

namespace {
[[noreturn]] void io_error(const std::string& path, const std::string& what) {
  InputError e("io", what + ": " + std::strerror(errno));
  e.file = path;
  throw e;
}
}  // namespace

void write_file_atomic(const std::string& path, const std::string& content) {
  std::string dir = ".";
  std::string base = path;
  auto slash = path.rfind('/');
  if (slash != std::string::npos) {
    dir = slash == 0 ? "/" : path.substr(0, slash);
    base = path.substr(slash + 1);
  }
  std::string tmp = dir + "/." + base + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error(path, "cannot create temporary file " + tmp);
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      errno = saved;
      io_error(path, "cannot write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    errno = saved;
    io_error(path, "cannot sync");
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    io_error(path, "cannot rename " + tmp + " to " + path);
  }
  // Sync the folder so the rename itself is durable.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) io_error(path, "cannot read file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace agtrace
