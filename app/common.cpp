#include <unistd.h>

#include <cstdlib>

#include "commands.hpp"

namespace agtrace::app {

bool want_color(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;  // https://no-color.org
  return ::isatty(STDOUT_FILENO) != 0;
}

}  // namespace agtrace::app
