// Errors that reach the command line. Two families:
//  - InputError: the scenario file or a statement is malformed (exit status 2).
//    It names the file and either a JSON pointer or a statement and column.
//  - ScenarioError (lib/interp): the program raised, as PyTorch would (exit 3).
#pragma once
#include <stdexcept>
#include <string>

namespace agtrace {

struct InputError : std::runtime_error {
  std::string kind;          // "json", "schema", "syntax", "limit", "io", "usage"
  std::string file;          // path of the scenario, empty when not known
  std::string json_pointer;  // e.g. "/tensors/W/shape/1"; empty when not applicable
  int statement = -1;        // statement number (0-based), -1 when not applicable
  int column = -1;           // 1-based column inside the statement text, -1 when n/a
  std::string source;        // the statement text, for a caret under `column`
  std::string detail;        // the message without location

  InputError(std::string kind_, std::string detail_)
      : std::runtime_error(detail_), kind(std::move(kind_)), detail(std::move(detail_)) {}

  // Full human message: "file: /pointer: detail" or "file: statement 3, column 7: detail".
  std::string describe() const {
    std::string out;
    if (!file.empty()) out += file + ": ";
    if (!json_pointer.empty()) out += json_pointer + ": ";
    if (statement >= 0) {
      out += "statement " + std::to_string(statement);
      if (column >= 0) out += ", column " + std::to_string(column);
      out += ": ";
    }
    out += detail;
    return out;
  }
};

}  // namespace agtrace

#include <nlohmann/json.hpp>

namespace agtrace {

// An error the scenario's program raises, as PyTorch would raise it (spec: errors[]).
// `facts` carries what the report shows and tests assert (versions, shapes, nodes);
// the message is PyTorch's wording where agtrace mirrors it.
struct ScenarioError : std::runtime_error {
  std::string kind;   // leaf_inplace, saved_tensor_modified, shape_mismatch, ...
  std::string phase;  // "forward" or "backward" (filled by whoever knows)
  nlohmann::json facts = nlohmann::json::object();

  ScenarioError(std::string kind_, const std::string& message)
      : std::runtime_error(message), kind(std::move(kind_)) {}
};

}  // namespace agtrace
