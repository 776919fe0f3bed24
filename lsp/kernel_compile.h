// Compile on save: a document's kernels compiled as `orchc --check` compiles them (lowering/:
// NVRTC, nvJitLink, the kernel cache, the checks on compiled code such as E0120 and E0206), so
// an NVRTC error shows at its line in the `source` block or the `from` file. Its own library
// (orch_lsp_kernels), since it brings lowering/ and the CUDA toolkit's libraries.
#pragma once

#include <string>

#include "lsp/server.h"

namespace orch::lsp {

// `cache_dir` empty: orchc's kernel cache (~/.cache/orch/kernels, $ORCH_CACHE_DIR).
CompileKernels kernel_compiler(const std::string& cache_dir);

}  // namespace orch::lsp
