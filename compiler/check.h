// The front half of orchc: an AST in, a checked program out. Every rule of
// docs/diagnostics.md is enforced here; problems are reported to `diags` and checking goes
// on, so one run shows every independent error.
#pragma once

#include <memory>
#include <string>

#include "compiler/program.h"
#include "grammar/ast.h"
#include "support/diagnostics.h"

namespace orch {

struct CheckOptions {
  std::string target_override;  // --target: a profile name or a .yaml path; wins over `target`
  std::string targets_dir;      // --targets-dir
};

// Returns the program whenever names resolved well enough to build it (also when rule
// violations were found: the emitters can still show it); null after fatal errors.
std::unique_ptr<ir::Program> check_module(const ast::Module& module, SourceManager& sources,
                                          const CheckOptions& options, DiagnosticEngine& diags);

// Reads `path`, parses and checks it: the whole of `orchc --check`.
struct CheckResult {
  std::unique_ptr<ast::Module> module;
  std::unique_ptr<ir::Program> program;
};
CheckResult check_file(const std::string& path, SourceManager& sources,
                       const CheckOptions& options, DiagnosticEngine& diags);
CheckResult check_text(const std::string& path, std::string text, SourceManager& sources,
                       const CheckOptions& options, DiagnosticEngine& diags);

}  // namespace orch
