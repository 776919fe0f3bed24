// orch-run pipeline.bin [--param NAME=VALUE]... [--fill NAME=SPEC]... [--dump NAME=FILE]...
//         [--repeat N] [--warmup N] [--seed S] [--device N] [--force-ptx] [--list]
// Loads a compiled pipeline, binds and fills it, launches it and times the launches.
// Exit codes: 0 success, 1 an error (one "orch-run: ..." line), 2 a usage error.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "tools/orch_run/options.h"
#include "tools/orch_run/runner.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  orch::run::Options options;
  const orch::run::ParseOutcome parsed =
      orch::run::parse_command_line(args, &options, std::cout, std::cerr);
  if (!parsed.run) return parsed.exit_code;
  try {
    return orch::run::run(options, std::cout, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << "orch-run: " << e.what() << "\n";
    return orch::run::kExitError;
  }
}
