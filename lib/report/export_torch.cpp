#include "report/export_torch.hpp"

#include <cmath>
#include <stdexcept>

#include "errors.hpp"
#include "syntax/ast.hpp"
#include "tensor/dtype.hpp"

#ifndef AGTRACE_VERSION
#define AGTRACE_VERSION "dev"
#endif

namespace agtrace {

using ojson = nlohmann::ordered_json;

namespace {

ojson init_json(const InitSpec& init) {
  using K = InitSpec::Kind;
  switch (init.kind) {
    case K::Zeros: return "zeros";
    case K::Ones: return "ones";
    case K::Full: return ojson{{"full", init.a}};
    case K::Values: return ojson{{"values", init.values}};
    case K::Arange: return ojson{{"arange", {init.a, init.b}}};
    case K::Linspace: return ojson{{"linspace", {init.a, init.b}}};
    case K::Uniform: return ojson{{"uniform", {init.a, init.b}}};
    case K::Normal: return ojson{{"normal", {init.a, init.b}}};
    case K::Randint: return ojson{{"randint", {init.a, init.b}}};
  }
  throw std::logic_error("init_json: unknown initialiser kind");
}

ojson items_json(const std::vector<ProgramItem>& items) {
  ojson out = ojson::array();
  using K = ProgramItem::Kind;
  for (const ProgramItem& it : items) {
    switch (it.kind) {
      case K::Statement: out.push_back(it.source); break;
      case K::NoGrad: out.push_back(ojson{{"no_grad", items_json(it.body)}}); break;
      case K::EnableGrad: out.push_back(ojson{{"enable_grad", items_json(it.body)}}); break;
      case K::SetGradEnabled:
        out.push_back(ojson{{"set_grad_enabled", it.grad_mode}, {"body", items_json(it.body)}});
        break;
      case K::Try: out.push_back(ojson{{"try", items_json(it.body)}}); break;
      case K::SavedTensorHooks:
        out.push_back(ojson{{"saved_tensor_hooks", it.hooks_kind}, {"body", items_json(it.body)}});
        break;
      case K::Repeat: out.push_back(ojson{{"repeat", it.repeat}, {"body", items_json(it.body)}}); break;
      case K::Autocast: {
        ojson block{{"autocast", dtype_name(it.autocast_dtype)}, {"body", items_json(it.body)}};
        if (!it.device_type.empty()) block["device_type"] = it.device_type;
        out.push_back(block);
        break;
      }
      case K::Checkpoint:
        out.push_back(ojson{{"checkpoint", items_json(it.body)}, {"inputs", it.inputs}, {"outputs", it.outputs}});
        break;
    }
  }
  return out;
}

// A number as Python's json module reads it back to the same double.
std::string py_number(double v, DType dtype) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if ((dtype == DType::Int64 || dtype == DType::Bool) && std::fabs(v) < 9.2e18)
    return std::to_string(static_cast<long long>(v));
  return nlohmann::json(v).dump();
}

// One line of a comment: no line breaks or other control characters from a file name.
std::string comment_safe(const std::string& s) {
  std::string out;
  for (char c : s) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out;
}

// JSON text as a Python raw triple-quoted string. JSON never holds three double quotes in
// a row (an escaped quote is \", and after a closing quote comes , : ] } or space), and
// with ensure_ascii it holds no character that needs care, so r"""...""" is exact.
std::string py_json_literal(const std::string& json_text) {
  if (json_text.find("\"\"\"") != std::string::npos)
    throw std::logic_error("export: JSON text unexpectedly holds three quotes in a row");
  return "json.loads(r\"\"\"\n" + json_text + "\n\"\"\")";
}

}  // namespace

ojson scenario_to_json(const Scenario& sc) {
  ojson j;
  j["format"] = sc.format;
  j["name"] = sc.name;
  if (!sc.description.empty()) j["description"] = sc.description;
  j["device"] = sc.device;
  j["dtype"] = dtype_name(sc.dtype);
  j["seed"] = sc.seed;
  ojson tensors = ojson::object();
  for (const LeafSpec& l : sc.tensors) {
    tensors[l.name] = ojson{{"shape", l.shape},
                            {"dtype", dtype_name(l.dtype)},
                            {"requires_grad", l.requires_grad},
                            {"init", init_json(l.init)}};
  }
  j["tensors"] = tensors;
  j["program"] = items_json(sc.program);
  if (!sc.expect.is_null() && !sc.expect.empty()) j["expect"] = sc.expect;
  return j;
}

std::string leaf_values_json(const Scenario& sc) {
  if (sc.device == "meta" || sc.tensors.empty()) return "{}";
  std::string out = "{";
  bool first_leaf = true;
  for (const LeafSpec& l : sc.tensors) {
    out += first_leaf ? "\n  " : ",\n  ";
    first_leaf = false;
    out += nlohmann::json(l.name).dump(-1, ' ', true) + ": [";
    const std::vector<double> values = initial_values(l, sc.seed);
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out += (i % 8 == 0) ? ",\n    " : ", ";
      out += py_number(values[i], l.dtype);
    }
    out += "]";
  }
  return out + "\n}";
}

std::string export_torch_script(const Scenario& sc, const TorchExportOptions& opt) {
  // A statement agtrace cannot parse is bad input for `run` (exit 2), so it is for export
  // too: the script must run the program agtrace runs.
  for (const ProgramItem* item : sc.statements) {
    try {
      syntax::parse_statement(item->source);
    } catch (InputError& e) {
      e.file = sc.file.empty() ? opt.source_path : sc.file;
      e.statement = item->index;
      e.source = item->source;
      if (e.json_pointer.empty()) e.json_pointer = item->pointer;
      throw;
    }
  }
  const std::string source = opt.source_path.empty() ? sc.file : opt.source_path;
  std::string runner(torch_runner_source());
  if (!runner.empty() && runner.back() != '\n') runner += '\n';

  std::string s;
  s += "#!/usr/bin/env python3\n";
  s += "# PyTorch version of the agtrace scenario '" + comment_safe(sc.name) + "'.\n";
  s += "#\n";
  s += "# Generated by agtrace " AGTRACE_VERSION " (`agtrace export --torch`) from\n";
  s += "#   " + comment_safe(source.empty() ? std::string("(scenario text)") : source) + "\n";
  s += "#\n";
  s += "# A self-contained script: it creates the leaf tensors with the very values agtrace's\n";
  s += "# initialisers give them (random ones included), runs the program's statements in real\n";
  s += "# PyTorch (blocks as `with torch.no_grad():`, `with torch.enable_grad():`,\n";
  s += "# `with torch.set_grad_enabled(BOOL):`, `try:` and\n";
  s += "# `for _ in range(N):`; saved_tensor_hooks blocks under the hooks the runner defines,\n";
  s += "# checkpoint blocks through torch.utils.checkpoint, use_reentrant=False), and prints\n";
  s += "# the stable core of agtrace's JSON report as PyTorch sees it: statements and their\n";
  s += "# status, printed lines, walks, errors, gradients and memory.saved_bytes (measured\n";
  s += "# with saved-tensor pack hooks in a second pass). Compare it with\n";
  s += "# `agtrace run SCENARIO --format json --values`.\n";
  s += "#\n";
  s += "# Run it with a Python that has PyTorch (written for PyTorch 1.13):\n";
  s += "#   python3 " + comment_safe(opt.script_name.empty() ? std::string("script.py") : opt.script_name) + "\n";
  s += "# Options: --device cpu|cuda|meta (override the scenario's), --indent N. Exit status 0\n";
  s += "# when the program ran (\"raised\" says whether it raised outside a try block), 2 when\n";
  s += "# it cannot run here.\n";
  s += "#\n";
  s += "# Below: tools/torch_runner.py from agtrace's sources, verbatim; then the scenario and\n";
  s += "# its leaf values; then the call that runs it.\n";
  s += "\n";
  s += runner;
  s += "\n\n";
  s += "# ---------------------------------------------------------------------------------------\n";
  s += "# The scenario, as agtrace loaded it (defaults written out), and the initial values of its\n";
  s += "# leaves from agtrace's own initialisers (row-major, already rounded to each leaf's dtype).\n";
  s += "\n";
  s += "SCENARIO = " + py_json_literal(scenario_to_json(sc).dump(2, ' ', true)) + "\n";
  s += "\n";
  s += "LEAF_VALUES = " + py_json_literal(leaf_values_json(sc)) + "\n";
  s += "\n";
  s += "if __name__ == \"__main__\":\n";
  s += "    sys.exit(main(SCENARIO, LEAF_VALUES))\n";
  return s;
}

}  // namespace agtrace
