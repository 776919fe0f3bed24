// Synthetic pipelines for benchmarks and stress tests: `statements` statements over a pool of
// buffers, mixing kernel launches, copies, fills, scalar updates and conditionals the way a
// large real pipeline would.
#pragma once

#include <string>

namespace orch::bench {

std::string generate_pipeline(int statements, int buffers = 64, unsigned seed = 1);

}  // namespace orch::bench
