// Op-table fragment: see table.hpp. Entries are added by the family's implementation.
#include "ops/table.hpp"
#include "ops/table_util.hpp"

namespace agtrace::ops {

std::vector<OpEntry> shape_ops() { return {}; }

}  // namespace agtrace::ops
