// The language server: LSP requests and notifications in, replies and diagnostics out. It holds
// the open documents, checks each in process after a change (debounced: a burst of changes is
// checked once, `debounce_ms` after the last), answers hover, definition, references, document
// symbols and completion from the latest check, and on save compiles the kernels (NVRTC,
// through the kernel cache) on a worker thread, as `orchc --check` does, so kernel errors show
// at their line in the `source` block or `from` file.
//
// The interface is text: JSON bodies in (handle) and out (the Send callback), so nothing here
// needs a transport; lsp/stdio_loop.h runs it over stdin and stdout. Every call comes from one
// thread. A malformed or unexpected message gets an error reply (requests) or is dropped
// (notifications); nothing a client sends makes the server stop except `exit`.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "lsp/analysis.h"

namespace orch::lsp {

using Clock = std::chrono::steady_clock;

// Compiles the kernels of a checked document (its program taken from the analysis) and reports
// what compiling finds; runs on the server's worker thread. lsp/kernel_compile.h has the one
// orch-lsp uses (NVRTC through lowering/, as orchc --check); the server itself does not link
// lowering/, so its fuzzer and tests that need no NVRTC build without it.
using CompileKernels = std::function<void(Analysis& analysis, DiagnosticEngine& diags)>;

struct ServerOptions {
  AnalysisOptions analysis;
  int debounce_ms = 15;
  bool compile_on_save = true;   // and compile_kernels is set
  CompileKernels compile_kernels;
  bool verbose = false;          // a line per check on stderr (times)
};

class Server {
 public:
  using Send = std::function<void(const std::string& body)>;
  // Runs a task on the server's thread later (compile-on-save results come back this way).
  using Post = std::function<void(std::function<void()>)>;

  Server(ServerOptions options, Send send, Post post);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // One message. False once `exit` has been received: the caller stops and exits with
  // exit_code().
  bool handle(const std::string& body);
  // A message the transport could not read (bad header, too large): answered with a JSON-RPC
  // error, as LSP asks for unparsable messages.
  void bad_message(const std::string& why);
  // When the next debounced check is due; nullopt when no document waits.
  std::optional<Clock::time_point> next_due() const;
  // Checks the documents whose time has come (every waiting one when `all`) and publishes their
  // diagnostics.
  void run_due(Clock::time_point now, bool all = false);
  // Waits for a running compile (tests, shutdown); its result is then posted.
  void wait_for_compile();
  // 0 after `shutdown` then `exit`, 1 for an `exit` without `shutdown` (as LSP says).
  int exit_code() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace orch::lsp
