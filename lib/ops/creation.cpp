#include "ops/table.hpp"
namespace agtrace::ops {
std::vector<OpEntry> creation_ops() { return {}; }
}  // namespace agtrace::ops
