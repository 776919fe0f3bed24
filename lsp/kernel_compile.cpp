#include "lsp/kernel_compile.h"

#include "lowering/lower.h"

namespace orch::lsp {

CompileKernels kernel_compiler(const std::string& cache_dir) {
  LowerOptions lower;
  lower.compile.use_cache = true;
  lower.compile.cache_dir = cache_dir.empty() ? default_kernel_cache_dir() : cache_dir;
  return [lower](Analysis& analysis, DiagnosticEngine& diags) {
    std::unique_ptr<ir::Program> program = analysis.take_program();
    if (program) lower_to_artifact(*program, analysis.sources(), lower, diags);
  };
}

}  // namespace orch::lsp
