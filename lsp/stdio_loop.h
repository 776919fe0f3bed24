// Runs a Server over a byte stream pair (stdin and stdout for orch-lsp): a reader thread frames
// messages (lsp/json_rpc.h) onto a queue, and this thread takes them, runs the debounced checks
// when they are due and the tasks the server posts (compile-on-save results). Returns the exit
// code: the server's after `exit`, 1 when the input ends without one.
#pragma once

#include <istream>
#include <ostream>

#include "lsp/server.h"

namespace orch::lsp {

int serve(std::istream& in, std::ostream& out, const ServerOptions& options);

}  // namespace orch::lsp
