// lowering/: from a checked program to pipeline.bin.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "compiler/program.h"
#include "lowering/kernel_compiler.h"
#include "lowering/lir.h"
#include "lowering/mir.h"
#include "support/diagnostics.h"

namespace orch {

namespace lowering {
class BoundProfile;
}

struct LowerOptions {
  CompileOptions compile;     // archs come from the program's targets when empty
  bool print_passes = false;  // also on with ORCH_PRINT_PASSES=1
  // Programmatic (PDL) edges between kernels that wait at entry, where every target has them
  // (orchc --no-pdl turns them off).
  bool pdl = true;
  // Copies of a `while` body per WHILE iteration, each a no-op once the condition is false
  // (orchc --unroll N); 0: the compiler's choice per loop (lowering::auto_unroll: copies for 32 nodes
  // per iteration, 8 to 16), 1: no unrolling.
  uint32_t unroll = 0;
  // A kernel that fits in one wave waits for the collective before it rather than running
  // beside it (lowering/line_up_collectives.cpp; orchc --no-line-up turns it off).
  bool line_up_collectives = true;
  // NCCL's kernels at the greatest priority where kernels may run beside a collective
  // (lowering/prioritize_collectives.cpp; orchc --no-collective-priority turns it off).
  bool prioritize_collectives = true;
  // User kernels may be patched at their PTX entry (the wait, guards). False for --emit=cuda,
  // whose kernels nvcc compiles from their source: edges into them stay full and loops holding
  // them are not unrolled.
  bool patch_user_kernels = true;
  // Buffers that are never in use at the same time share one arena (lowering/plan_memory.cpp;
  // orchc --no-memory-plan turns it off).
  bool memory_plan = true;
  // A profile measured by orch-run --profile (orchc --profile; lowering/profile_use.h): the
  // speed passes decide from the launches it measured where it has them. Null: none.
  std::shared_ptr<const lowering::BoundProfile> profile;
};

// Runs every lowering pass on the checked program (to_mir's copy of it: `program` stays as the
// checker made it), builds the lowered program, compiles its kernels and returns the artifact
// bytes; nullopt after errors, which are in `diags`.
// `lowered`, if given, receives the lowered program with its compiled code (for tests).
std::optional<std::string> lower_to_artifact(const ir::Program& program, SourceManager& sources,
                                             const LowerOptions& options, DiagnosticEngine& diags,
                                             lir::Program* lowered = nullptr);

// The lowering passes without kernel compilation and serialization: the lowered program, for
// `--emit=ir|cuda` and tests that need no NVRTC. (Only the
// pass options of `options` count: pdl, unroll, line_up_collectives, prioritize_collectives, patch_user_kernels,
// compile.archs.)
lir::Program lower_to_lir(const ir::Program& program, const LowerOptions& options = {});

// Only the IR-to-IR passes (before build_lir), for tests that look at what they make.
mir::Program lower_graphs(const ir::Program& program, const LowerOptions& options = {});

// LowerOptions with every speed pass off (--no-pdl --unroll 1 --no-line-up
// --no-collective-priority): the graph as the
// DAG of accesses gives it. (The memory plan stays on: it changes no node.)
LowerOptions plain_lowering();
// `options` for --emit=cuda (emit_cuda needs it): nvcc compiles the user kernels from their source,
// so none is patched (edges into them stay full, loops holding them are not unrolled).
LowerOptions for_emit_cuda(LowerOptions options = {});

}  // namespace orch
