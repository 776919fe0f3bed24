// `orchc --emit=cuda`: the lowered program as ONE standalone C++/CUDA file that builds the
// same CUDA graph with plain CUDA runtime calls (no orch runtime, no artifact), for users who
// want to leave orch or see what it does. docs/language.md ("Ejecting") describes the file.
#pragma once

#include <string>

#include "lowering/lir.h"
#include "support/source.h"

namespace orch {

// `lowered` is the lowered program (lower_to_lir(program, for_emit_cuda()); its kernels need not
// be compiled): what serialize() writes to pipeline.bin, printed as CUDA runtime calls. The file
// compiles with
//   nvcc -arch=sm_90 -rdc=true pipeline.cu -lcudadevrt      (-lnccl when it has collectives)
// A user kernel here is its source, which nvcc compiles: one lowered to wait at entry or to be
// guarded (patched PTX, which the file cannot hold) is a caller's mistake: std::logic_error.
std::string emit_cuda(const lir::Program& lowered, const SourceManager& sources);

}  // namespace orch
