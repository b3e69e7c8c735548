// Subcommands of the agtrace command line. Each registers its options on the CLI11 app
// and returns the exit status when run: 0 ran, 1 a check failed, 2 bad input or usage,
// 3 the scenario raised an error outside try.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace agtrace {
struct Scenario;
}

namespace agtrace::app {

enum Exit { kOk = 0, kCheckFailed = 1, kBadInput = 2, kRaised = 3 };

using Runner = std::function<int()>;

Runner add_run(CLI::App& root);
Runner add_check(CLI::App& root);
Runner add_validate(CLI::App& root);
Runner add_ops(CLI::App& root);
Runner add_export(CLI::App& root);
Runner add_diff(CLI::App& root);  // issue #4: compare two runs' memory
Runner add_record(CLI::App& root);  // run the embedded recorder: a PyTorch model in, a scenario out

// Called first in main: stdout write errors become exit 2 with a message at exit, a closed
// reader (SIGPIPE) ends agtrace silently as cat ends, and signals remove temporary files.
void guard_standard_streams();

// --color auto|always|never, honouring NO_COLOR and whether stdout is a terminal.
bool want_color(const std::string& mode);

// "4G", "512M", "64K" or a plain number of bytes; throws InputError (usage) otherwise.
int64_t parse_bytes(const std::string& text);

// Parses every statement of the scenario loaded from `path` (a syntax error throws its
// InputError) and prints one "agtrace: error: [unsupported]" line on stderr per call of an
// operation agtrace does not have; returns how many. validate and export --torch refuse a
// scenario with any (a program that would stop at `unsupported`).
int report_unknown_operations(const Scenario& sc, const std::string& path);

}  // namespace agtrace::app
