#include <catch2/catch.hpp>

#include <filesystem>

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
