// lowering/: from a checked program to pipeline.bin.
#pragma once

#include <optional>
#include <string>

#include "compiler/program.h"
#include "lowering/kernel_compiler.h"
#include "lowering/lir.h"
#include "support/diagnostics.h"

namespace orch {

struct LowerOptions {
  CompileOptions compile;     // archs come from the program's targets when empty
  bool print_passes = false;  // also on with ORCH_PRINT_PASSES=1
};

// Runs every lowering pass on `program` (which it rewrites), builds the lowered program,
// compiles its kernels and returns the artifact bytes; nullopt after errors, which are in
// `diags`.
// `lowered`, if given, receives the lowered program with its compiled code (for tests).
std::optional<std::string> lower_to_artifact(ir::Program& program, SourceManager& sources,
                                             const LowerOptions& options, DiagnosticEngine& diags,
                                             lir::Program* lowered = nullptr);

// The lowering passes without kernel compilation and serialization: the lowered program, for
// `--emit=ir|cuda` and tests that need no NVRTC. `program` is rewritten on the way.
lir::Program lower_to_lir(ir::Program& program);

// Only the passes on the IR (before build_lir), for tests that look at what they do to it.
void lower_graphs(ir::Program& program);

}  // namespace orch
