// `orchc --emit=cuda`: the lowered program as ONE standalone C++/CUDA file that builds the
// same CUDA graph with plain CUDA runtime calls (no orch runtime, no artifact), for users who
// want to leave orch or see what it does. docs/language.md ("Ejecting") describes the file.
#pragma once

#include <string>

#include "compiler/program.h"
#include "support/source.h"

namespace orch {

// `lowered` is a program after lower_graphs(): every node is a Kernel, Copy, Fill (with its
// memset pattern), If/While/Switch (with its handle) or Collective, and the generated kernels
// are in program.kernels. The file compiles with
//   nvcc -arch=sm_90 -rdc=true pipeline.cu -lcudadevrt      (-lnccl when it has collectives)
std::string emit_cuda(const ir::Program& lowered, const SourceManager& sources);

}  // namespace orch
