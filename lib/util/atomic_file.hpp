// Writes a file so that a reader never sees it half written: a temporary file in the
// same folder, flushed and fsync'ed, then renamed over the target (rename is atomic on
// one filesystem). An interrupted run leaves the old file intact. Only a regular file or a
// new path is replaced so: a device, FIFO or terminal is written through (as `cat > path`
// does), a symlink is followed (the file it names is replaced, the link stays), and a
// folder is an error.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace agtrace {

class TempPathGuard;

// The same file written piece by piece, so a long report goes to its file as it is made
// instead of being held whole in memory first: the pieces go to the temporary file, and
// commit() syncs and renames it into place. Destroyed without commit() (an exception while
// writing), the temporary file is removed and the old file stays. A target that is not a
// regular file is written through, piece by piece. Throws InputError (kind "io") naming
// the path.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  void write(std::string_view content);
  void commit();

 private:
  [[noreturn]] void fail(const std::string& what);
  std::string requested_, path_, dir_, tmp_;  // tmp_ empty: written through
  int fd_ = -1;
  bool committed_ = false;
  std::unique_ptr<TempPathGuard> remove_on_signal_;
};

// Throws InputError (kind "io") naming the path when any step fails; the temporary file
// is removed on failure.
void write_file_atomic(const std::string& path, const std::string& content);

// The largest input file agtrace reads unless a caller asks for less: a golden or a report
// given to `diff` (a scenario is limited to 16 MiB by its loader).
constexpr std::size_t kMaxInputBytes = std::size_t(256) << 20;  // 256 MiB

// How long `read_file` waits for a named FIFO's writer before it gives up.
constexpr int kFifoWriterWaitSeconds = 10;

// Reads a whole input file with a bound, so no input can block or exhaust memory: a
// directory is an error before it is opened; a regular file larger than `max_bytes` is
// refused by its size; anything else (a device such as /dev/zero, a pipe) is read up to one
// byte past the limit and refused there. A named FIFO is opened without blocking and waited
// on for kFifoWriterWaitSeconds at most, so one that nobody writes is an error instead of a
// wait forever; a pipe from a shell's <(gen), which has its writer, is read as it comes.
// `what` names the file in the limit message ("the golden report is larger than ...").
// Throws InputError: kind "io" (cannot read), "limit" (too large).
std::string read_file(const std::string& path, std::size_t max_bytes = kMaxInputBytes,
                      const std::string& what = "file");

}  // namespace agtrace
