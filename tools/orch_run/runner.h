// orch-run's work after the command line: read and check the artifact, check the names and
// values against it, find the GPU, load, instantiate, fill, launch and time, dump.
#pragma once

#include <iosfwd>

#include "tools/orch_run/options.h"

namespace orch::run {

// Returns the exit code (kExitOk, kExitError). Results go to `out`; each error is one
// "orch-run: ..." line on `err`.
int run(Options& options, std::ostream& out, std::ostream& err);

}  // namespace orch::run
