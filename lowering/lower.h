// lowering/: from a checked program to pipeline.bin.
#pragma once

#include <optional>
#include <string>

#include "compiler/program.h"
#include "lowering/kernel_compiler.h"
#include "support/diagnostics.h"

namespace orch {

struct LowerOptions {
  CompileOptions compile;     // archs come from the program's targets when empty
  bool print_passes = false;  // also on with ORCH_PRINT_PASSES=1
};

// Runs every lowering pass on `program` (which it rewrites) and returns the artifact bytes;
// nullopt after errors, which are in `diags`.
std::optional<std::string> lower_to_artifact(ir::Program& program, SourceManager& sources,
                                             const LowerOptions& options, DiagnosticEngine& diags);

// The lowering passes without kernel compilation and serialization, for `--emit=ir` and
// tests that need no NVRTC.
void lower_graphs(ir::Program& program);

}  // namespace orch
