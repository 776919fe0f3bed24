// What launch_bench does to compiled pipelines, in host C++ (FlatBuffers stays out of nvcc).
#pragma once

#include <string>

namespace orch::bench {

// Rewrites pipeline `in` into `out` with every kernel -> kernel edge programmatic
// (Node.dep_kinds) and every kernel marked as waiting at entry (Kernel.waits_at_entry): what
// orchc will emit for kernels that wait at entry. The kernels' code must really wait
// (griddepcontrol.wait at entry). Returns false with *error on failure.
bool make_programmatic(const std::string& in, const std::string& out, std::string* error);

// The CUBIN for `arch` ("sm_90") of the first kernel of pipeline `path`, and its symbol.
bool first_kernel_cubin(const std::string& path, const std::string& arch, std::string* cubin,
                        std::string* symbol, std::string* error);

// Microseconds to read pipeline `path` and open it (the checksum, the FlatBuffers verifier and
// validate(): the CPU half of Pipeline::load); negative on failure, with *error.
double open_us(const std::string& path, std::string* error);

}  // namespace orch::bench
