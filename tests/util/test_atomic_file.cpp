#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "errors.hpp"
#include "support/command.hpp"
#include "util/atomic_file.hpp"

namespace fs = std::filesystem;

TEST_CASE("write_file_atomic replaces the file and leaves no temporary", "[util]") {
  const std::string dir = agtrace::test::temp_dir();
  const std::string path = dir + "/out.txt";
  agtrace::write_file_atomic(path, "first");
  CHECK(agtrace::read_file(path) == "first");
  agtrace::write_file_atomic(path, "second");
  CHECK(agtrace::read_file(path) == "second");
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) (void)e, ++n;
  CHECK(n == 1);
  fs::remove_all(dir);
}

TEST_CASE("write_file_atomic into a missing folder is an io error naming the path", "[util]") {
  try {
    agtrace::write_file_atomic("/nonexistent-agtrace-dir/x.txt", "data");
    FAIL("expected InputError");
  } catch (const agtrace::InputError& e) {
    CHECK(e.kind == "io");
    CHECK(e.file == "/nonexistent-agtrace-dir/x.txt");
  }
}

TEST_CASE("write_file_atomic writes through a FIFO instead of replacing it", "[util]") {
  const std::string dir = agtrace::test::temp_dir();
  const std::string fifo = dir + "/pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No reader: a clear error at once, not a wait forever, and the FIFO stays a FIFO.
  try {
    agtrace::write_file_atomic(fifo, "data");
    FAIL("expected InputError");
  } catch (const agtrace::InputError& e) {
    CHECK(e.kind == "io");
    CHECK(std::string(e.what()).find("no reader") != std::string::npos);
  }
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  agtrace::write_file_atomic(fifo, "through the pipe");
  char buf[64] = {};
  const ssize_t n = ::read(reader, buf, sizeof buf - 1);
  ::close(reader);
  CHECK(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0) == "through the pipe");
  CHECK(fs::is_fifo(fs::symlink_status(fifo)));
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) (void)e, ++entries;
  CHECK(entries == 1);  // no temporary left beside it
  fs::remove_all(dir);
}

TEST_CASE("write_file_atomic follows a symlink and keeps it, and a folder is an error", "[util]") {
  const std::string dir = agtrace::test::temp_dir();
  fs::create_directory(dir + "/real");
  agtrace::write_file_atomic(dir + "/real/target.txt", "old");
  fs::create_symlink(dir + "/real/target.txt", dir + "/link.txt");
  agtrace::write_file_atomic(dir + "/link.txt", "new");
  CHECK(fs::is_symlink(fs::symlink_status(dir + "/link.txt")));
  CHECK(agtrace::read_file(dir + "/real/target.txt") == "new");
  // A dangling link: the file it names is created, as `cat > link` does.
  fs::create_symlink(dir + "/real/made.txt", dir + "/dangling.txt");
  agtrace::write_file_atomic(dir + "/dangling.txt", "made");
  CHECK(fs::is_symlink(fs::symlink_status(dir + "/dangling.txt")));
  CHECK(agtrace::read_file(dir + "/real/made.txt") == "made");
  CHECK_THROWS_AS(agtrace::write_file_atomic(dir + "/real", "x"), agtrace::InputError);
  CHECK(fs::is_directory(dir + "/real"));
  fs::remove_all(dir);
}
